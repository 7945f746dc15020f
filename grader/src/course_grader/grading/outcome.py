"""What grading did with each submission, as data: :class:`StudentResult` per student and
:class:`GradingRun` per assignment, made from nbgrader's own outcome for that student
(:func:`student_result`: success, or why not, with the underlying error)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from course_grader.grading.gradebook import AssignmentNotReleased

__all__ = ["STATUSES", "StudentResult", "GradingRun", "student_result"]

STATUSES = ("graded", "failed", "missing", "malformed")


@dataclass(frozen=True)
class StudentResult:
    """What grading did with one student's submission of one assignment.

    ``status``: ``graded`` (grades are in the gradebook), ``failed`` (nbgrader could not grade
    it: ``reason`` says why), ``missing`` (nothing submitted: recorded as 0) or
    ``malformed`` (not a readable notebook: not graded).
    """

    student: str
    assignment: str
    status: str
    reason: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, not {self.status!r}")


@dataclass
class GradingRun:
    """What grading one assignment did: one :class:`StudentResult` per student."""

    assignment: str
    results: list[StudentResult]
    log: str = ""

    @property
    def failed(self) -> dict[str, str]:
        """``student -> reason`` for the submissions that could not be graded."""
        return {r.student: r.reason for r in self.results if r.status in ("failed", "malformed")}

    @property
    def returncode(self) -> int:
        return 1 if self.failed else 0


_DEAD_KERNEL = re.compile(r"DeadKernelError|Kernel died|kernel .*(died|restarted)", re.I)
_TIMEOUT = re.compile(r"UnresponsiveKernelError|the kernel became unresponsive", re.I)
_SANDBOX_ERROR = re.compile(r"(?:[\w.]+\.)?(?P<kind>SandboxLimitError|SandboxError): (?P<message>.+)")
_NOT_RELEASED = re.compile(r"No assignment with ID '[^']*' exists in the database")
# the last line of a traceback: ``module.Name: message`` (any exception class, e.g.
# jupyter_client.kernelspec.NoSuchKernel), or a bare ``NameError: message`` of a builtin
_EXCEPTION_LINE = re.compile(
    r"^(?:(?P<module>(?:[a-z_]\w*\.)+)(?P<qualified>[A-Z]\w*)|(?P<name>[A-Z]\w*(?:Error|Exception|Exit|Interrupt)|Exception))"
    r"(?::\s*(?P<message>.*))?$"
)
# nbgrader's own wrap-up ("Please see the error log"), never the underlying error
_WRAPPERS = {"NbGraderException"}
MAX_MESSAGE = 300


def _last_exception(text: str) -> str:
    """The last ``SomeError: message`` line of a traceback in ``text``, without its module
    (``NoSuchKernel: No such kernel named attention-course``) and without nbgrader's own
    wrap-up; "" when there is none. Long messages are cut at ``MAX_MESSAGE`` characters."""
    found = ""
    for line in text.splitlines():
        match = _EXCEPTION_LINE.match(line.strip())
        if not match:
            continue
        name = match.group("qualified") or match.group("name")
        if name in _WRAPPERS:
            continue
        message = (match.group("message") or "").strip()
        if len(message) > MAX_MESSAGE:
            message = message[:MAX_MESSAGE] + " ..."
        found = f"{name}: {message}" if message else name
    return found


def _with_error(explanation: str, error: str) -> str:
    """``explanation (Name: message)``: what happened, and the underlying error when known."""
    return f"{explanation} ({error})" if error and error not in explanation else explanation


def student_result(student: str, assignment: str, outcome: Mapping[str, Any]) -> StudentResult:
    """A :class:`StudentResult` from nbgrader's ``NbGraderAPI.autograde`` outcome for this
    student alone (``success``, ``error``, ``log``).

    A failed result's ``reason`` says what happened and carries the underlying error, its
    exception's name and message (``... (NoSuchKernel: No such kernel named attention-course)``),
    so that the score table shows it and not only nbgrader's log."""
    if outcome.get("success"):
        return StudentResult(student, assignment, "graded")
    text = f"{outcome.get('log', '')}\n{outcome.get('error', '')}"
    error = _last_exception(text)
    sandbox = _SANDBOX_ERROR.search(text)
    if outcome.get("process_died"):
        reason = _with_error(str(outcome["error"]), _last_exception(str(outcome.get("log", ""))))
    elif _NOT_RELEASED.search(text):
        reason = str(AssignmentNotReleased(assignment, "the configured gradebook"))
    elif sandbox and sandbox.group("kind") == "SandboxLimitError":
        detail = re.sub(r"^Kernel died:\s*", "", sandbox.group("message").strip())
        reason = f"the kernel died while running the notebook: {detail} (SandboxLimitError)"
    elif sandbox:
        reason = f"the grading sandbox failed (SandboxError: {sandbox.group('message').strip()})"
    elif _DEAD_KERNEL.search(text):
        reason = _with_error("the kernel died while running the notebook (e.g. os._exit, a segfault, out of memory)",
                             error or "DeadKernelError")
    elif _TIMEOUT.search(text):
        reason = _with_error("the kernel stopped responding and could not be interrupted", error)
    else:
        reason = _with_error("nbgrader could not grade this submission",
                             error or "no exception in nbgrader's log; see the log of `nbgrader autograde`")
    return StudentResult(student, assignment, "failed", reason)
