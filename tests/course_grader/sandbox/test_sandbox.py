"""The grading sandbox (course_grader.sandbox.bubblewrap): what a submission's kernel can and cannot do.

Each test runs a tiny notebook through ``SandboxedExecute``, the Execute preprocessor that
nbgrader_config.py gives autograding, and reads what the kernel saw back from its outputs.
The last tests grade notebook 00 with real ``nbgrader autograde``, serially and in parallel.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest

from course_grader.sandbox import bubblewrap as sandbox
from course_grader.sandbox.bubblewrap import SandboxLimits, bwrap_command
from course_grader.sandbox.execute import SandboxedExecute, SandboxLimitError

from tests.conftest import ROOT
from tests.helpers.sandbox import needs_bwrap, notebook, run

A = "00_welcome"


PROBE = r'''
import json, os, socket
def attempt(action):
    try:
        result = action()
        return "ok" if result is None else result
    except Exception as error:
        return f"{type(error).__name__}"
def write(path):
    with open(path, "w") as f:
        f.write("x")
def connect(address):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(3)
    s.connect(address)
status = dict(line.split(":\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\t" in line)
print(json.dumps({
    "uid": os.getuid(), "cwd": os.getcwd(), "cwd_files": os.listdir("."),
    "cap_eff": status["CapEff"].strip(), "cap_bnd": status["CapBnd"].strip(),
    "env": dict(os.environ),
    "read": {p: attempt(lambda p=p: open(p).read()[:20]) for p in PATHS_TO_READ},
    "list": {p: attempt(lambda p=p: os.listdir(p)) for p in PATHS_TO_LIST},
    "write": {p: attempt(lambda p=p: write(p)) for p in PATHS_TO_WRITE},
    "net": {f"{h}:{p}": attempt(lambda a=(h, p): connect(a)) for h, p in ADDRESSES},
    "ipc_write": attempt(lambda: write(json.load(open("../kernel.json"))["ip"] + "-junk")),
    "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
}))
'''


@needs_bwrap
def test_kernel_sees_only_its_own_notebook_and_the_environment(tmp_path, monkeypatch):
    # a course with a gradebook, solutions and another student's submission beside this one
    course = tmp_path / "course"
    for path in ["gradebook.db", "solutions/00_welcome/00_welcome.ipynb",
                 "submitted/other/00_welcome/00_welcome.ipynb", "autograded/other/00_welcome/00_welcome.ipynb"]:
        (course / path).parent.mkdir(parents=True, exist_ok=True)
        (course / path).write_text("SECRET CONTENT")
    monkeypatch.setenv("COURSE_GRADER_SECRET", "hunter2")
    monkeypatch.setenv("GRADER_DB_PASSWORD", "hunter2")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    root_files = [str(p) for p in Path("/root").iterdir() if p.is_file()][:5] if os.access("/root", os.R_OK) else []
    read = [str(course / "gradebook.db"), str(course / "solutions/00_welcome/00_welcome.ipynb"),
            str(course / "submitted/other/00_welcome/00_welcome.ipynb"), str(ROOT / "README.md"),
            str(ROOT / "nbgrader_config.py"), str(ROOT / "solutions/00_welcome/00_welcome.ipynb"),
            "/etc/shadow", *root_files]
    listed = [str(course), str(ROOT), str(ROOT / "solutions"), str(tmp_path), "/work", "/home"]
    written = [str(ROOT / "pwned.txt"), str(course / "pwned.txt"), str(Path(sandbox.sys.prefix) / "pwned.txt"),
               "/usr/pwned.txt", "/pwned.txt", "/etc/pwned.txt", "probe-output.txt"]
    addresses = [("1.1.1.1", 53), ("8.8.8.8", 443), ("127.0.0.1", listener.getsockname()[1])]
    setup = (f"PATHS_TO_READ = {read!r}\nPATHS_TO_LIST = {listed!r}\nPATHS_TO_WRITE = {written!r}\n"
             f"ADDRESSES = {addresses!r}\n")
    try:
        (out,) = run(setup + PROBE)
    finally:
        listener.close()
    seen = json.loads(out)

    assert seen["cwd_files"] == ["probe.ipynb"], "the working directory holds the notebook and nothing else"
    assert not seen["cwd"].startswith(str(ROOT)) and not seen["cwd"].startswith(str(course))
    for path, result in seen["read"].items():
        assert result in {"FileNotFoundError", "PermissionError"}, f"the kernel read {path}: {result!r}"
    for path, result in seen["list"].items():
        assert isinstance(result, list) and set(result) <= {"main", "src", ".venv"} or \
            result in {"FileNotFoundError", "PermissionError"}, \
            f"the kernel listed {path}: {result}"
    assert not (ROOT / "pwned.txt").exists() and not (course / "pwned.txt").exists()
    for path, result in seen["write"].items():
        expected = "ok" if path == "probe-output.txt" else ("PermissionError", "OSError", "FileNotFoundError")
        assert result in expected, f"writing {path}: {result}"
    for address, result in seen["net"].items():
        assert result != "ok", f"the kernel reached {address}"
    assert "COURSE_GRADER_SECRET" not in seen["env"] and "GRADER_DB_PASSWORD" not in seen["env"]
    assert "hunter2" not in json.dumps(seen["env"])
    assert seen["env"]["COURSE_PROFILE"] == os.environ["COURSE_PROFILE"]
    assert seen["ipc_write"] != "ok" or os.geteuid() != 0, "the IPC folder is sealed once the kernel started"
    assert max(seen["pids"]) < 100, f"the kernel sees host processes: {seen['pids'][-5:]}"
    assert int(seen["cap_eff"], 16) == 0, "the kernel holds capabilities"
    if os.geteuid() == 0:
        assert seen["uid"] >= sandbox.UID_BASE, "as root, the kernel runs as an unprivileged uid"
        assert int(seen["cap_bnd"], 16) == 0


@needs_bwrap
def test_limits_fire_with_a_clear_reason(monkeypatch):
    monkeypatch.setenv("COURSE_SANDBOX_PROCESSES", "48")
    monkeypatch.setenv("COURSE_SANDBOX_FILESIZE", "1M")
    monkeypatch.setenv("COURSE_SANDBOX_TMP", "4M")
    memory, processes, file_size, disk, still_alive = run(
        "x = bytearray(7 * 1024**3)",
        "import subprocess\nprocs = [subprocess.Popen(['sleep', '30']) for _ in range(100)]",
        "open('big.bin', 'wb').write(b'0' * 2 * 1024**2)",
        "for i in range(8):\n    open(f'part{i}.bin', 'wb').write(b'0' * 1000**2)",
        "print('still here')",
    )
    assert "MemoryError" in memory and "memory limit is 6 GiB" in memory, memory
    assert "Resource temporarily unavailable" in processes and "at most 48 processes" in processes, processes
    assert "File too large" in file_size and "files are limited to 1 MiB" in file_size, file_size
    assert "No space left on device" in disk and "at most 4 MiB" in disk, disk
    assert still_alive.startswith("still here")


@needs_bwrap
def test_an_endless_cell_is_interrupted_and_the_notebook_goes_on():
    looping, after = run("while True:\n    pass", "print('after')", timeout=5)
    assert "CellTimeoutError" in looping or "KeyboardInterrupt" in looping
    assert after == "after\n"


@needs_bwrap
def test_a_kernel_that_swallows_interrupts_costs_one_cell_limit_not_one_per_cell():
    """Issue 33 item 6: interrupted at its limit, a kernel that ignores the interrupt is stopped after a
    short grace, and every later cell fails at once (it cost a cell limit per remaining cell)."""
    import time

    stubborn = ("import time\nwhile True:\n    try:\n        time.sleep(0.05)\n    except KeyboardInterrupt:\n"
                "        pass\n")
    started = time.monotonic()
    texts = run(stubborn, "print('never')", "print('never either')", "print('nor this')", timeout=4)
    took = time.monotonic() - started
    assert "CellTimeoutError" in texts[0] or "KeyboardInterrupt" in texts[0], texts
    assert all(t.startswith("KernelStopped:") and "not run" in t for t in texts[1:]), texts
    assert took < 4 + 5 + 15, f"{took:.0f} s: the stopped kernel's remaining cells cost time"


@needs_bwrap
def test_cpu_and_wall_time_limits_kill_the_kernel_and_say_so(monkeypatch):
    monkeypatch.setenv("COURSE_SANDBOX_CPU", "4")
    with pytest.raises(SandboxLimitError, match="Kernel died: the kernel used up its CPU-time limit of 4 s"):
        run("while True:\n    pass")
    monkeypatch.delenv("COURSE_SANDBOX_CPU")
    monkeypatch.setenv("COURSE_SANDBOX_WALL", "15")
    started = time.monotonic()
    with pytest.raises(SandboxLimitError, match="wall-time limit of 15 s"):
        run("import time\ntime.sleep(1000)", timeout=120)
    assert time.monotonic() - started < 60


def _processes_with(marker: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline and "pytest" not in cmdline:
            found.append(f"{entry.name}: {cmdline}")
    return found


DAEMONS = r'''
import os, subprocess, sys, time
SLEEP = [sys.executable, "-c", "import time; time.sleep(1000)"]
subprocess.Popen([*SLEEP, "{marker}-session"], start_new_session=True)
if os.fork() == 0:          # a classic double-forked daemon
    os.setsid()
    if os.fork() == 0:
        os.execv(SLEEP[0], [*SLEEP, "{marker}-daemon"])
    os._exit(0)
time.sleep(1)
print(len([p for p in os.listdir("/proc") if p.isdigit()]))
'''


@needs_bwrap
@pytest.mark.parametrize("ending", ["normal", "kernel dies"])
def test_no_process_survives_grading(ending, monkeypatch):
    managers = []
    prepare = sandbox.SandboxKernelManager._prepare_private_dir
    monkeypatch.setattr(sandbox.SandboxKernelManager, "_prepare_private_dir",
                        lambda self: managers.append(self) or prepare(self))
    marker = f"course-sandbox-marker-{os.getpid()}-{time.monotonic_ns()}"
    cells = [DAEMONS.replace("{marker}", marker)]
    if ending == "kernel dies":
        cells.append("import os\nos._exit(3)")
        with pytest.raises(SandboxLimitError, match="exited with status 3"):
            run(*cells)
    else:
        (out,) = run(*cells)
        assert int(out) >= 3, "the daemons should have been running inside the sandbox"
    deadline = time.monotonic() + 5
    while _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _processes_with(marker), f"processes survived grading: {_processes_with(marker)}"
    assert managers and not any(km._root.exists() for km in managers), "the private dir must be removed"


def test_the_sandbox_is_switched_off_only_explicitly(monkeypatch):
    monkeypatch.delenv("COURSE_SANDBOX", raising=False)
    assert sandbox.sandbox_enabled()
    monkeypatch.setenv("COURSE_SANDBOX", "")
    assert sandbox.sandbox_enabled()
    monkeypatch.setenv("COURSE_SANDBOX", "off")
    assert not sandbox.sandbox_enabled()
    assert SandboxedExecute().kernel_manager_class is not sandbox.SandboxKernelManager


def test_limits_from_env():
    limits = SandboxLimits.from_env({"COURSE_PROFILE": "ci", "COURSE_SANDBOX_MEMORY": "2G",
                                     "COURSE_SANDBOX_FILESIZE": "10M", "COURSE_SANDBOX_WALL": "60"})
    expected_memory = None if sandbox.cuda_devices() else 2 * 1024**3
    assert (limits.memory, limits.file_size, limits.wall, limits.cpu) == (expected_memory, 10 * 1024**2, 60, 60)
    assert SandboxLimits.from_env({"COURSE_PROFILE": "cpu"}).wall > SandboxLimits.from_env({}).wall


def test_bwrap_command_line():
    limits = SandboxLimits(memory=3 * 1024**3)
    args = bwrap_command(["python", "-m", "ipykernel_launcher"], private_dir="/tmp/x/private",
                         workdir="/tmp/x/private/work", env={"PATH": "/usr/bin"}, limits=limits, uid=61001,
                         read_only=["/opt/venv"], cuda=["/dev/nvidia0", "/dev/nvidiactl"],
                         host_files={"/tmp/x/private/kernel.json": "/tmp/y/kernel.json"},
                         host_dirs=["/tmp/x/private/ipc"], scratch_dirs=["/tmp/x/private/work"])
    text = " ".join(args)
    for flag in ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--die-with-parent", "--clearenv",
                 "--ro-bind /opt/venv /opt/venv", "--tmpfs /tmp/x/private", "--bind /tmp/x/private/ipc /tmp/x/private/ipc",
                 "--ro-bind /tmp/y/kernel.json /tmp/x/private/kernel.json", "--perms 1777 --dir /tmp/x/private/work", "--perms 0755 --dir /opt",
                 "setpriv --reuid=61001 --regid=61001", "--nproc=256", f"--as={3 * 1024**3}",
                 "--dev-bind /dev/nvidia0 /dev/nvidia0", "--chdir /tmp/x/private/work"]:
        assert flag in text, flag
    assert args[-3:] == ["python", "-m", "ipykernel_launcher"]
    assert str(ROOT) not in text
    unprivileged = " ".join(bwrap_command(["true"], private_dir="/p", workdir="/p", env={}, limits=SandboxLimits(memory=None),
                                          uid=None, read_only=[]))
    assert "--unshare-user" in unprivileged and "setpriv" not in unprivileged and "--as=" not in unprivileged


def test_only_the_package_directory_of_the_repository_is_bound():
    paths = sandbox.read_only_paths()
    assert str(ROOT) not in paths and str(ROOT / "src") not in paths
    assert str(ROOT / "src" / "course_utils") in paths or not (ROOT / "src" / "course_utils").is_dir()


# ------------------------------------------------------------------ real nbgrader
# Real nbgrader grading in the sandbox, serial and parallel -- an attacker blocked from the
# gradebook and a classmate's notebook, its kernel in a private copy of its own notebook, an
# honest student graded 2/2 -- is test_attacks.py (`course grade` on a class with every attack).


@needs_bwrap
def test_a_later_cell_cannot_rewrite_an_earlier_cells_output():
    """Feedback shows the outputs of answer cells before the first hidden test; a later cell that
    rewrote them (update_display, or a new display with the same id) would carry what it saw of
    the hidden tests there (the third red team's leak). Within its own cell an update still works."""
    nb = notebook(
        "from IPython.display import display, update_display\nh = display('first', display_id='notes')",
        "display('second', display_id='own')\nupdate_display('second, updated', display_id='own')",
        "update_display('LEAKED', display_id='notes')\ndisplay('LEAKED TOO', display_id='notes')",
    )
    SandboxedExecute(timeout=60).preprocess(nb, {"nbgrader": {"notebook": "probe"}, "metadata": {"path": str(ROOT)}})
    first = [o["data"]["text/plain"] for o in nb.cells[0].outputs if o.output_type == "display_data"]
    own = [o["data"]["text/plain"] for o in nb.cells[1].outputs if o.output_type == "display_data"]
    assert first == ["'first'"], first
    assert own == ["'second, updated'"], own
