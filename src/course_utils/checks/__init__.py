"""What exercise tests use, in parts (each a module of its own):

- :mod:`course_utils.checks.assertions` -- ``check``, ``check_close`` and the other assertions
  whose messages students read (``CheckFailed``, ``leaves_unchanged``, ``substitute``).
- :mod:`course_utils.checks.probes` -- behaviour students get wrong without noticing: devices
  and dtypes, gradients, generators.
- :mod:`course_utils.checks.allocations` -- ``AllocationLog``: the tensors a call allocates (the
  largest, the live peak) and the widths of its reductions.
- :mod:`course_utils.checks.integrity` -- the answer is the student's own work (``own_work``,
  ``check_defined_here``, ``banned_calls``), and the hooks the grader's checker uses.
- :mod:`course_utils.checks.in_place` -- the In-place rule's messages (the grader's checker uses
  them), and the watch ``course check`` puts on every call a test cell makes of an answer's function.

Test cells import every name from here (``from course_utils.checks import check_close``), and
only what test cells use is exported. The grader's checker talks to the kernel through
:mod:`course_utils.protocol`, never through private names of this package.
"""

from __future__ import annotations

from course_utils.checks.allocations import AllocationLog
from course_utils.checks.assertions import (
    CheckFailed,
    check,
    check_close,
    check_raises,
    check_scalar,
    check_shape,
    check_type,
    leaves_unchanged,
    may_change,
    may_freeze,
    substitute,
)
from course_utils.checks.integrity import banned_calls, by_value, check_defined_here, own_work
from course_utils.checks.probes import check_backward, check_device_dtype, check_generator

__all__ = [
    "CheckFailed",
    "check",
    "check_type",
    "check_shape",
    "check_close",
    "check_scalar",
    "check_raises",
    "leaves_unchanged",
    "may_change",
    "may_freeze",
    "substitute",
    "check_device_dtype",
    "check_backward",
    "check_generator",
    "AllocationLog",
    "own_work",
    "check_defined_here",
    "banned_calls",
    "by_value",
]
