"""``gradviz.linalg``: PyTorch's ``torch.linalg`` (real tensors), batched over leading dims.

Norms (``norm``, ``vector_norm``, ``matrix_norm``, ``cond``), inverses and solvers (``inv``,
``inv_ex``, ``solve``, ``solve_ex``, ``solve_triangular``, ``lstsq``, ``pinv``), determinants
(``det``, ``slogdet``), factorizations (``cholesky``, ``cholesky_ex``, ``qr``, ``eigh``,
``eigvalsh``, ``svd``, ``svdvals``, ``lu``, ``lu_factor``, ``lu_factor_ex`` and ``lu_solve``),
``matrix_rank``, ``matrix_power``, ``matrix_exp``, and the products
``cross``, ``vecdot``, ``multi_dot`` and ``diagonal``. Results are named tuples where
PyTorch's are (``Q, R = gradviz.linalg.qr(A)``); a singular or non-positive-definite matrix
raises :class:`LinAlgError`, a RuntimeError, with PyTorch's message. ``eig`` and ``eigvals``
return complex tensors in PyTorch, which gradviz does not have: they raise TypeError.

Examples
--------
>>> import gradviz as torch
>>> A = torch.tensor([[4.0, 2.0], [2.0, 3.0]])
>>> L = torch.linalg.cholesky(A)
>>> torch.allclose(L @ L.mT, A)
True
>>> torch.linalg.solve(A, torch.tensor([2.0, 1.0]))
tensor([0.5000, 0.0000])
"""

from .ops._linalg import inverse as inv
from .ops._linalg import det
from .ops._linalg_factor import eigvalsh, lstsq, matrix_rank, pinv, svdvals
from .ops._linalg_factor import linalg_eigh as eigh
from .ops._linalg_factor import linalg_qr as qr
from .ops._linalg_factor import linalg_svd as svd
from .ops._linalg_solvers import (LinAlgError, cholesky_ex, inv_ex, multi_dot, solve, solve_ex,
                               solve_triangular, vander, vecdot)
from .ops._linalg import matmul
from .ops._linalg_solvers import linalg_cholesky as cholesky
from .ops._linalg_solvers import linalg_diagonal as diagonal
from .ops._linalg_lu import eig, eigvals, lu_factor, lu_factor_ex, matrix_exp
from .ops._linalg_lu import linalg_lu as lu
from .ops._linalg_lu import linalg_lu_solve as lu_solve
from .ops._linalg_norms import cond, matrix_norm, norm, vector_norm
from .ops._products import linalg_cross as cross
from .ops._products import linalg_slogdet as slogdet
from .ops._products import matrix_power

__all__ = ["LinAlgError", "cholesky", "cholesky_ex", "cond", "cross", "det", "diagonal", "eig",
           "eigh", "eigvals", "eigvalsh", "inv", "inv_ex", "lstsq", "lu", "lu_factor",
           "lu_factor_ex", "lu_solve", "matmul", "matrix_exp", "matrix_norm", "matrix_power", "matrix_rank",
           "multi_dot", "norm", "pinv", "qr", "slogdet", "solve", "solve_ex", "solve_triangular", "svd",
           "svdvals", "vander", "vecdot", "vector_norm"]
