"""One cgroup per grading sandbox: memory, processes and CPU share counted per notebook.

``prlimit`` limits each process of a sandbox on its own: three forked children may each use
the whole memory limit, and a notebook with many busy processes gets as many shares of the
CPU as it has processes. A cgroup counts the kernel and every process it starts together.
:class:`SandboxCgroup` creates one per sandbox and sets, from
:class:`~course_grader.sandbox.bubblewrap.SandboxLimits`:

- ``memory``: the notebook's total memory, anonymous memory, page cache and the tmpfs files
  it writes included (``memory.max`` / ``memory.limit_in_bytes``, swap not allowed on top).
  When the total reaches the limit the kernel's OOM killer fires and the whole sandbox is
  stopped (``memory.oom.group`` on v2; on v1 a thread waits for the OOM event and kills it);
- ``pids``: at most ``processes`` (+ bwrap's own 4) tasks, threads included;
- ``cpu``: one ordinary share (``cpu.weight`` 100 / ``cpu.shares`` 1024) for the whole
  notebook, however many processes it runs, so a busy notebook cannot crowd out another.

The launcher joins the cgroup before it execs bwrap (:meth:`SandboxCgroup.wrap`), so every
process of the sandbox starts inside it; :meth:`SandboxCgroup.remove` kills whatever is left
and removes it. Both the unified hierarchy (v2, created under its root) and v1 controllers
(created under the grader's own cgroup of each) are handled. Where no controller is writable
(not root, no cgroup file system, ``COURSE_SANDBOX_CGROUP=off``) :func:`detect` says why and
the sandbox keeps only its per-process limits; :func:`cgroup_status` says which applies.
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol, Sequence

__all__ = ["CgroupSupport", "CgroupStats", "SandboxCgroup", "cgroup_status", "detect"]

log = logging.getLogger(__name__)

CONTROLLERS = ("memory", "pids", "cpu")
PREFIX = "course-sandbox"
BWRAP_TASKS = 4  # bwrap's monitor and its pid-1 init live in the cgroup beside the notebook
_counter = itertools.count()


@dataclass(frozen=True)
class CgroupSupport:
    """What this machine allows: ``version`` 1 or 2 (``None``: no cgroups), the directory under
    which each usable controller's sandbox cgroups are created, and why others are missing."""

    version: int | None
    bases: dict[str, Path] = field(default_factory=dict)
    problem: str = ""

    @property
    def usable(self) -> bool:
        return bool(self.bases)

    @property
    def controllers(self) -> list[str]:
        return [c for c in CONTROLLERS if c in self.bases]


@dataclass(frozen=True)
class CgroupStats:
    """What a sandbox's cgroup counted (``None`` where this kernel does not say)."""

    memory_limit: int | None = None
    memory_peak: int | None = None
    oom_kills: int = 0
    pids_limit: int | None = None
    pids_peak: int | None = None
    pids_refused: int = 0  # forks refused at the pids limit


# ---------------------------------------------------------------- what the machine mounts


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _write(path: Path, value: str) -> None:
    with open(path, "w") as handle:
        handle.write(value)


def _mounts() -> list[tuple[str, str, set[str]]]:
    """``(mount point, type, options)`` of every cgroup file system mounted here."""
    found = []
    for line in _read(Path("/proc/self/mounts")).splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] in ("cgroup", "cgroup2"):
            found.append((parts[1].replace("\\040", " "), parts[2], set(parts[3].split(","))))
    return found


def _own_paths() -> dict[str, str]:
    """This process's cgroup path in each v1 controller, and ``""`` -> its v2 path."""
    paths: dict[str, str] = {}
    for line in _read(Path("/proc/self/cgroup")).splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            paths[name] = path
    return paths


def _probe(base: Path, files: Sequence[str]) -> str:
    """``""`` when a cgroup with ``files`` can be created (and removed) under ``base``."""
    probe = base / f"{PREFIX}-probe-{os.getpid()}-{next(_counter)}"
    try:
        probe.mkdir()
    except OSError as error:
        return f"cannot create a cgroup under {base} ({error.strerror})"
    try:
        missing = [name for name in files if not (probe / name).exists()]
        return f"{base} has no {', '.join(missing)}" if missing else ""
    finally:
        probe.rmdir()


