"""Static drawings of the backward graph: ``to_dot`` (a ``graphviz.Digraph`` in torchviz's
style, from a tensor or a recorded trace) and ``render`` (to a file, through Graphviz's ``dot``).

The ``graphviz`` Python package is the optional extra ``viz`` (``pip install 'gradviz[viz]'``);
it is imported on first use, so ``import gradviz`` never needs it.
"""

from ._dot import render, to_dot

__all__ = ["to_dot", "render"]
