"""Run each submission's kernel in a bubblewrap sandbox while it is graded.

A submission is untrusted code. When nbgrader autogrades it, the kernel runs inside
``bwrap`` with fresh PID, network, IPC, UTS and cgroup namespaces. It sees, read-only, the
system (``/usr`` and a minimal ``/etc``), the Python installation, the virtual environment
and the ``course_utils`` package directory; read-write, only a private directory holding
its working directory (a copy of its own notebook, hidden tests cleared) and its home. Not
the course directory, the gradebook, ``solutions/``, other submissions, ``/root``, the
network or the grader's environment (variables come from an allow-list).

As root, the kernel runs as a dedicated unprivileged uid (``setpriv``), one per concurrent
sandbox, so the process limit counts the sandbox alone; otherwise bwrap uses a user
namespace. ``prlimit`` limits each process's address space (memory), processes, CPU
time and file size; a watchdog in the trusted process enforces the notebook's total wall
time. Where the machine allows, the sandbox runs in a cgroup of its own
(:mod:`course_grader.sandbox.cgroup`) that counts memory (tmpfs files included), processes
and CPU share for all its processes together; elsewhere these limits apply per process.
The kernel talks to nbgrader over IPC sockets in the private directory. When the
kernel's process group dies (shutdown, crash, a limit), bwrap's PID namespace dies with it,
so no process the notebook started survives grading.

Public pieces:

- :func:`sandbox_problem` -- ``None`` when a sandbox works here, else what to install.
- :class:`SandboxLimits` -- the limits, from ``COURSE_SANDBOX_*`` environment variables.
- :class:`SandboxKernelManager` -- a jupyter_client kernel manager that launches its kernel
  in the sandbox.
- :class:`SandboxedExecute` -- nbgrader's ``Execute`` preprocessor with that manager;
  ``nbgrader_config.py`` puts it in ``Autograde.autograde_preprocessors``. ``COURSE_SANDBOX=off``
  (set by ``course grade --no-sandbox``) is the only way to run unsandboxed.
  It and :class:`SandboxLimitError` live in :mod:`course_grader.sandbox.execute`, which imports
  this module (never the other way round): nbgrader and nbclient take seconds to import, and
  ``course grade`` asks :func:`sandbox_problem` before it needs either.

On a CUDA machine the NVIDIA device nodes and ``/sys`` are passed through and the memory
(address-space) limit is left out: CUDA reserves far more address space than it uses.
"""

from __future__ import annotations

import fcntl
import functools
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from jupyter_client.manager import AsyncKernelManager
from traitlets import List as ListTrait
from traitlets import default

from course_grader.sandbox import cgroup as _cgroup

__all__ = [
    "SandboxError",
    "SandboxLimits",
    "SandboxKernelManager",
    "sandbox_enabled",
    "sandbox_problem",
    "bwrap_command",
]

GiB = 1024**3
MiB = 1024**2

# uids handed to sandboxed kernels when grading as root: one per concurrent sandbox
UID_BASE, UID_COUNT = 61000, 2000

# what the kernel may inherit from the grader's environment (values copied when set)
ENV_ALLOW = (
    "LANG", "LC_ALL", "LC_CTYPE", "TZ",
    "COURSE_PROFILE", "COURSE_DEVICE", "COURSE_THREADS",
    "MPLBACKEND", "PYTHONWARNINGS", "PYTHONHASHSEED",
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
    "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "CUBLAS_WORKSPACE_CONFIG",
)  # not NBGRADER_EXECUTION: whether it is being graded is none of the kernel's business

# the few files of /etc a Python kernel needs (shared-library cache, fonts, time zone)
ETC_READ = (
    "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
    "/etc/fonts", "/etc/localtime", "/etc/mime.types", "/etc/nsswitch.conf",
)


class SandboxError(RuntimeError):
    """The sandbox cannot be set up here (bwrap missing or refused)."""