def _detect_v1(mounts: list[tuple[str, str, set[str]]]) -> CgroupSupport:
    own = _own_paths()
    bases, problems = {}, []
    for controller in CONTROLLERS:
        point = next((m for m, kind, opts in mounts if kind == "cgroup" and controller in opts), None)
        if point is None:
            problems.append(f"{controller}: not mounted")
            continue
        base = Path(point) / own.get(controller, "/").lstrip("/")
        problem = _probe(base, [{"memory": "memory.limit_in_bytes", "pids": "pids.max",
                                 "cpu": "cpu.shares"}[controller]])
        if problem:
            problems.append(f"{controller}: {problem}")
        else:
            bases[controller] = base
    return CgroupSupport(1, bases, "; ".join(problems))


def _detect_v2(point: Path) -> CgroupSupport:
    available = _read(point / "cgroup.controllers").split()
    enabled = set(_read(point / "cgroup.subtree_control").split())
    bases, problems = {}, []
    for controller in CONTROLLERS:
        if controller not in available:
            problems.append(f"{controller}: not in {point}/cgroup.controllers")
            continue
        if controller not in enabled:
            try:  # the root cgroup may hand controllers to its children even while it has processes
                _write(point / "cgroup.subtree_control", f"+{controller}")
            except OSError as error:
                problems.append(f"{controller}: cannot enable it in {point} ({error.strerror})")
                continue
        bases[controller] = point
    if bases:
        problem = _probe(point, [{"memory": "memory.max", "pids": "pids.max", "cpu": "cpu.weight"}[c] for c in bases])
        if problem:
            return CgroupSupport(2, {}, problem)
    return CgroupSupport(2, bases, "; ".join(problems))


@functools.lru_cache(maxsize=None)
def detect() -> CgroupSupport:
    """Which cgroup controllers sandboxes can use here (probed once per process)."""
    if os.environ.get("COURSE_SANDBOX_CGROUP", "").strip().lower() in {"off", "0", "no", "false"}:
        return CgroupSupport(None, {}, "switched off (COURSE_SANDBOX_CGROUP=off)")
    mounts = _mounts()
    if not mounts:
        return CgroupSupport(None, {}, "no cgroup file system is mounted")
    v1 = {c for _, kind, opts in mounts if kind == "cgroup" for c in opts} & set(CONTROLLERS)
    unified = next((Path(m) for m, kind, _ in mounts if kind == "cgroup2" and _read(Path(m) / "cgroup.controllers").split()),
                   None)
    if v1 or unified is None:
        support = _detect_v1(mounts)
    else:
        support = _detect_v2(unified)
    if not support.usable and os.geteuid() != 0:
        return CgroupSupport(support.version, {}, "not root")
    return support


def cgroup_status() -> str:
    """One line for ``course doctor``: whether sandbox limits count per notebook or per process."""
    support = detect()
    if not support.usable:
        return f"no cgroups: {support.problem or 'none usable'}; sandbox limits apply per process only"
    bases = sorted({str(p) for p in support.bases.values()})
    text = (f"cgroup v{support.version}: {', '.join(support.controllers)} counted per notebook "
            f"(under {', '.join(bases)})")
    return text + (f"; missing {support.problem}" if support.problem else "")


@functools.lru_cache(maxsize=None)
def warn_once_if_unavailable() -> None:
    """Log once per process that sandboxes fall back to per-process limits."""
    support = detect()
    if not support.usable:
        log.warning("grading sandbox: no cgroups (%s); memory, process and CPU limits apply per process, "
                    "not per notebook", support.problem)
    elif support.problem:
        log.warning("grading sandbox: cgroup controllers missing (%s)", support.problem)


# ---------------------------------------------------------------- one sandbox's cgroup


class Limits(Protocol):
    """What a cgroup sets (:class:`~course_grader.sandbox.bubblewrap.SandboxLimits` has it):
    ``memory`` in bytes (``None``: none) and the number of ``processes``."""

    @property
    def memory(self) -> int | None: ...  # noqa: D102

    @property
    def processes(self) -> int: ...  # noqa: D102


