"""The runnable examples in public docstrings are executed (docs/style.md, "Docstrings")."""

from __future__ import annotations

import doctest
import pkgutil

import pytest

import gradviz
from gradviz import _config, _tensor, course, debug, linalg, storage
from gradviz.autograd import _functional, _scopes, functional, grad_mode, gradcheck, graph, reference_engine, variable
from gradviz.autograd.function import _function, _legacy
from gradviz.debug import (
    _base,
    _breakpoints,
    _capture,
    _diff,
    _doctor,
    _replay,
    _report,
    _session,
    _threaded,
    _torch_recorder,
    _torch_scopes,
)
from gradviz.distributions import (
    bernoulli,
    beta,
    binomial,
    categorical,
    dirichlet,
    distribution,
    exponential,
    gamma,
    independent,
    kl,
    laplace,
    log_normal,
    mixture_same_family,
    multivariate_normal,
    normal,
    one_hot_categorical,
    poisson,
    relaxed_bernoulli,
    relaxed_categorical,
    transformed_distribution,
    transforms,
    uniform,
)
from gradviz.distributions import utils as distribution_utils
from gradviz.func import _grad, _module_api
from gradviz.instrument import _module_paths, _recorder, _rollup, _summary, _trace
from gradviz.nn import (
    _activations_and_pools,
    _conv,
    _conv_transpose3d,
    _conv_transpose3d_layer,
    _ctc_loss,
    _dropout,
    _embedding_bag,
    _functional_layers,
    _layers,
    _margin_and_likelihood_losses,
    _normalization,
    _padding,
    _rnn,
    _sampling,
    _state_dict,
    _transformer,
    _unpooling,
    _upsampling,
    _volumetric,
)
from gradviz.nn import grad as nn_grad
from gradviz.nn.utils import rnn as rnn_utils
from gradviz.ops import (
    _as_strided,
    _creation,
    _index_reduce,
    _inplace_views,
    _linalg_factor,
    _linalg_norms,
    _linalg_solvers,
    _statistics,
)
from gradviz.utils import benchmark, data
from gradviz.viz import _dot
from gradviz.widget import _html

MODULES = [_tensor, _functional, reference_engine, _function, _legacy, graph, _session, _creation, _config,
           _base, _breakpoints, _capture, _doctor, _replay, _report, _threaded, _recorder, _summary, _trace, _torch_recorder, _dot, _html,
           functional, _normalization, data, benchmark, _conv, _rnn, rnn_utils, _grad, _module_api,
           gradcheck, grad_mode, _statistics, variable, _layers, _functional_layers, _transformer,
           _upsampling, _padding, _dropout, _margin_and_likelihood_losses, _activations_and_pools, _volumetric, _sampling,
           _embedding_bag, linalg, _linalg_solvers, _linalg_factor, _linalg_norms,
           bernoulli, beta, binomial, categorical, dirichlet, distribution, exponential, gamma,
           independent, kl, laplace, log_normal, mixture_same_family, multivariate_normal, normal,
           one_hot_categorical, poisson, relaxed_bernoulli, relaxed_categorical,
           transformed_distribution, transforms, uniform, distribution_utils,
           _scopes, _module_paths, _rollup, _diff, _torch_scopes, course]
MODULES += [_as_strided, _inplace_views, _index_reduce, _unpooling, _conv_transpose3d, _conv_transpose3d_layer, _state_dict, _ctc_loss]
MODULES += [storage, nn_grad]


@pytest.mark.parametrize("module", MODULES, ids=[m.__name__ for m in MODULES])
def test_docstring_examples(module):
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = [t for t in finder.find(module, globs={"gradviz": gradviz}) if t.examples]
    assert tests, f"{module.__name__} has no docstring examples"
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {module.__name__}"


def test_every_debugger_module_with_examples_is_run():
    """The debugger API's examples are documentation users copy: a gradviz.debug module whose
    docstrings hold examples must be in MODULES, so that they run."""
    listed = {module.__name__ for module in MODULES}
    finder = doctest.DocTestFinder()
    missing = []
    for info in pkgutil.iter_modules(debug.__path__, debug.__name__ + "."):
        module = __import__(info.name, fromlist=["_"])
        if any(t.examples for t in finder.find(module)) and info.name not in listed:
            missing.append(info.name)
    assert not missing, f"add these modules to MODULES in {__file__}: {missing}"