# ---------------------------------------------------------------- configuration


def sandbox_enabled() -> bool:
    """False only when ``COURSE_SANDBOX=off`` (``course grade --no-sandbox``)."""
    return os.environ.get("COURSE_SANDBOX", "").strip().lower() not in {"off", "0", "no", "false"}


def _parse_size(text: str) -> int:
    """``"6G"``, ``"512M"``, ``"100k"`` or plain bytes -> bytes."""
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    scale = {"K": 1024, "M": MiB, "G": GiB, "T": 1024 * GiB}.get(text[-1:], 1)
    number = text[:-1] if text[-1:] in "KMGT" else text
    return int(float(number) * scale)


def cuda_devices() -> list[str]:
    """The NVIDIA device nodes of this machine (empty without a GPU)."""
    return sorted(glob.glob("/dev/nvidia*"))


@dataclass(frozen=True)
class SandboxLimits:
    """Per-notebook limits. ``memory`` is address space in bytes (``None``: unlimited, as on
    CUDA); ``cpu`` CPU seconds of each process; ``wall`` seconds for the whole notebook."""

    memory: int | None = 6 * GiB
    processes: int = 256
    cpu: int = 20 * 60
    file_size: int = 512 * MiB
    wall: int = 20 * 60
    tmp_size: int = 512 * MiB

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> "SandboxLimits":
        """Defaults, overridden by ``COURSE_SANDBOX_{MEMORY,PROCESSES,CPU,FILESIZE,WALL,TMP}``.

        The wall time (and the CPU time that follows it) is 20 min in the ``ci`` profile,
        where grading runs, and 3 h at the larger profiles. ``COURSE_SANDBOX_MEMORY=0``
        lifts the memory limit; on a CUDA machine there is none.
        """
        values: Mapping[str, str] = os.environ if env is None else env
        ci = values.get("COURSE_PROFILE", "ci").strip().lower() in {"", "ci"}
        wall = int(values.get("COURSE_SANDBOX_WALL") or (20 * 60 if ci else 3 * 3600))
        memory: int | None = _parse_size(values.get("COURSE_SANDBOX_MEMORY") or "6G")
        if memory == 0 or cuda_devices():
            memory = None
        return cls(
            memory=memory,
            processes=int(values.get("COURSE_SANDBOX_PROCESSES") or 256),
            cpu=int(values.get("COURSE_SANDBOX_CPU") or wall),
            file_size=_parse_size(values.get("COURSE_SANDBOX_FILESIZE") or "512M"),
            wall=wall,
            tmp_size=_parse_size(values.get("COURSE_SANDBOX_TMP") or "512M"),
        )

    def describe(self) -> str:
        memory = "none" if self.memory is None else f"{self.memory / GiB:g} GiB"
        return (f"memory {memory}, {self.processes} processes, CPU {self.cpu} s, "
                f"file size {self.file_size / MiB:g} MiB, wall time {self.wall} s; {_cgroup_scope()}")


def _cgroup_scope() -> str:
    """Whether memory, processes and CPU share count per notebook (a cgroup) or per process."""
    support = _cgroup.detect()
    if not support.usable:
        return f"each process on its own (no cgroups: {support.problem})"
    return f"{', '.join(support.controllers)} counted for the whole notebook (cgroup v{support.version})"


# ---------------------------------------------------------------- the bwrap command line