class SandboxCgroup:
    """The cgroup of one sandbox. ``create`` makes it and sets the limits; ``wrap`` the command
    that starts the sandbox so it runs inside; ``remove`` kills what is left and removes it."""

    def __init__(self, support: CgroupSupport, limits: Limits) -> None:
        self.support = support
        self.version = support.version
        self.name = f"{PREFIX}-{os.getpid()}-{next(_counter)}"
        self.dirs: dict[str, Path] = {c: base / self.name for c, base in support.bases.items()}
        self.final: CgroupStats | None = None
        self.oom_seen = False  # the v1 OOM event fired (it may come before the kill is counted)
        self._oom_thread: threading.Thread | None = None
        for path in self.paths:
            _remove_stale(path.parent)
            path.mkdir()
        try:
            self._set_limits(limits)
        except OSError:
            self.remove()
            raise

    @classmethod
    def create(cls, limits: Limits) -> "SandboxCgroup | None":
        """A new cgroup with ``limits``, or ``None`` where cgroups cannot be used (logged once)."""
        support = detect()
        warn_once_if_unavailable()
        if not support.usable:
            return None
        try:
            return cls(support, limits)
        except OSError as error:
            log.warning("grading sandbox: could not create a cgroup (%s); per-process limits only", error)
            return None

    @property
    def paths(self) -> list[Path]:
        """The cgroup's directories: one per controller on v1, a single one on v2."""
        return list(dict.fromkeys(self.dirs.values()))

    def _set_limits(self, limits: Limits) -> None:
        memory, pids, cpu = self.dirs.get("memory"), self.dirs.get("pids"), self.dirs.get("cpu")
        if self.version == 2:
            if memory is not None:
                if limits.memory is not None:
                    _write(memory / "memory.max", str(limits.memory))
                    if (memory / "memory.swap.max").exists():
                        _write(memory / "memory.swap.max", "0")
                _write(memory / "memory.oom.group", "1")  # an OOM kill stops the whole notebook
            if cpu is not None:
                _write(cpu / "cpu.weight", "100")
        else:
            if memory is not None and limits.memory is not None:
                _write(memory / "memory.limit_in_bytes", str(limits.memory))
                if (memory / "memory.memsw.limit_in_bytes").exists():
                    _write(memory / "memory.memsw.limit_in_bytes", str(limits.memory))
            if cpu is not None:
                _write(cpu / "cpu.shares", "1024")
        if pids is not None:
            _write(pids / "pids.max", str(limits.processes + BWRAP_TASKS))

    def wrap(self, command: Sequence[str]) -> list[str]:
        """``command`` started by a shell that first moves itself into this cgroup (then execs)."""
        script = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'
        return ["/bin/sh", "-c", script, "course-cgroup-enter",
                *(str(path / "cgroup.procs") for path in self.paths), "--", *command]

    def add(self, pid: int) -> None:
        """Move process ``pid`` into the cgroup (every controller)."""
        for path in self.paths:
            _write(path / "cgroup.procs", str(pid))

    def pids(self) -> list[int]:
        """The processes in the cgroup now."""
        found: set[int] = set()
        for path in self.paths:
            found.update(int(p) for p in _read(path / "cgroup.procs").split())
        return sorted(found)

    def watch_oom(self, on_oom: Callable[[], None]) -> None:
        """Call ``on_oom`` (from a thread) when the OOM killer fired in the cgroup.

        Needed on v1 only, where the OOM killer stops one process, to stop the rest (v2 has
        ``memory.oom.group``). Uses the ``cgroup.event_control`` eventfd, which also fires
        when the cgroup is removed.
        """
        memory = self.dirs.get("memory")
        if self.version != 1 or memory is None or not hasattr(os, "eventfd"):
            return
        try:
            event = os.eventfd(0, os.EFD_CLOEXEC)
            control = os.open(memory / "memory.oom_control", os.O_RDONLY | os.O_CLOEXEC)
            _write(memory / "cgroup.event_control", f"{event} {control}")
        except OSError as error:
            log.warning("grading sandbox: cannot watch for OOM kills in %s (%s)", memory, error)
            return

        def wait() -> None:
            try:
                os.read(event, 8)  # sent as the OOM starts, before the kill is counted
                if self.final is None:  # not the event of our own removal
                    self.oom_seen = True
                    on_oom()
            finally:
                os.close(event)
                os.close(control)

        self._oom_thread = threading.Thread(target=wait, name=f"{self.name}-oom", daemon=True)
        self._oom_thread.start()

    @property
    def out_of_memory(self) -> bool:
        """Whether the notebook reached its memory limit and the OOM killer fired."""
        return self.oom_seen or self.stats().oom_kills > 0

    def stats(self) -> CgroupStats:
        """The cgroup's counters now (after :meth:`remove`, the last ones read)."""
        if self.final is not None:
            return self.final
        memory, pids = self.dirs.get("memory"), self.dirs.get("pids")
        values: dict[str, int | None] = {}
        if memory is not None:
            if self.version == 2:
                limit = _read(memory / "memory.max").strip()
                values["memory_limit"] = None if limit in ("", "max") else int(limit)
                peak = _read(memory / "memory.peak").strip()
                values["memory_peak"] = int(peak) if peak else None
                events = _fields(_read(memory / "memory.events"))
                values["oom_kills"] = events.get("oom_kill", 0) + events.get("oom_group_kill", 0)
            else:
                limit_bytes = int(_read(memory / "memory.limit_in_bytes") or 0)
                values["memory_limit"] = limit_bytes if 0 < limit_bytes < 2**62 else None
                peak = _read(memory / "memory.max_usage_in_bytes").strip()
                values["memory_peak"] = int(peak) if peak else None
                values["oom_kills"] = _fields(_read(memory / "memory.oom_control")).get("oom_kill", 0)
        if pids is not None:
            limit = _read(pids / "pids.max").strip()
            values["pids_limit"] = None if limit in ("", "max") else int(limit)
            peak = _read(pids / "pids.peak").strip()
            values["pids_peak"] = int(peak) if peak else None
            values["pids_refused"] = _fields(_read(pids / "pids.events")).get("max", 0)
        return CgroupStats(**values)  # type: ignore[arg-type]

    def kill(self, timeout: float = 10.0) -> bool:
        """SIGKILL every process in the cgroup until it is empty; ``False`` if some outlived ``timeout``."""
        first = self.paths[0] if self.paths else None
        if first is not None and (first / "cgroup.kill").exists():
            try:
                _write(first / "cgroup.kill", "1")
            except OSError:
                pass
        deadline = time.monotonic() + timeout
        while True:
            left = self.pids()
            if not left:
                return True
            if time.monotonic() > deadline:
                return False
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.02)

    def remove(self) -> None:
        """Kill what is left, keep the last counters in :attr:`final`, remove the cgroup."""
        if self.final is not None:
            return
        self.kill()
        try:
            self.final = self.stats()
        except (OSError, ValueError):
            self.final = CgroupStats()
        for path in self.paths:
            _rmdir(path)


def _fields(text: str) -> dict[str, int]:
    """``"name value"`` lines -> ``{name: value}`` (``memory.events``, ``pids.events``...)."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            out[parts[0]] = int(parts[1])
    return out


def _rmdir(path: Path, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as error:  # EBUSY while exiting processes still leave it
            if time.monotonic() > deadline:
                log.warning("grading sandbox: cannot remove cgroup %s (%s)", path, error.strerror)
                return
            time.sleep(0.05)


def _remove_stale(base: Path) -> None:
    """Remove sandbox cgroups under ``base`` left by graders that died (their pid is in the name)."""
    try:
        entries = [p for p in base.iterdir() if p.name.startswith(f"{PREFIX}-") and p.is_dir()]
    except OSError:
        return
    for entry in entries:
        owner = entry.name.split("-")[2]
        if not owner.isdigit() or int(owner) == os.getpid() or Path(f"/proc/{owner}").exists():
            continue
        for pid in _read(entry / "cgroup.procs").split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        _rmdir(entry, timeout=1.0)
