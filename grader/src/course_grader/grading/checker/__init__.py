"""The trusted checker: a test cell's code runs here, never in the student's kernel.

- :mod:`.link` -- the checker's client on the kernel (one ``input()`` round trip per question,
  everything the kernel sends bounded);
- :mod:`.remote` -- the kernel's objects as proxies, its errors as builtin exceptions;
- :mod:`.checker` -- :class:`Checker` (one test cell's questions, callbacks, write-backs,
  gradients) and :func:`check_cell`, which runs a whole test cell against a kernel;
- :mod:`.cell` -- :func:`grade_test_cell`, the one way grading and `course mistakes` grade a
  test cell (visible part in the kernel, then the checker's verdict);
- :mod:`.process` -- the checker in a process of its own, one per graded notebook;
- :mod:`.result` and :mod:`.prelude` -- a checked cell's verdict and the imports a test cell starts
  from: torch-free, so that nbgrader's process, which starts checkers and reads verdicts but never
  runs one, does not import torch.

The kernel's side of the protocol is :mod:`course_utils.protocol`.
"""

from typing import TYPE_CHECKING, Any

from course_grader.grading.checker.cell import TestCellKernel, grade_test_cell
from course_grader.grading.checker.link import CheckerError, CheckerTimeout
from course_grader.grading.checker.prelude import BASE_PRELUDE, prelude_from_source
from course_grader.grading.checker.process import CheckerProcess
from course_grader.grading.checker.result import CheckResult, checker_enabled

if TYPE_CHECKING:
    from course_grader.grading.checker.checker import Checker, check_cell
    from course_grader.grading.checker.remote import RemoteObject

__all__ = ["BASE_PRELUDE", "Checker", "CheckResult", "CheckerError", "CheckerProcess", "CheckerTimeout",
           "RemoteObject", "TestCellKernel", "check_cell", "checker_enabled", "grade_test_cell", "prelude_from_source"]

# imported when first asked for: they import torch, which the grading process that starts checkers
# (nbgrader's, SandboxedExecute) never needs
_LAZY = {"Checker": "checker", "check_cell": "checker", "RemoteObject": "remote"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
