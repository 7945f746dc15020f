"""The checker in a process of its own, one per graded notebook (``python -m course_grader.grading.checker``)."""

from __future__ import annotations

import contextlib
import io
import json
import select
import subprocess
import sys
from typing import Sequence

from course_grader.grading.checker.checker import CheckResult, check_cell

CHECKER_GRACE = 30.0  # seconds the checker process may run past a cell's limit before it is restarted


class CheckerProcess:
    """The checker in a process of its own (``python -m course_grader.grading.checker``), one per
    graded notebook: nbgrader's process runs an event loop a blocking kernel client cannot share,
    and what a test computes stays out of the process that holds the gradebook."""

    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "course_grader.grading.checker"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, bufsize=1)

    def check(self, connection_info: dict, source: str, prelude: str = "", timeout: float = 120.0,
              withheld: Sequence[str] = ()) -> CheckResult:
        info = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in connection_info.items()}
        request = {"info": info, "source": source, "prelude": prelude, "timeout": timeout, "withheld": list(withheld)}
        try:
            assert self.process.stdin is not None and self.process.stdout is not None
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            # the cell's deadline bounds the time spent waiting for the kernel; this bounds the checker's
            # own work too (a question it cannot answer in time is the kernel's garbage: it is restarted)
            ready, _, _ = select.select([self.process.stdout], [], [], timeout + CHECKER_GRACE)
            if not ready:
                self.process.kill()
                self.process.wait()
                self.__init__()  # type: ignore[misc] # a fresh checker for the notebook's next cells
                return CheckResult(False, "GradingError", "the tests ran past the cell's time limit", timed_out=True)
            line = self.process.stdout.readline()
            reply = json.loads(line)
            return CheckResult(bool(reply["ok"]), str(reply.get("ename", "")), str(reply.get("evalue", "")),
                               [str(e) for e in reply.get("evidence", [])], bool(reply.get("timed_out")))
        except (OSError, ValueError, KeyError, AssertionError) as error:
            return CheckResult(False, "GradingError", f"the checker process failed ({type(error).__name__}); "
                               "the instructor should re-grade this notebook")

    def close(self) -> None:
        try:
            if self.process.stdin is not None:
                self.process.stdin.close()
            self.process.wait(timeout=10)
        except Exception:  # noqa: BLE001
            self.process.kill()


def serve_requests() -> None:
    """One JSON request per line on stdin, one result per line on stdout."""
    protocol = sys.stdout
    for line in sys.stdin:
        request = json.loads(line)
        with contextlib.redirect_stdout(io.StringIO()):  # what the tests print is not the protocol
            result = check_cell(request["info"], request["source"], request.get("prelude", ""),
                                float(request.get("timeout", 120)), request.get("withheld", []))
        protocol.write(json.dumps({"ok": result.ok, "ename": result.ename, "evalue": result.evalue,
                                   "evidence": result.evidence, "timed_out": result.timed_out}) + "\n")
        protocol.flush()
