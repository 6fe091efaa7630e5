"""Conformance sweep, warnings PyTorch gives once per process: each library runs the program in
a fresh interpreter."""

from __future__ import annotations

# Warnings PyTorch gives once per process (TORCH_WARN_ONCE) cannot be compared in this process,
# where torch has already given them: each library runs the program in a fresh interpreter.
WARN_ONCE_PROGRAM = """
import warnings
import {module} as torch
w = torch.tensor([1.0, 2.0], requires_grad=True)
seen = []
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    (w ** 2).sum().backward(create_graph=True)
    (w ** 2).sum().backward(create_graph=True)
    torch.autograd.grad((w ** 2).sum(), w, create_graph=True)
    float(w.sum())
    float(w[0])
    w.sum().item()
    int(w[1].detach())
    torch.cross(torch.ones(3, 2), torch.ones(3, 2))  # no dim: deprecated
for warning in caught:
    print(warning.category.__name__, str(warning.message).split(" (Triggered")[0].replace("\\n", " "))
"""


def test_warn_once_warnings_match_torch():
    import subprocess
    import sys

    outputs = []
    for module in ("gradviz", "torch"):
        result = subprocess.run([sys.executable, "-c", WARN_ONCE_PROGRAM.format(module=module)],
                                capture_output=True, text=True, check=True)
        outputs.append(result.stdout)
    assert outputs[0] == outputs[1]
    assert outputs[1].count("UserWarning") == 3
    assert "Using torch.cross without specifying the dim arg" in outputs[1]


# Tensor.T on a tensor that is not 2-D: two TORCH_WARN_ONCE warnings (0-D, and other ndims)
TRANSPOSE_PROPERTY_PROGRAM = """
import warnings
import {module} as torch
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    shapes = [tuple(t.T.shape) for t in (torch.ones(2, 3), torch.tensor(1.0), torch.tensor(2.0),
                                         torch.ones(3), torch.ones(2, 3, 4), torch.ones(5))]
    shapes.append(tuple(torch.ones(2, 3, 4).mT.shape))
print(shapes)
for warning in caught:
    print(warning.category.__name__, str(warning.message).split(" (Triggered")[0], warning.filename)
"""


def test_transpose_property_warnings_match_torch():
    import subprocess
    import sys

    outputs = []
    for module in ("gradviz", "torch"):
        result = subprocess.run([sys.executable, "-c", TRANSPOSE_PROPERTY_PROGRAM.format(module=module)],
                                capture_output=True, text=True, check=True)
        outputs.append(result.stdout.replace("gradviz", "torch"))
    assert outputs[0] == outputs[1]
    assert outputs[1].count("UserWarning") == 2 and "Tensor.T is deprecated on 0-D" in outputs[1]


# Tensor.storage(): TypedStorage's deprecation, given the first time in a process (torch's
# _warn_typed_storage_removal), pointing at the caller's line
STORAGE_PROGRAM = """
import warnings
import {module} as torch
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    sizes = [torch.ones(3).storage().size(), torch.ones(2)[1:].storage().size(), torch.ones(4).storage().size()]
print(sizes)
for warning in caught:
    print(warning.category.__name__, str(warning.message), warning.filename)
"""


def test_typed_storage_warning_is_given_once_as_in_torch():
    import subprocess
    import sys

    outputs = []
    for module in ("gradviz", "torch"):
        result = subprocess.run([sys.executable, "-c", STORAGE_PROGRAM.format(module=module)],
                                capture_output=True, text=True, check=True)
        outputs.append(result.stdout.replace("gradviz", "torch"))
    assert outputs[0] == outputs[1]
    assert outputs[1].count("UserWarning") == 1 and "TypedStorage is deprecated" in outputs[1]