def _covered(path: str, roots: Sequence[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def read_only_paths(extra: Sequence[str] = ()) -> list[str]:
    """What the kernel reads: the Python installation, the environment, ``course_utils``.

    ``course_utils`` is bound as its package directory only (an editable install lives in
    the course repository, whose other files must stay out of sight), plus ``extra``.
    """
    import course_utils

    paths = [sys.base_prefix, sys.prefix, str(Path(course_utils.__file__).resolve().parent), *extra]
    out: list[str] = []
    for path in sorted({os.path.realpath(p) for p in paths if p}, key=len):
        if os.path.exists(path) and not _covered(path, ["/usr", *out]):
            out.append(path)
    return out


def _parents(path: str) -> list[str]:
    parts = Path(path).parts[1:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def bwrap_command(
    command: Sequence[str],
    *,
    private_dir: str,
    workdir: str,
    env: dict[str, str],
    limits: SandboxLimits,
    uid: int | None,
    read_only: Sequence[str],
    etc_files: dict[str, str] | None = None,
    cuda: Sequence[str] = (),
    host_files: dict[str, str] | None = None,
    host_dirs: Sequence[str] = (),
    scratch_dirs: Sequence[str] = (),
    overlays: dict[str, str] | None = None,
) -> list[str]:
    """The full command line that runs ``command`` in the sandbox.

    ``uid``: run as this unprivileged uid (needs root: ``setpriv`` inside the sandbox), or
    ``None`` for a user namespace. ``private_dir`` is a size-limited tmpfs in the sandbox
    (``limits.tmp_size``, like ``/tmp``): what the kernel writes there never reaches the
    host's disk. Into it: ``scratch_dirs`` (created writable), ``host_dirs`` (host folders
    bound read-write at the same path: the IPC sockets) and ``host_files`` (sandbox path ->
    host file, read-only: the connection file, the notebook's copy). ``etc_files`` maps
    sandbox paths to host files bound read-only (``/etc/passwd``). ``overlays`` maps sandbox
    paths to host folders bound read-only over what ``read_only`` put there (the graded
    notebook's ``course_utils``, its answers withheld: :mod:`course_grader.sandbox.withheld`).
    """
    args = ["bwrap", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--die-with-parent", "--new-session", "--hostname", "sandbox"]
    if uid is not None:
        args += ["--cap-add", "CAP_SETUID,CAP_SETGID"]
    else:
        args += ["--unshare-user", "--disable-userns"]
    # the system, read-only; merged-/usr symlinks (/bin -> usr/bin) recreated as symlinks
    args += ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    args += ["--proc", "/proc", "--dev", "/dev",
             "--perms", "1777", "--size", str(limits.tmp_size), "--tmpfs", "/tmp",
             "--perms", "1777", "--size", str(limits.tmp_size), "--tmpfs", "/dev/shm"]
    for device in cuda:
        args += ["--dev-bind", device, device]
    if cuda:
        args += ["--ro-bind", "/sys", "/sys"]
    binds = [(p, "--ro-bind") for p in read_only]
    etc = [p for p in ETC_READ if os.path.exists(p)]
    made: set[str] = {"/", "/usr", "/tmp", "/proc", "/dev"}
    for target in [*etc, *(etc_files or {}), *(p for p, _ in binds), private_dir]:
        for parent in _parents(target):
            if parent not in made and not _covered(parent, read_only):
                args += ["--perms", "0755", "--dir", parent]
                made.add(parent)
    for path in etc:
        args += ["--ro-bind", path, path]
    for target, source in (etc_files or {}).items():
        args += ["--ro-bind", source, target]
    for path, how in binds:
        args += [how, path, path]
    for target, source in (overlays or {}).items():
        args += ["--ro-bind", source, target]
    args += ["--perms", "0755", "--size", str(limits.tmp_size), "--tmpfs", private_dir]
    for path in scratch_dirs:  # the tmpfs is root's: sticky, world-writable, as /tmp
        for parent in [*_parents(path), path]:
            if parent not in made and _covered(parent, [private_dir]) and parent != private_dir:
                args += ["--perms", "1777" if parent == path else "0755", "--dir", parent]
                made.add(parent)
    for path in host_dirs:
        args += ["--bind", path, path]
    for target, source in (host_files or {}).items():
        args += ["--ro-bind", source, target]
    args += ["--chdir", workdir, "--clearenv"]
    for name, value in sorted(env.items()):
        args += ["--setenv", name, value]
    args += ["--"]
    if uid is not None:
        args += ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                 "--inh-caps=-all", "--bounding-set=-all", "--"]
    args += ["prlimit", f"--nproc={limits.processes}", f"--cpu={limits.cpu}:{limits.cpu + 5}",
             f"--fsize={limits.file_size}"]
    if limits.memory is not None:
        args += [f"--as={limits.memory}"]
    args += ["--", *command]
    return args


def sandbox_env(private_dir: str, home: str, workdir: str, extra: Sequence[str] = ()) -> dict[str, str]:
    """The kernel's whole environment: the allow-list, plus paths inside the private dir."""
    env = {name: os.environ[name] for name in (*ENV_ALLOW, *extra) if name in os.environ}
    env.setdefault("LANG", "C.UTF-8")
    env.update({
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"]),
        "HOME": home,
        "USER": "student",
        "LOGNAME": "student",
        "TMPDIR": "/tmp",
        "PWD": workdir,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "IPYTHONDIR": f"{home}/.ipython",
        "JUPYTER_RUNTIME_DIR": f"{private_dir}/runtime",
        "MPLCONFIGDIR": f"{home}/.config/matplotlib",
        "XDG_CACHE_HOME": f"{home}/.cache",
        "XDG_CONFIG_HOME": f"{home}/.config",
        "HF_HOME": f"{home}/.cache/huggingface",
        "TORCH_HOME": f"{home}/.cache/torch",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
    })
    return env


# ---------------------------------------------------------------- uids and private dirs


class _UidLease:
    """An unprivileged uid no other sandbox on this machine holds (an flock per uid)."""

    def __init__(self) -> None:
        lock_dir = Path(tempfile.gettempdir()) / "course-sandbox-uids"
        lock_dir.mkdir(mode=0o700, exist_ok=True)
        if lock_dir.stat().st_uid != os.geteuid() or lock_dir.is_symlink():
            raise SandboxError(f"{lock_dir} is not owned by the grader; remove it")
        start = os.getpid() % UID_COUNT
        for step in range(UID_COUNT):
            uid = UID_BASE + (start + step) % UID_COUNT
            handle = open(lock_dir / str(uid), "a")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                continue
            self.uid, self._handle = uid, handle
            return
        raise SandboxError(f"all {UID_COUNT} sandbox uids are in use")

    def release(self) -> None:
        self._handle.close()


def _passwd_files(folder: Path, uid: int, home: str) -> dict[str, str]:
    """``/etc/passwd`` and ``/etc/group`` naming the sandbox user (getpass, ~ expansion)."""
    (folder / "passwd").write_text(f"root:x:0:0:root:/root:/bin/sh\nstudent:x:{uid}:{uid}:student:{home}:/bin/sh\n"
                                   "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
    (folder / "group").write_text(f"root:x:0:\nstudent:x:{uid}:\nnogroup:x:65534:\n")
    for name in ("passwd", "group"):
        os.chmod(folder / name, 0o644)
    return {"/etc/passwd": str(folder / "passwd"), "/etc/group": str(folder / "group")}


def _matplotlib_cache() -> list[Path]:
    """The grader's matplotlib font cache, copied in so each kernel does not rebuild it."""
    folders = [os.environ.get("MPLCONFIGDIR"), os.environ.get("XDG_CACHE_HOME") and f"{os.environ['XDG_CACHE_HOME']}/matplotlib",
               os.path.expanduser("~/.cache/matplotlib")]
    for folder in filter(None, folders):
        found = sorted(Path(folder).glob("fontlist-*.json"))
        if found:
            return found
    return []


# ---------------------------------------------------------------- the kernel manager


class SandboxKernelManager(AsyncKernelManager):
    """A kernel manager whose kernel runs in a bubblewrap sandbox, over IPC sockets.

    Set ``work_files`` (name -> bytes) before ``start_kernel`` to put files in the kernel's
    working directory. ``limits`` defaults to :meth:`SandboxLimits.from_env`. After the kernel
    ended, :meth:`death_reason` says why.
    """

    read_only_extra = ListTrait(
        help="More host paths the kernel may read (bound read-only at the same path).",
    ).tag(config=True)
    env_extra = ListTrait(help="More environment variable names the kernel inherits.").tag(config=True)

    @default("read_only_extra")
    def _read_only_extra_default(self) -> list[str]:
        return [p for p in os.environ.get("COURSE_SANDBOX_READ", "").split(os.pathsep) if p]

    def __init__(self, **kwargs: Any) -> None:
        self.limits: SandboxLimits = kwargs.pop("limits", None) or SandboxLimits.from_env()
        self.work_files: dict[str, bytes] = kwargs.pop("work_files", {})
        # sandbox path -> host folder bound read-only over it (the graded notebook's course_utils)
        self.overlays: dict[str, str] = kwargs.pop("overlays", {})
        super().__init__(**kwargs)
        problem = sandbox_problem()
        if problem:
            raise SandboxError(problem)
        self._root = Path(tempfile.mkdtemp(prefix="course-sandbox-"))  # 0700, the grader's
        self._private = self._root / "private"
        self._private.mkdir()
        self._lease = _UidLease() if os.geteuid() == 0 else None
        self.transport = "ipc"
        self.ip = str(self._private / "ipc" / "kernel")
        self.connection_file = str(self._private / "kernel.json")
        self._process: subprocess.Popen | None = None
        self._wall_timer: threading.Timer | None = None
        self._wall_exceeded = False
        self._log_path = self._root / "kernel.log"
        self._cgroup: _cgroup.SandboxCgroup | None = None  # made at launch, removed at cleanup

    @property
    def kernel_spec(self):  # type: ignore[override]
        """The kernelspec, interrupted by a message: bwrap does not forward SIGINT."""
        spec = super().kernel_spec
        if spec is not None:
            spec.interrupt_mode = "message"
        return spec

    @property
    def sandbox_uid(self) -> int | None:
        return self._lease.uid if self._lease else None

    def _chown(self, path: Path) -> None:
        if self._lease:
            os.chown(path, self._lease.uid, self._lease.uid)

    def _prepare_private_dir(self) -> dict[str, Any]:
        """Host side of the private dir: the IPC folder and the files the kernel starts with.

        In the sandbox the private dir is a tmpfs holding ``work`` (the kernel's working
        directory), ``home`` and ``runtime``; the host's disk only gets IPC sockets.
        """
        ipc, seed = self._private / "ipc", self._root / "seed"
        ipc.mkdir(exist_ok=True)
        self._chown(ipc)
        os.chmod(ipc, 0o700)
        seed.mkdir(exist_ok=True)
        home, work = self._private / "home", self._private / "work"
        files: dict[str, str] = {}
        for index, cache in enumerate(_matplotlib_cache()):
            shutil.copy2(cache, seed / f"mpl{index}")
            files[str(home / ".config" / "matplotlib" / cache.name)] = str(seed / f"mpl{index}")
        for index, (name, content) in enumerate(self.work_files.items()):
            (seed / f"work{index}").write_bytes(content)
            files[str(work / Path(name).name)] = str(seed / f"work{index}")
        for source in files.values():
            os.chmod(source, 0o644)
        files[str(self._private / "kernel.json")] = self.connection_file
        return {
            "home": str(home), "work": str(work), "host_files": files, "host_dirs": [str(ipc)],
            "scratch_dirs": [str(work), str(home), str(home / ".config"), str(home / ".config" / "matplotlib"),
                             str(self._private / "runtime")],
        }

    def write_connection_file(self, **kwargs: Any) -> None:
        super().write_connection_file(**kwargs)
        if os.path.exists(self.connection_file):
            self._chown(Path(self.connection_file))  # the kernel's uid must read it

    def seal_ipc(self) -> None:
        """Once the kernel has bound its sockets, take back the IPC folder (root mode), so
        the only host folder the kernel could write to is closed."""
        ipc = self._private / "ipc"
        if self._lease is not None and ipc.is_dir():
            os.chown(ipc, 0, 0)
            os.chmod(ipc, 0o711)

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:  # type: ignore[override]
        layout = self._prepare_private_dir()
        uid = self.sandbox_uid
        etc_files = _passwd_files(self._root, uid, layout["home"]) if uid is not None else {}
        command = bwrap_command(
            kernel_cmd,
            private_dir=str(self._private),
            workdir=layout["work"],
            env=sandbox_env(str(self._private), layout["home"], layout["work"], self.env_extra),
            limits=self.limits,
            uid=uid,
            read_only=read_only_paths(self.read_only_extra),
            etc_files=etc_files,
            cuda=cuda_devices(),
            host_files=layout["host_files"],
            host_dirs=layout["host_dirs"],
            scratch_dirs=layout["scratch_dirs"],
            overlays=self.overlays,
        )
        self._cgroup = _cgroup.SandboxCgroup.create(self.limits)  # None: per-process limits only
        if self._cgroup is not None:
            self._cgroup.watch_oom(self._memory_limit_exceeded)
            command = self._cgroup.wrap(command)  # joins the cgroup, then execs bwrap
        log = open(self._log_path, "ab")  # the trusted side's copy of the kernel's own output
        kw.update(env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, cwd=str(self._root),
                  stdout=log, stderr=subprocess.STDOUT)
        try:
            await super()._async_launch_kernel(command, **kw)
        finally:
            log.close()
        assert self.provisioner is not None
        self._process = getattr(self.provisioner, "process", None)
        self._wall_timer = threading.Timer(self.limits.wall, self._wall_time_exceeded)
        self._wall_timer.daemon = True
        self._wall_timer.start()

    def _wall_time_exceeded(self) -> None:
        self._wall_exceeded = True
        self._kill_sandbox()

    def _memory_limit_exceeded(self) -> None:
        """The OOM killer fired in the notebook's cgroup: stop the whole notebook (v1; v2 does it)."""
        self._kill_sandbox()
        if self._cgroup is not None:
            self._cgroup.kill()

    def _remove_cgroup(self) -> None:
        """Kill whatever is left in the notebook's cgroup and remove it (its counters stay readable)."""
        cgroup = getattr(self, "_cgroup", None)
        if cgroup is not None:
            cgroup.remove()

    def _kill_sandbox(self) -> None:
        """SIGKILL bwrap's process group: its PID namespace, and every process in it, dies."""
        process = self._process
        if process is None or process.poll() is not None:
            return
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        except PermissionError:
            process.kill()

    def death_reason(self) -> str:
        """Why the kernel ended, in words: which limit, or its exit status."""
        if self._wall_exceeded:
            return f"the notebook ran past its wall-time limit of {self.limits.wall} s and was stopped"
        code = self._process.poll() if self._process is not None else None
        if self._cgroup is not None and self._cgroup.out_of_memory:
            memory = "" if self.limits.memory is None else f" of {self.limits.memory / GiB:g} GiB"
            return (f"the notebook's processes together used more than its memory limit{memory} "
                    "(files it wrote in /tmp and its working directory count too) and it was stopped")
        if code is None:
            return "the kernel stopped responding"
        signum = code - 128 if code > 128 else (-code if code < 0 else 0)
        name = signal.Signals(signum).name if signum in signal.Signals._value2member_map_ else ""
        if name == "SIGXCPU":
            return f"the kernel used up its CPU-time limit of {self.limits.cpu} s"
        if name == "SIGXFSZ":
            return f"the kernel wrote a file larger than the {self.limits.file_size / MiB:g} MiB limit"
        if name == "SIGKILL":
            return (f"the kernel was killed (SIGKILL): the CPU-time limit ({self.limits.cpu} s) "
                    "or the machine's out-of-memory killer")
        if name in {"SIGABRT", "SIGSEGV", "SIGBUS"}:
            memory = "" if self.limits.memory is None else f" (memory limit {self.limits.memory / GiB:g} GiB)"
            return f"the kernel crashed ({name}), e.g. an allocation that failed{memory}"
        if name:
            return f"the kernel was ended by {name}"
        return f"the kernel exited with status {code} (e.g. os._exit, sys.exit from a thread)"

    def startup_log(self, lines: int = 15) -> str:
        """The end of the sandbox's own output (bwrap's errors when it could not start)."""
        try:
            return "\n".join(self._log_path.read_text(errors="replace").strip().splitlines()[-lines:])
        except OSError:
            return ""

    async def _async_cleanup_resources(self, restart: bool = False) -> None:  # type: ignore[override]
        if self._wall_timer is not None:
            self._wall_timer.cancel()
        self._kill_sandbox()
        if self._process is not None:
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self._remove_cgroup()
        await super()._async_cleanup_resources(restart=restart)
        if not restart:
            self._remove_private_dir()

    cleanup_resources = _async_cleanup_resources  # nbclient calls the public name

    def _remove_private_dir(self) -> None:
        shutil.rmtree(self._root, ignore_errors=True)
        if self._lease is not None:
            self._lease.release()
            self._lease = None

    def __del__(self) -> None:
        try:
            timer = getattr(self, "_wall_timer", None)
            if timer is not None:
                timer.cancel()
            self._kill_sandbox()
            self._remove_cgroup()
            if getattr(self, "_root", None) is not None and self._root.exists():
                self._remove_private_dir()
        except Exception:  # noqa: BLE001 - best effort at interpreter exit
            pass
        super().__del__()


# ---------------------------------------------------------------- is a sandbox available?


def sandbox_problem() -> str | None:
    """``None`` when a bwrap sandbox works on this machine, else what is wrong and what to install.

    Remembered per PATH (the test sandbox it runs costs a bwrap start): a PATH without bwrap is
    asked again, not answered from an earlier PATH that had it."""
    return _sandbox_problem(os.environ.get("PATH", ""), os.geteuid())


@functools.lru_cache(maxsize=16)
def _sandbox_problem(path: str, euid: int) -> str | None:
    missing = [tool for tool in ("bwrap", "prlimit") + (("setpriv",) if os.geteuid() == 0 else ())
               if shutil.which(tool) is None]
    if missing:
        return (f"cannot sandbox the grading kernels: {', '.join(missing)} not found. Install bubblewrap "
                "(`apt-get install bubblewrap`; prlimit and setpriv come with util-linux), or grade "
                "unsandboxed with `course grade --no-sandbox` (only for trusted submissions).")
    with tempfile.TemporaryDirectory(prefix="course-sandbox-check-") as scratch:
        private = Path(scratch) / "private"
        private.mkdir()
        uid = UID_BASE + UID_COUNT - 1 if os.geteuid() == 0 else None
        if uid is not None:
            os.chown(private, uid, uid)
        command = bwrap_command(
            [sys.executable, "-c", "import os; print(os.getuid())"],
            private_dir=str(private), workdir=str(private), env={"PATH": "/usr/bin:/bin"},
            limits=SandboxLimits(), uid=uid, read_only=read_only_paths(),
        )
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"cannot sandbox the grading kernels: bwrap did not run ({error})."
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        return ("cannot sandbox the grading kernels: a test sandbox failed: " + " | ".join(tail) +
                ". bwrap needs root or unprivileged user namespaces "
                "(sysctl kernel.unprivileged_userns_clone=1); or grade with `course grade --no-sandbox`.")
    return None
