"""The gradient doctor: which custom backward is wrong, where NaN/Inf started, what was mutated.

``gradviz.debug.doctor(loss)`` examines the graph behind ``loss`` without changing it:

1. **wrong gradients**: every custom Function node is re-run on its recorded forward
   arguments and its backward compared with central finite differences
   (Note [Doctor's finite differences] in ``_gradcheck``); a backward right there is checked
   again at probe points (the recorded inputs scaled, Note [Where the doctor evaluates]) and,
   for several outputs, with each output used alone. A forward that draws random numbers is
   re-run from one fixed generator state (Note [Random forwards] in ``_rerun``); a
   piecewise-constant forward whose backward returns a surrogate (a straight-through
   estimator) is a warning that asks, not an error (Note [Surrogate gradients]). What the
   node's backward returned in the backward pass of item 2 is compared with the re-run's for
   the same incoming gradient (state kept outside ``ctx``, Note [Backward replayed] in
   ``_gradcheck``), and a floating output marked non-differentiable that moves with an input
   is a warning (Note [Floating outputs marked non-differentiable] in ``_rerun``);
2. **non-finite gradients**: one extra backward pass (``retain_graph``, capturing the leaves'
   gradients instead of accumulating them, so ``.grad`` stays as it is) finds the first node,
   in execution order, whose backward produced NaN/Inf;
3. **mutated saved tensors**: saved tensors whose version counter moved, and, for graphs built
   inside :func:`gradviz.debug.capture`, saved tensors whose values changed without it; inputs
   that forward saved and then modified in place (without ``ctx.mark_dirty``);
4. **mutated gradients**: a backward that modifies its ``grad_output`` in place (the engine
   may have handed the same tensor to other nodes, whose gradients it then changes);
5. **coerced gradients**: gradients the engine silently cast to another dtype (seen in the
   backward pass, or in the re-run of the Function), or summed down to the input's shape
   when the result is wrong.

Outside ``capture()`` a custom node is checked from the references to its forward arguments
it keeps by default (Note [Re-running from the kept inputs] in ``_arguments``; before and
after ``backward()``; ``keep_forward_inputs(False)`` turns that off, docs/doctor.md), or else
from what the graph still holds (the tensors the Function saved); otherwise the report lists
it as skipped and says why.

A real PyTorch loss is diagnosed too: the custom ``torch.autograd.Function`` s of its graph
are re-run with torch and checked the same way, with the same findings and hints (Note
[Doctor on PyTorch graphs] in ``_torch_graph``; what torch's graph does not tell, such as
plain forward arguments outside ``capture()``, and what is done instead, is said there).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from .._tensor import Tensor
from . import _capture
from ._arguments import kept_inputs
from ._gradcheck import check_double_backward, check_function
from ._gradviz_graph import GradvizGraph
from ._model_checks import model_findings
from ._report import _WORST, FINDING_KINDS, DoctorReport, Entry, Finding, _fmt, _format_index, _index

__all__ = ["doctor", "DoctorReport", "Finding", "Entry", "FINDING_KINDS"]


def doctor(loss, gradient=None, *, params=None, model_checks: bool = True, seed: int = 0,
           max_entries: int = 256, check_backward: bool = True, double_backward: bool = False,
           progress: Callable | bool | None = None) -> DoctorReport:
    """Diagnose the backward of ``loss``: wrong custom gradients, NaN/Inf, mutated saved tensors.

    Parameters
    ----------
    loss : Tensor or sequence of Tensors
        The root(s) of the graph to examine: gradviz tensors, or ``torch.Tensor`` s of a real
        PyTorch graph (its custom ``torch.autograd.Function`` s are re-run with torch). Nothing
        about the graph changes: ``.grad`` of the leaves (and of tensors that
        ``retain_grad()``) stays as it is and saved tensors are kept; hooks on the graph's
        tensors run in the extra backward pass, as in any backward, except on a PyTorch
        graph without a custom Function, which the doctor walks itself (Note [The doctor's
        own walk] in ``_torch_graph``).
    gradient : Tensor or sequence, optional
        The gradient of the roots for the extra backward pass (default: ones).
    params : Module, iterable of (name, Tensor), optional
        The parameters the model-level checks name (a gradviz or torch Module, or pairs such
        as ``model.named_parameters()``); omitted, the graph's leaves, named by position.
        Parameters that no path reaches are found only among these.
    model_checks : bool
        Run the model-level checks (Note [Model-level checks] in ``_model_checks``,
        docs/doctor.md): missing, cut and zero gradients, unused parameters, accidental
        broadcasts, the origin of NaN/Inf, vanishing/exploding gradients, dead units, a
        double softmax, stale ``.grad`` and saved tensors overwritten in place. Call the
        doctor before ``backward()`` (its own backward pass needs the saved tensors).
    seed : int
        Seeds the random cotangents and the choice of entries of large inputs.
    max_entries : int
        At most this many entries of each input are checked (chosen at random beyond that).
    check_backward : bool
        Run one extra backward pass to find NaN/Inf and silently cast gradients.
    double_backward : bool
        Also check each custom backward's own derivative (what ``create_graph=True`` uses,
        Note [Doctor's double backward]); a backward that cannot be differentiated is then a
        ``wrong_double_backward`` finding unless it is ``@once_differentiable``.
    progress : callable or bool, optional
        ``progress(done, total, label)`` after each step; ``True`` prints a line per step.

    Returns
    -------
    DoctorReport

    Examples
    --------
    >>> import gradviz as torch
    >>> class BadSquare(torch.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         ctx.save_for_backward(x)
    ...         return x * x
    ...     @staticmethod
    ...     def backward(ctx, grad):
    ...         (x,) = ctx.saved_tensors
    ...         return -2 * x * grad
    >>> x = torch.tensor([1.0, 2.0], requires_grad=True)
    >>> report = torch.debug.doctor(BadSquare.apply(x).sum())
    >>> report.ok, report.findings[0].kind, report.findings[0].input_index
    (False, 'wrong_gradient', 0)
    >>> print(report.findings[0].message)  # doctest: +ELLIPSIS
    BadSquareBackward input 0: gradient disagrees with finite differences ... sign flipped?

    The same bug in a ``torch.autograd.Function``, on a real PyTorch graph:

    >>> import torch as pytorch
    >>> class TorchBadSquare(pytorch.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x, scale):
    ...         ctx.save_for_backward(x)
    ...         return x * x * scale
    ...     @staticmethod
    ...     def backward(ctx, grad):
    ...         (x,) = ctx.saved_tensors
    ...         return -2 * x * grad, None
    >>> x = pytorch.tensor([1.0, 2.0], requires_grad=True)
    >>> with torch.debug.capture():  # torch keeps no record of the plain argument 1.0
    ...     loss = TorchBadSquare.apply(x, 1.0).sum()
    >>> print(torch.debug.doctor(loss).findings[0].message)  # doctest: +ELLIPSIS
    TorchBadSquareBackward input 0: gradient disagrees with finite differences ... sign flipped?
    >>> x.grad is None
    True
    """
    roots = (loss,) if isinstance(loss, Tensor) or _is_torch(loss) else _loss_sequence(loss)
    graph = _graph(roots)
    nodes, custom = graph.nodes, graph.custom
    report = DoctorReport(node_id=graph.node_id)
    # a model session (params given) shows the model-level checks as a step of their own
    model_step = model_checks and params is not None
    reporter = _progress_reporter(progress, len(custom) + (1 if check_backward else 0)
                                  + (1 if model_step else 0))

    # The doctor re-runs Functions: keep them out of any forward recorder (and capture).
    with graph.paused():
        report.findings.extend(graph.saved_findings())
        pass_result = None
        if check_backward:
            pass_result = graph.backward_pass(gradient, report)
            reporter("backward pass")
        checks, arguments = {}, {}
        for node in custom:
            args, reason = graph.arguments(node)
            arguments[node] = args
            if args is None:
                report.skipped.append((node, reason))
            else:
                incoming = returned = None
                if pass_result is not None:
                    incoming = pass_result.grads_in.get(node)
                    # Note [Backward replayed]: not where saved tensors changed since forward
                    if not any(f.node is node and f.kind == "mutated_saved"
                               for f in report.findings):
                        returned = pass_result.grads_out.get(node)
                check = check_function(node._forward_cls, args, node.needs_input_grad, seed,
                                       max_entries, incoming, rerun=graph.rerun,
                                       returned=returned)
                checks[node] = check
                if check.skipped is not None:
                    report.skipped.append((node, check.skipped))
                else:
                    report.checked.append(node)
                    if double_backward and check.ok:
                        second, reason = check_double_backward(node._forward_cls, args,
                                                               node.needs_input_grad, seed,
                                                               rerun=graph.rerun)
                        if second is None:
                            report.notes.append(f"{node.name()}: double backward not checked: "
                                                f"{reason}")
                        else:
                            report.findings.extend(_double_backward_findings(node, second))
            reporter(node.name())
    behind = _behind_the_graph(nodes, custom, graph.torch)
    if graph.torch and not custom and not behind:  # else the note below says more
        report.notes.append("the graph has no custom torch.autograd.Function: nothing to check "
                            "against finite differences (the NaN/Inf pass and the saved-tensor "
                            "checks ran)" if check_backward else
                            "the graph has no custom torch.autograd.Function: nothing to check "
                            "against finite differences")

    if behind:
        report.notes.append(_behind_note(behind, custom))

    order = {node: i for i, node in enumerate(nodes)}
    findings = []
    if pass_result is not None:
        findings.extend(_pass_findings(pass_result, checks))
    findings.extend(_rerun_cast_findings(checks, arguments, findings))
    for node, check in checks.items():
        findings.extend(_check_findings(node, check, findings))
    findings.extend(report.findings)
    if model_checks:
        custom_findings = [f for f in findings if f.function is not None]
        more, notes = model_findings(roots, nodes, params, pass_result,
                                     sys.modules["torch"] if graph.torch else None,
                                     custom_findings, arguments)
        findings.extend(more)
        report.notes.extend(notes)
        if model_step:
            reporter("model checks")
    findings.sort(key=lambda f: (order.get(f.node, len(order)), FINDING_KINDS.index(f.kind)))
    _name_repeated_nodes(findings, custom, graph.node_id)
    report.findings = findings
    return report


def _loss_sequence(loss) -> tuple:
    """``doctor``'s ``loss`` given as several tensors (a list or tuple); anything else is a
    TypeError that says what was expected (a bare number is not iterable, a module is no loss)."""
    if isinstance(loss, (list, tuple)):
        return tuple(loss)
    raise TypeError(f"doctor: loss must be a tensor (gradviz or torch) or a list of tensors, got "
                    f"{type(loss).__name__}; pass the tensor your backward() starts from, e.g. "
                    f"doctor(loss) after loss = criterion(model(x), y)")


def _is_torch(value):
    return type(value).__module__.split(".")[0] == "torch"


def _graph(roots):
    """The doctor's view of the graph behind ``roots``: gradviz's, or PyTorch's when the roots
    are ``torch.Tensor`` s (Note [Doctor on PyTorch graphs] in ``_torch_graph``)."""
    # a gradviz or a torch tensor and graph: the doctor uses what the two have in common
    tensor_type: type[Any] = Tensor
    graph_type: type[Any] = GradvizGraph
    if roots and _is_torch(roots[0]):
        try:
            import torch

            from ._torch_graph import TorchGraph
        except ImportError as exc:
            raise ImportError(
                f"doctor: loss[0] is a PyTorch {type(roots[0]).__name__}, but torch cannot be "
                f"imported ({exc}); the doctor needs torch to re-run the graph's "
                f"torch.autograd.Functions: repair the torch installation, or build the model "
                f"with gradviz (import gradviz as torch)") from exc
        tensor_type, graph_type = torch.Tensor, TorchGraph
    for index, root in enumerate(roots):
        if not isinstance(root, tensor_type):
            kind = type(root)
            if isinstance(root, Tensor) or _is_torch(root):
                first, this = (("PyTorch", "gradviz") if tensor_type is not Tensor
                               else ("gradviz", "PyTorch"))
                raise TypeError(
                    f"doctor: loss[{index}] is a {this} {kind.__name__} but loss[0] is a "
                    f"{first} tensor; the roots must come from one graph: all PyTorch or all "
                    f"gradviz")
            raise TypeError(f"doctor: loss[{index}] must be a Tensor, got {kind.__name__}")
        if not root.requires_grad:
            raise RuntimeError(
                f"element {index} of tensors does not require grad and does not have a grad_fn"
            )
    return graph_type(roots, _walk([r.grad_fn for r in roots if r.grad_fn is not None]))


# Note [Custom Functions behind a gradient penalty]
# -------------------------------------------------
# A loss built only from gradients (``autograd.grad(task, x, create_graph=True)``, then a
# penalty of them) holds the nodes that a custom Function's *backward* made, but not the
# custom node itself: its gradient reaches the loss only through its backward's derivative.
# The doctor then checks no custom Function, and "no problems found" would be read as "the
# custom Functions are right". Inside ``capture()`` every node made while a custom backward
# ran is linked to that custom node (``_capture.made_in_backward_of``); on PyTorch graphs,
# hooks on each custom node recorded inside capture() note the nodes its backward made there
# (Note [Capturing PyTorch Functions] in ``_capture``). The report names those Functions and
# says how to check them. Outside capture() neither engine keeps that link, and nothing is
# said.


def _behind_the_graph(nodes, custom, torch=False):
    """The custom Function nodes, not in the graph, whose backward made nodes of it."""
    inside = set(custom)
    behind = []
    index = _capture.torch_made_in_backward() if torch else None
    for node in nodes:
        if index is None:
            maker = _capture.made_in_backward_of(node)
        else:
            maker = index.get((node._sequence_nr(), node.name()))
        if maker is not None and maker not in inside and maker not in behind:
            behind.append(maker)
    return behind


def _behind_note(behind, custom):
    names = ", ".join(sorted({node.name() for node in behind}))
    several = len(behind) > 1
    return (f"custom Function node{'s' if several else ''} {names} "
            f"{'were' if several else 'was'} used in building this graph's backward "
            f"(create_graph=True: the graph holds nodes {'their' if several else 'its'} "
            f"backward made, as in a gradient penalty) but {'are' if several else 'is'} not in "
            f"the loss's graph, so {'they were' if several else 'it was'} not checked"
            f"{' (the ' + str(len(custom)) + ' checked are other nodes)' if custom else ''}; "
            f"to check {'them' if several else 'it'}, call doctor on the first-order loss the "
            f"gradient was taken of, or on a loss that also includes that task term with "
            f"double_backward=True (which also checks the derivative of "
            f"{'their' if several else 'its'} backward)")


def _name_repeated_nodes(findings, custom, node_id):
    """A Function applied several times has one node per use, all of one name: say which use
    (in forward order) and the node's id, so two findings of one name can be told apart."""
    uses: dict[object, list] = {}
    for node in sorted(custom, key=lambda n: n._sequence_nr()):
        uses.setdefault(_function(node), []).append(node)
    for finding in findings:
        nodes = uses.get(finding.function, ())
        if len(nodes) > 1 and finding.node in nodes:
            number = nodes.index(finding.node) + 1
            finding.details["use"] = number
            finding.message += (f" [use {number} of {len(nodes)} of {finding.function.__name__} "
                                f"in forward order, node {node_id(finding.node)}]")


# ---- the graph ------------------------------------------------------------------------------

def _walk(starts):
    """Every node reachable from ``starts`` (iteratively), in backward execution order
    (higher ``sequence_nr`` first, as the engine's ready queue)."""
    seen = set()
    nodes = []
    stack = list(starts)
    for node in starts:
        seen.add(node)
    while stack:
        node = stack.pop()
        nodes.append(node)
        for next_node, _ in node.next_functions:
            if next_node is not None and next_node not in seen:
                seen.add(next_node)
                stack.append(next_node)
    nodes.sort(key=lambda n: -n._sequence_nr())
    return nodes



def _function(node):
    return getattr(node, "_forward_cls", None)


def _position(node, edge_index):
    """The forward argument position of edge ``edge_index`` of a node."""
    positions = getattr(node, "_tensor_input_positions", None)
    if positions is None:  # a torch custom Function's node, recorded inside capture()
        positions = getattr(getattr(node, _capture.TORCH_RECORD, None), "tensor_positions", None)
    if positions and edge_index < len(positions):
        return positions[edge_index]
    return edge_index


def _progress_reporter(progress, total):
    done = [0]

    def report(label):
        done[0] += 1
        if progress is True:
            print(f"gradient doctor: {done[0]}/{total} {label}", file=sys.stdout, flush=True)
        elif callable(progress):
            progress(done[0], total, label)

    return report


# ---- the extra backward pass's findings ---------------------------------------------------

def _pass_findings(observer, checks):
    findings = []
    if observer.first_nonfinite is not None:
        node, (slot, nan, inf, first), incoming, after_hooks = observer.first_nonfinite
        position = _position(node, slot)
        counts = f"{nan} NaN, {inf} Inf, the first at {_format_index(first)}"
        if incoming is not None:
            source = ("its incoming gradient was already non-finite (the gradient given to "
                      "the backward pass, or a sum that overflowed)")
        elif after_hooks is not None:
            source = "a hook made its incoming gradient non-finite"
        else:
            source = "from finite incoming gradients"
        message = (f"{node.name()} produced the first non-finite gradient of the backward pass "
                   f"(input {position}: {counts}), {source}")
        findings.append(Finding(kind="nonfinite", function=_function(node), node=node,
                                input_index=position, message=message,
                                details={"nan": nan, "inf": inf,
                                         "inputs_nonfinite": incoming is not None or after_hooks is not None}))
    if observer.failure is not None:
        node, exc = observer.failure
        message = str(exc)
        if not message.startswith(("one of the variables needed for gradient computation",
                                   "Trying to backward through the graph a second time")):
            findings.append(_backward_error(node, exc))
    for node, slot, from_dtype, to_dtype in observer.casts:
        position = _position(node, slot)
        args = getattr(node, "_forward_args", None)
        if args is not None and position < len(args) and isinstance(args[position], Tensor) \
                and args[position].dtype is from_dtype:
            continue  # the cast was to a declared grad dtype, not away from the input's
        check = checks.get(node)
        message = (f"{node.name()} input {position}: backward returned a {from_dtype.name} "
                   f"gradient for a {to_dtype.name} input; the engine cast it silently")
        # a cast is only a warning: a wrong gradient is reported on its own; but a cast from
        # a narrower dtype may be why it is wrong (precision lost in backward)
        severity = "warning"
        if check is not None and from_dtype.itemsize < to_dtype.itemsize \
                and any(s.position == position and not s.ok for s in check.slots):
            severity = "error"
        findings.append(Finding(kind="coerced_gradient", function=_function(node), node=node,
                                input_index=position, message=message, severity=severity,
                                hint=f"return the gradient in the input's dtype ({to_dtype.name})",
                                details={"from_dtype": from_dtype.name, "to_dtype": to_dtype.name}))
    return findings


def _dtype_name(value):
    """A gradviz or torch tensor's dtype as numpy names it (float64), else None."""
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        return None
    return getattr(dtype, "name", None) or str(dtype).removeprefix("torch.")


def _rerun_cast_findings(checks, arguments, earlier):
    """A gradient backward returned in another floating dtype than its input's, seen by the
    re-run (torch's engine casts it where the backward pass's hooks cannot see, Note [Doctor
    on PyTorch graphs]; for gradviz graphs the backward pass sees it first)."""
    findings = []
    for node, check in checks.items():
        args = arguments.get(node) or ()
        for slot in check.slots:
            position = slot.position
            if slot.cast_from is None or position >= len(args):
                continue
            declared = _dtype_name(args[position])
            if declared is None or declared == slot.cast_from or any(
                    f.kind == "coerced_gradient" and f.node is node
                    and f.input_index == position for f in earlier):
                continue
            narrower = np.dtype(slot.cast_from).itemsize < np.dtype(declared).itemsize
            message = (f"{node.name()} input {position}: backward returns a {slot.cast_from} "
                       f"gradient for a {declared} input (seen in the doctor's re-run); the "
                       f"engine casts it silently"
                       + (", and the precision it lost is lost for the input's gradient"
                          if narrower else ""))
            findings.append(Finding(
                kind="coerced_gradient", function=_function(node), node=node,
                input_index=position, message=message,
                severity="error" if narrower and not slot.ok else "warning",
                hint=f"return the gradient in the input's dtype ({declared})",
                details={"from_dtype": slot.cast_from, "to_dtype": declared, "rerun": True}))
    return findings


# ---- finite-difference findings ----------------------------------------------------------

def _check_findings(node, check, earlier):
    findings = []
    if check.backward_error is not None:
        if not any(f.kind == "backward_error" and f.node is node for f in earlier):
            findings.append(_backward_error(node, check.backward_error))
        return findings
    findings.extend(_mutation_findings(node, check))
    if check.mutated_inputs or check.mutated_saved:
        return findings  # the gradient is wrong because of the mutation, said there
    for slot in check.slots:
        findings.extend(_slot_findings(node, check, slot, earlier))
    for output, position in sorted(check.frozen.items()):
        findings.append(_frozen_finding(node, output, position))
    for position, (given, rerun) in sorted(check.replayed.items()):
        findings.append(_replayed_finding(node, position, given, rerun))
    if check.alone is not None:
        output, alone = check.alone
        if alone.backward_error is not None:
            exc = alone.backward_error
            failed = [f for f in earlier if f.kind == "backward_error" and f.node is node]
            if not failed:
                findings.append(_backward_error(
                    node, exc, when=f"when only output {output} is used (the others' gradients "
                                    f"are None, or zeros)",
                    hint=_none_hint(exc)))
            else:
                _explain_pass_failure(failed[0], exc, output)
        else:
            for slot in alone.slots:
                findings.extend(_slot_findings(node, alone, slot, earlier, alone=output))
    if check.probe is not None:
        factor, probe = check.probe
        if probe.backward_error is not None:
            findings.append(_probe_backward_error(node, probe.backward_error, factor))
        for slot in probe.slots:
            findings.extend(_slot_findings(node, probe, slot, earlier, probe=factor))
    return findings


def _replayed_finding(node, position, given, rerun):
    """Note [Backward replayed] in ``_gradcheck``: the graph's backward pass gave another
    gradient than forward and backward run again together."""
    count, worst = _changed_entries(rerun, given)
    first = worst[0]
    error = np.abs(given - rerun)
    name = _function(node).__name__
    hint = (f"backward reads something forward did not keep on ctx: state on the class or in "
            f"a global (or a closure) that a later call, such as another use of {name}, "
            f"changed before the backward pass; keep what backward needs on ctx "
            f"(ctx.factor = factor, or ctx.save_for_backward)")
    message = (f"{node.name()} input {position}: in the graph's backward pass it returned "
               f"another gradient than the same backward gives right after its forward is "
               f"run again on the recorded inputs, with the same incoming gradient ({count} of "
               f"{given.size} entries differ; at {_format_index(first.index)}: re-run "
               f"{_fmt(first.analytic)}, in the graph {_fmt(first.numeric)}); finite "
               f"differences agree with the re-run - {hint}")
    worst = [Entry(e.index, e.numeric, e.analytic) for e in worst]
    return Finding(kind="wrong_gradient", function=_function(node), node=node,
                   input_index=position, message=message, worst=worst, hint=hint,
                   max_abs_error=float(np.nanmax(error)) if error.size else 0.0,
                   details={"replayed": True, "mismatched": count, "checked": int(given.size)})


def _frozen_finding(node, output, position):
    """Note [Floating outputs marked non-differentiable] in ``_rerun``."""
    hint = (f"if the loss uses output {output}, remove ctx.mark_non_differentiable for it and "
            f"let backward use its gradient; mark only indices, counts, masks, or values meant "
            f"as constants (a statistic for a running average)")
    message = (f"{node.name()} output {output} is marked non-differentiable "
               f"(ctx.mark_non_differentiable) but is a floating-point tensor that changes with "
               f"input {position}: any gradient a loss sends through it is dropped silently, so "
               f"input {position} misses that part of its gradient - {hint}")
    return Finding(kind="wrong_gradient", function=_function(node), node=node,
                   input_index=position, message=message, hint=hint, severity="warning",
                   details={"non_differentiable_output": output})


def _probe_backward_error(node, exc, factor):
    """A backward that raises at a probe point where its forward ran (Note [Where the doctor
    evaluates] in ``_gradcheck``): an error for a name or attribute that does not exist there,
    else a warning."""
    hint = None
    if isinstance(exc, AttributeError) and "Backward' object has no attribute" in str(exc):
        hint = ("backward reads a ctx attribute that forward sets for some inputs only (on one "
                "branch of an if): set it on every path through forward")
    finding = _backward_error(node, exc, hint=hint,
                              when=f"at other inputs than the recorded ones (with the checked "
                                   f"inputs scaled by {factor:g}; at the recorded inputs it runs)")
    finding.details["probe"] = factor
    if not isinstance(exc, (AttributeError, NameError)):  # UnboundLocalError is a NameError
        finding.severity = "warning"
    return finding


def _explain_pass_failure(finding, exc, output):
    """The backward pass's failure of a node, reproduced by the re-run with only ``output``
    used: say so, and what None means there (the re-run with every output used succeeded)."""
    hint = _none_hint(exc)
    if finding.hint is not None or hint is None \
            or type(exc) is not type(finding.details.get("exception")):
        return
    finding.hint = hint
    finding.message += (f" (the re-run raises it too when only output {output} is used, and "
                        f"not when every output is) - {hint}")


def _none_hint(exc):
    if isinstance(exc, (TypeError, AttributeError)) and "NoneType" in str(exc):
        return ("with ctx.set_materialize_grads(False) the gradient of an unused output is "
                "None: check for None before using it")
    return None


def _slot_findings(node, check, slot, earlier, probe=None, alone=None):
    """The findings of one checked slot: at the recorded inputs, or at a probe point (the
    factor the inputs were scaled by), or with one output used ``alone``."""
    name = node.name()
    findings = []
    if slot.nonfinite.any():
        findings.extend(_nonfinite_finding(node, slot, earlier, probe))
    if not slot.mismatched.any():
        return findings
    keep = slot.mismatched
    if slot.shown is not None:
        flat, analytic, numeric = slot.shown
    else:
        flat, analytic, numeric = slot.indices[keep], slot.analytic[keep], slot.numeric[keep]
    error = np.abs(analytic - numeric)
    relative = error / np.maximum(np.maximum(np.abs(analytic), np.abs(numeric)), 1e-300)
    order = np.argsort(-error)[:_WORST]
    worst = [Entry(_index(flat[i], slot.shape), float(analytic[i]), float(numeric[i]))
             for i in order]
    first = worst[0]
    where = (f"{int(keep.sum())} of {len(slot.indices)} checked entries disagree; max abs "
             f"err {_fmt(float(error[order[0]]))} at {_format_index(first.index)}: "
             f"analytic {_fmt(first.analytic)} vs numeric {_fmt(first.numeric)}")
    details = {"dtype": check.dtype, "checked": int(len(slot.indices)),
               "mismatched": int(keep.sum()), "sampled": slot.sampled,
               "excluded_near_kink": slot.excluded_near_kink,
               "grad_output": "incoming" if slot.shown is not None else "random"}
    when = ""
    if probe is not None:
        details["probe"] = probe
        when = (f" at other inputs than the recorded ones: with the checked inputs scaled by "
                f"{probe:g}; at the recorded inputs it agrees")
    elif alone is not None:
        details["alone"] = alone
        when = (f" when only output {alone} is used (the others' gradients are None, or "
                f"zeros); with every output used it agrees")
    if slot.reduced_from is not None:
        kind = "coerced_gradient"
        message = (f"{name} input {slot.position}: backward returned a gradient of shape "
                   f"{list(slot.reduced_from)} for an input of shape {list(slot.shape)}; the "
                   f"engine summed it down (over the leading dimensions, lining the shapes up "
                   f"from the right as broadcasting does: an input broadcast along another "
                   f"dimension needs that sum in backward) and the result disagrees with "
                   f"finite differences{when} ({where})")
        details["returned_shape"] = list(slot.reduced_from)
    elif slot.none_returned:
        kind = "wrong_gradient"
        message = (f"{name} input {slot.position}: backward returned None, but the gradient "
                   f"is not zero{when} (at {_format_index(first.index)}: numeric "
                   f"{_fmt(first.numeric)})")
    else:
        kind = "wrong_gradient"
        message = (f"{name} input {slot.position}: gradient disagrees with finite "
                   f"differences{when} ({where})")
        if slot.shown is None and probe is None:
            message = message[:-1] + ", with a random grad_output)"
    hint = slot.hint
    severity = "error"
    if slot.locally_constant and probe is None and kind == "wrong_gradient" \
            and not slot.none_returned:
        # Note [Surrogate gradients]
        severity = "warning"
        details["surrogate"] = True
        hint = (f"the forward is locally constant in input {slot.position} (no output moved "
                f"at any checked entry: round, sign, a step, an argmax), so its true gradient "
                f"is zero; a surrogate gradient such as a straight-through estimator? If it "
                f"is intended, this is not a bug; otherwise backward should return zeros")
        message = (f"{name} input {slot.position}: backward returns a non-zero gradient where "
                   f"the forward's finite differences are exactly zero{when} ({where})")
    if hint and not slot.none_returned:
        message += f" - {hint}"
    findings.append(Finding(kind=kind, function=_function(node), node=node,
                            input_index=slot.position, message=message,
                            max_abs_error=float(error.max()),
                            max_rel_error=float(relative.max()), worst=worst, hint=hint,
                            severity=severity, details=details))
    return findings


# Note [Surrogate gradients]
# --------------------------
# A straight-through estimator (round or sign in forward, the identity or a clipped identity
# in backward) is a backward that disagrees with its forward on purpose: the forward is
# piecewise constant, its true gradient zero almost everywhere, and the surrogate is what
# training needs. Finite differences cannot tell an intended surrogate from a bug. So when
# no output moved at any checked entry of an input at the recorded inputs (every finite
# difference exactly zero; entries at a jump are excluded as kinks; at a probe point the
# forward may be constant where the user's inputs never were, as a relu at negative inputs,
# and a mismatch there stays an error) and backward returns non-zero values there, the
# finding is a *warning* (``details["surrogate"]``; ``report.ok`` stays True) that says what
# was seen and asks, instead of an error that claims a bug with a certainty it does not have.


def _nonfinite_finding(node, slot, earlier, probe=None):
    keep = slot.nonfinite
    flat = slot.indices[keep]
    worst = [Entry(_index(j, slot.shape), float(a), float(n))
             for j, a, n in zip(flat[:_WORST], slot.analytic[keep][:_WORST], slot.numeric[keep][:_WORST])]
    for finding in earlier:
        if finding.kind == "nonfinite" and finding.node is node:
            finding.worst = worst  # the backward pass already found it: add where
            if finding.input_index is None:
                finding.input_index = slot.position
            return []
    first = worst[0]
    when = "" if probe is None else (f" at other inputs than the recorded ones (with the "
                                     f"checked inputs scaled by {probe:g})")
    message = (f"{node.name()} input {slot.position}: backward returns non-finite values where "
               f"the gradient is finite{when} ({int(keep.sum())} entries; at "
               f"{_format_index(first.index)}: analytic {_fmt(first.analytic)} vs numeric "
               f"{_fmt(first.numeric)})")
    return [Finding(kind="nonfinite", function=_function(node), node=node,
                    input_index=slot.position, message=message, worst=worst,
                    details={"entries": int(keep.sum())})]


# The engine's errors about what a backward returned, and where they put the slot (PyTorch's
# messages: "at index i" counts the tensor arguments, "at position p" all of them from 1).
_SLOT_IN_MESSAGE = (
    (re.compile(r"returned an invalid gradient at index (\d+)"), "edge"),
    (re.compile(r"returned a gradient different than None at position (\d+)"), "position1"),
    (re.compile(r"returned it as the gradient at position (\d+)"), "position1"),
)


def _backward_error(node, exc, when="", hint=None):
    """A backward_error finding; the input slot too when the engine's message names it."""
    text = str(exc)
    position = None
    for pattern, counts in _SLOT_IN_MESSAGE:
        match = pattern.search(text)
        if match is not None:
            number = int(match.group(1))
            position = _position(node, number) if counts == "edge" else number - 1
            break
    where = "" if position is None else f" (input {position})"
    when = f" {when}" if when else ""
    hint = hint or _shape_hint(text)
    if hint is None and position is not None and "the corresponding forward input was not a" \
            in text:
        hint = (f"forward argument {position} is not a tensor (a number, a flag, or None for "
                f"an optional tensor), so backward must return None in its place: return a "
                f"gradient only when ctx.needs_input_grad[{position}] is True")
    if hint is None:
        hint = _count_hint(node, text)
    message = f"{node.name()}: backward raised {type(exc).__name__}{where}{when}: {exc}"
    if hint:
        message += f" - {hint}"
    return Finding(kind="backward_error", function=_function(node), node=node,
                   input_index=position, message=message, hint=hint,
                   details={"exception": exc})


_COUNT = re.compile(r"incorrect number of gradients \(expected (\d+), got (\d+)\)")


def _count_hint(node, text):
    """For the engine's wrong-number-of-gradients error: one value per forward argument, and
    what those arguments were when the node kept them."""
    match = _COUNT.search(text)
    if match is None:
        return None
    expected, got = int(match.group(1)), int(match.group(2))
    args = getattr(node, "_forward_args", None)  # recorded inside capture()
    if args is None:  # a torch custom Function's node, recorded inside capture()
        args = getattr(getattr(node, _capture.TORCH_RECORD, None), "args", None)
    if args is None and hasattr(node, "_tensor_input_positions"):  # a gradviz node
        args = kept_inputs(node)[0]
    kinds = ""
    if args is not None and len(args) == expected:
        kinds = " (" + ", ".join("tensor" if hasattr(a, "shape") and hasattr(a, "dtype")
                                 else type(a).__name__ for a in args) + ")"
    return (f"backward must return one value per forward argument: {expected}{kinds}, None "
            f"for each that is not a tensor or needs no gradient; it returned {got}")


_INVALID_SHAPE = re.compile(r"got \[([\d, ]*)\] but expected shape compatible with \[([\d, ]*)\]")


def _shape_hint(text):
    """For the engine's invalid-gradient-shape error: what the shape says about the bug."""
    match = _INVALID_SHAPE.search(text)
    if match is None:
        return None
    got = [int(d) for d in match.group(1).split(",") if d.strip()]
    want = [int(d) for d in match.group(2).split(",") if d.strip()]
    if len(got) == len(want) and sorted(got) == sorted(want) and 1 in want:
        return (f"return it in the input's shape {want}: it was summed over the wrong "
                f"dimension (sum over the dimensions the input was broadcast along)")
    if len(got) == len(want) >= 2 and got[:-2] + got[-2:][::-1] == want:
        return (f"return it in the input's shape {want}: the gradient looks transposed (the "
                f"transpose is missing, or one too many)")
    joined = _joined_along(got, want)
    if joined is not None:
        return (f"return it in the input's shape {want}: it looks like pieces joined along dim "
                f"{joined[0]} where dim {joined[1]} was meant (cat/stack over the wrong dim; a "
                f"reshape would scramble the entries)")
    if int(np.prod(got)) == int(np.prod(want)):
        return f"return it in the input's shape {want}: it has the right size, reshape it"
    if len(got) < len(want):
        return (f"return it in the input's shape {want}: a reduction dropped a dimension "
                f"(keepdim=True?)")
    return (f"return it in the input's shape {want}, or in a shape that broadcasts to the "
            f"output and sums down to it")


def _joined_along(got, want):
    """``(dim, meant)`` when ``got`` is ``want`` with one dimension ``k`` times longer and
    another ``k`` times shorter (pieces of ``want`` concatenated along the wrong dim)."""
    if len(got) != len(want):
        return None
    differ = [d for d in range(len(got)) if got[d] != want[d]]
    if len(differ) != 2:
        return None
    first, second = differ
    for longer, shorter in ((first, second), (second, first)):
        if got[longer] > want[longer] and want[longer] and got[longer] % want[longer] == 0:
            k = got[longer] // want[longer]
            if got[shorter] * k == want[shorter]:
                return longer, shorter
    return None


def _changed_entries(before, after):
    """(count, worst Entries) of the entries that differ between two arrays of one shape."""
    with np.errstate(invalid="ignore"):
        change = np.abs(after - before).reshape(-1)
    differ = ~((before == after) | (np.isnan(before) & np.isnan(after))).reshape(-1)
    flat = np.flatnonzero(differ)
    order = flat[np.argsort(-np.nan_to_num(change[flat], nan=np.inf))][:_WORST]
    worst = [Entry(_index(j, before.shape), float(before.reshape(-1)[j]),
                   float(after.reshape(-1)[j])) for j in order]
    return int(flat.size), worst


def _mutation_findings(node, check):
    """Findings for what the re-run saw forward and backward modify in place."""
    findings = []
    name = node.name()
    for position, (before, after) in sorted(check.mutated_inputs.items()):
        count, worst = _changed_entries(before, after)
        first = worst[0]
        wrong = [s.position for s in check.slots if not s.ok]
        consequence = (f"; backward computes with the modified values, so the gradient of "
                       f"input{'s' if len(wrong) > 1 else ''} "
                       f"{', '.join(str(p) for p in wrong)} disagrees with finite differences"
                       if wrong else "")
        message = (f"{name}: forward saved input {position} for backward and then modified it "
                   f"in place ({count} of {before.size} entries changed; at "
                   f"{_format_index(first.index)}: saved {_fmt(first.analytic)}, then "
                   f"{_fmt(first.numeric)}), without ctx.mark_dirty{consequence}")
        findings.append(Finding(kind="mutated_saved", function=_function(node), node=node,
                                input_index=position, message=message, worst=worst,
                                hint="save a clone, or modify a copy (out-of-place) in forward",
                                details={"in_forward": True, "wrong_inputs": wrong}))
    for index, (before, after, output) in sorted(check.mutated_saved.items()):
        count, worst = _changed_entries(before, after)
        first = worst[0]
        wrong = [s.position for s in check.slots if not s.ok]
        what = f"saved tensor {index}" + (f" (its output {output})" if output is not None else "")
        consequence = (f", so the gradient of input{'s' if len(wrong) > 1 else ''} "
                       f"{', '.join(str(p) for p in wrong)} disagrees with finite differences"
                       if wrong else "")
        message = (f"{name}: forward modified {what} in place after saving it for backward "
                   f"({count} of {before.size} entries changed; at "
                   f"{_format_index(first.index)}: saved {_fmt(first.analytic)}, then "
                   f"{_fmt(first.numeric)}); the saved value is taken when forward returns, so "
                   f"backward computes with the modified values{consequence}")
        findings.append(Finding(kind="mutated_saved", function=_function(node), node=node,
                                input_index=wrong[0] if len(wrong) == 1 else None,
                                message=message, worst=worst,
                                hint="save what backward needs after the in-place op (or save "
                                     "a clone, or modify out of place)",
                                details={"in_forward": True, "saved_index": index,
                                         "output": output, "wrong_inputs": wrong}))
    for output, (before, after) in sorted(check.mutated_grad_outputs.items()):
        count, worst = _changed_entries(before, after)
        first = worst[0]
        message = (f"{name}: backward modified its grad_output {output} in place ({count} of "
                   f"{before.size} entries changed; at {_format_index(first.index)}: given "
                   f"{_fmt(first.analytic)}, then {_fmt(first.numeric)}); the engine can hand "
                   f"the same gradient tensor to other nodes, whose gradients then change too")
        findings.append(Finding(kind="mutated_grad_output", function=_function(node), node=node,
                                input_index=None, message=message, worst=worst,
                                hint="compute out of place (grad * x, not grad.mul_(x))",
                                details={"output_index": output}))
    return findings


def _double_backward_findings(node, check):
    findings = []
    for slot in check.slots:
        if not slot.mismatched.any():
            continue
        keep = slot.mismatched
        flat, analytic, numeric = slot.indices[keep], slot.analytic[keep], slot.numeric[keep]
        error = np.abs(analytic - numeric)
        order = np.argsort(-error)[:_WORST]
        worst = [Entry(_index(flat[i], slot.shape), float(analytic[i]), float(numeric[i]))
                 for i in order]
        first = worst[0]
        if slot.grad_output:
            message = (f"{node.name()} input {slot.position}: the derivative of its backward "
                       f"with respect to grad_output (create_graph=True, double backward) "
                       f"disagrees with the forward's finite differences ({int(keep.sum())} of "
                       f"{len(slot.indices)} output entries disagree; max abs err "
                       f"{_fmt(float(error[order[0]]))} at output entry {first.index[0]}: "
                       f"analytic {_fmt(first.analytic)} vs numeric {_fmt(first.numeric)})")
        else:
            message = (f"{node.name()} input {slot.position}: the derivative of its backward "
                       f"(create_graph=True, double backward) disagrees with finite differences "
                       f"of backward ({int(keep.sum())} of {len(slot.indices)} checked entries "
                       f"disagree; max abs err {_fmt(float(error[order[0]]))} at "
                       f"{_format_index(first.index)}: analytic {_fmt(first.analytic)} vs "
                       f"numeric {_fmt(first.numeric)})")
        if slot.hint:
            message += f" - {slot.hint}"
        findings.append(Finding(kind="wrong_double_backward", function=_function(node), node=node,
                                input_index=slot.position, message=message,
                                max_abs_error=float(error.max()), worst=worst, hint=slot.hint,
                                details={"order": 2, "grad_output": slot.grad_output,
                                         "checked": int(len(slot.indices)),
                                         "mismatched": int(keep.sum())}))
    return findings
