"""The checker in a process of its own, one per graded notebook.

nbgrader's process runs an event loop a blocking kernel client cannot share, and what a test
computes stays out of the process that holds the gradebook. Each graded notebook gets a fresh
checker process; none is ever reused for another notebook.

Starting one used to cost an import of torch (about 3 s of CPU) per notebook. Checkers are now
forked from a *fork server*: one process per grading process (``python -m
course_grader.grading.checker --fork-server``) that imports the checker's modules, then only forks,
one child per checker. It never runs a test, never sees a submission, a kernel or a student's name,
and is single-threaded when it forks: each child starts from the same freshly imported modules, as a
new ``python -m`` would, and nothing one checker does reaches the next (``tests/course_grader/grading/checker/test_checker.py``).
Where the fork server cannot start (or with ``COURSE_CHECKER_FORK=off``) each checker is its own
``python -m course_grader.grading.checker``.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
from typing import IO, Sequence

from course_grader.grading.checker.result import CheckResult

__all__ = ["CHECKER_GRACE", "CheckerProcess", "serve_fork_server", "serve_requests", "warm_up"]

# seconds the checker process may run past a cell's limit before it is restarted
CHECKER_GRACE = float(os.environ.get("COURSE_CHECKER_GRACE", "30"))
_COMMAND = [sys.executable, "-m", "course_grader.grading.checker"]


# what a forked checker takes from the process that asked for it (the fork server's own environment is
# that of the first grading task: a Dask worker's server outlives the task that started it)
_ENVIRONMENT_PREFIXES = ("COURSE_", "NBGRADER_", "CUDA_VISIBLE_DEVICES")


def _environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith(_ENVIRONMENT_PREFIXES)}


def _forking() -> bool:
    return os.environ.get("COURSE_CHECKER_FORK", "").lower() not in {"off", "0", "no"}


class _ForkServer:
    """The client of this process's fork server: ``fork()`` -> (the new checker's pid, its socket)."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1")  # numpy's BLAS starts no thread: the server forks single-threaded
        self.process = subprocess.Popen([*_COMMAND, "--fork-server", str(theirs.fileno())], pass_fds=[theirs.fileno()],
                                        stdin=subprocess.DEVNULL, env=env)
        theirs.close()
        self.control = ours
        self.replies = ours.makefile("rb")
        self.lock = threading.Lock()

    def fork(self, extra: dict[str, str] | None = None) -> tuple[int, socket.socket]:
        mine, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with self.lock:
                socket.send_fds(self.control, [json.dumps({**_environment(), **(extra or {})}).encode()], [child.fileno()])
                reply = self.replies.readline()
        finally:
            child.close()
        if not reply.strip().isdigit():
            mine.close()
            raise OSError("the checker's fork server did not fork")
        return int(reply), mine


_SERVER: list[_ForkServer] = []
_SERVER_LOCK = threading.Lock()


def _fork_server() -> _ForkServer | None:
    """This process's fork server, started on first use (None: checkers are started one by one)."""
    if not _forking():
        return None
    with _SERVER_LOCK:
        if _SERVER and _SERVER[0].process.poll() is not None:
            _SERVER.clear()  # it died: one new one
        if not _SERVER:
            try:
                _SERVER.append(_ForkServer())
            except OSError:
                return None
        return _SERVER[0]


def warm_up() -> None:
    """Start the fork server now, so that it imports torch while a notebook's kernel starts."""
    _fork_server()


