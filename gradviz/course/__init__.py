"""The checkers of the course notebooks (``notebooks/02_*`` to ``06_*``).

Each "your turn" exercise of a notebook leaves a placeholder (``...``) that the learner
replaces, then calls one ``check_*`` function of this package. A checker

* prints ``not answered yet`` and returns ``False`` while the answer is still ``...`` (so a
  notebook with no answers runs to the end, headlessly, in the tests);
* raises :class:`WrongAnswer` with a message that names what is wrong (which step, which
  input, expected vs got) when the answer is wrong;
* prints ``correct`` and returns ``True`` when it is right.

Every checker computes what is right by running gradviz (or PyTorch, for the PyTorch
notebook) on the spot: no answer is stored here. ``EXERCISES`` maps each exercise's name to
its checker; the tests give every checker a reference answer and a wrong one.

Examples
--------
>>> from gradviz import course
>>> course.check_needs_input_grad(...)
not answered yet: needs_input_grad (replace the ... with your answer)
False
"""

from __future__ import annotations

from ._checks import (EXERCISES, WrongAnswer, check_buffer_prediction, check_cube,
                      check_dependency_counts, check_dirty_add_one, check_fixed_softplus,
                      check_hook_order, check_needs_input_grad, check_ninja, check_ninja_steps,
                      check_reconnected_model, check_reference_buffers, check_rollup_answer,
                      check_run_order, check_run_order_prediction, check_torch_silu,
                      ninja_forward, NINJA_STEPS)

__all__ = ["EXERCISES", "WrongAnswer", "check_buffer_prediction", "check_cube",
           "check_dependency_counts", "check_dirty_add_one", "check_fixed_softplus",
           "check_hook_order", "check_needs_input_grad", "check_ninja", "check_ninja_steps",
           "check_reconnected_model", "check_reference_buffers", "check_rollup_answer",
           "check_run_order", "check_run_order_prediction", "check_torch_silu",
           "ninja_forward", "NINJA_STEPS"]