class CheckerProcess:
    """One graded notebook's checker: each test cell a request, each verdict a reply (JSON lines)."""

    def __init__(self, environment: dict[str, str] | None = None, prelude: str = "") -> None:
        # this notebook's own variables for the checker (COURSE_* only: the variant seed), never the kernel's
        self.environment = {k: v for k, v in (environment or {}).items() if k.startswith("COURSE_")}
        self.prelude = prelude  # the notebook's imports: the new checker runs them first, while the kernel starts
        # started beside the caller's own work (the notebook's kernel starting): the first fork waits for the
        # fork server to have imported torch, which need not hold the kernel back; the first request waits for it
        self._start_error: BaseException | None = None
        self._starting = threading.Thread(target=self._start_beside, name="course-checker-start", daemon=True)
        self._starting.start()

    def _start_beside(self) -> None:
        try:
            self._start()
            if self.prelude:
                self._send({"warm": self.prelude})  # answered by nothing: the first test cell waits behind it
        except BaseException as error:  # noqa: BLE001 - raised again where the checker is first used
            self._start_error = error

    def wait_started(self) -> None:
        """Wait until the checker has started (raises what starting it raised)."""
        self._starting.join()
        if self._start_error is not None:
            error, self._start_error = self._start_error, None
            raise OSError(f"the checker did not start ({type(error).__name__}: {error})") from error

    def _start(self) -> None:
        self.pid: int | None = None
        self.process: subprocess.Popen[str] | None = None
        self.socket: socket.socket | None = None
        server = _fork_server()
        if server is not None:
            try:
                self.pid, self.socket = server.fork(self.environment)
                self.reader: IO[str] = self.socket.makefile("r")
                return
            except OSError:
                pass
        self.process = subprocess.Popen(_COMMAND, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
                                        env={**os.environ, **self.environment})
        assert self.process.stdout is not None
        self.reader = self.process.stdout

    def _send(self, request: dict) -> None:
        line = json.dumps(request) + "\n"
        if self.socket is not None:
            self.socket.sendall(line.encode())
        else:
            assert self.process is not None and self.process.stdin is not None
            self.process.stdin.write(line)
            self.process.stdin.flush()

    def _kill(self) -> None:
        if self.socket is not None and self.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)  # the fork server reaps it
            self.socket.close()
        elif self.process is not None:
            self.process.kill()
            self.process.wait()

    def check(self, connection_info: dict, source: str, prelude: str = "", timeout: float = 120.0,
              withheld: Sequence[str] = ()) -> CheckResult:
        info = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in connection_info.items()}
        request = {"info": info, "source": source, "prelude": prelude, "timeout": timeout, "withheld": list(withheld)}
        try:
            self.wait_started()
            self._send(request)
            # the cell's deadline bounds the time spent waiting for the kernel; this bounds the checker's
            # own work too (a question it cannot answer in time is the kernel's garbage: it is restarted)
            ready, _, _ = select.select([self.reader], [], [], timeout + CHECKER_GRACE)
            if not ready:
                self._kill()
                self._start()  # a fresh checker for the notebook's next cells
                return CheckResult(False, "GradingError", "the tests ran past the cell's time limit", timed_out=True)
            reply = json.loads(self.reader.readline())
            return CheckResult(bool(reply["ok"]), str(reply.get("ename", "")), str(reply.get("evalue", "")),
                               [str(e) for e in reply.get("evidence", [])], bool(reply.get("timed_out")))
        except (OSError, ValueError, KeyError, AssertionError) as error:
            return CheckResult(False, "GradingError", f"the checker process failed ({type(error).__name__}); "
                               "the instructor should re-grade this notebook")

    def close(self) -> None:
        """End the checker: it reads the end of its input and exits (killed if it does not in 10 s)."""
        try:
            self.wait_started()
            if self.socket is not None:
                self.socket.shutdown(socket.SHUT_WR)
                ready, _, _ = select.select([self.reader], [], [], 10)
                if not ready:
                    self._kill()
                self.socket.close()
            elif self.process is not None:
                if self.process.stdin is not None:
                    self.process.stdin.close()
                self.process.wait(timeout=10)
        except Exception:  # noqa: BLE001
            self._kill()


def _answer(request: dict) -> dict:
    from course_grader.grading.checker.checker import check_cell  # the checker's process only (torch)

    with contextlib.redirect_stdout(io.StringIO()):  # what the tests print is not the protocol
        result = check_cell(request["info"], request["source"], request.get("prelude", ""),
                            float(request.get("timeout", 120)), request.get("withheld", []))
    return {"ok": result.ok, "ename": result.ename, "evalue": result.evalue, "evidence": result.evidence,
            "timed_out": result.timed_out}


def serve_requests(requests: IO[str] | None = None, replies: IO[str] | None = None) -> None:
    """A checker: one JSON request per line, one result per line (stdin and stdout by default)."""
    from course_grader.grading.checker.checker import run_prelude  # the checker's process only (torch)

    requests, replies = requests or sys.stdin, replies or sys.stdout
    for line in requests:
        request = json.loads(line)
        if "warm" in request:  # the notebook's imports, before its first test cell
            with contextlib.redirect_stdout(io.StringIO()):
                run_prelude(str(request["warm"]))
            continue
        replies.write(json.dumps(_answer(request)) + "\n")
        replies.flush()


def _preload() -> None:
    """What a checker would otherwise import, once for all its forks (none starts a thread): the checker
    itself with torch (this module does not import them: the grading process that starts checkers never
    runs one), and torch._dynamo, imported by the first call of any torch function wrapped with
    ``_disable_dynamo`` (a tensor encoded under a dispatch mode, 13's AllocationLog; an optimizer step):
    1.5-2 s of a test cell."""
    importlib.import_module("course_grader.grading.checker.checker")
    importlib.import_module("torch._dynamo")


def serve_fork_server(control_fd: int) -> None:
    """The fork server: for each socket the grading process sends, fork a checker that serves it."""
    control = socket.socket(fileno=control_fd)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the system
    _preload()
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, 1 << 20, 1)
        except OSError:
            return
        if not message:  # the grading process is gone
            return
        if not fds:
            continue
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                control.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                asked = json.loads(message)
                for key in [k for k in os.environ if k.startswith(_ENVIRONMENT_PREFIXES) and k not in asked]:
                    del os.environ[key]
                os.environ.update({str(k): str(v) for k, v in asked.items()})
                with socket.socket(fileno=fds[0]) as channel:
                    serve_requests(channel.makefile("r"), channel.makefile("w"))
            except BaseException:  # noqa: BLE001 - the checker's end, whatever it was
                code = 1
            finally:
                os._exit(code)
        os.close(fds[0])
        control.sendall(f"{pid}\n".encode())
