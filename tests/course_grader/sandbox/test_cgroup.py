"""Per-notebook cgroups (course_grader.sandbox.cgroup): limits count the kernel and its children together.

The first tests drive :class:`SandboxCgroup` with plain processes (they need writable cgroups,
not bwrap); the others grade tiny notebooks through ``SandboxedExecute`` and read the
counters of the notebook's cgroup afterwards. Timing a classmate beside a hostile notebook
is too noisy for a test on a shared 2-core machine: benchmarks/bench_neighbours.py measures it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from course_grader.sandbox import cgroup
from course_grader.sandbox import bubblewrap as sandbox
from course_grader.sandbox.cgroup import SandboxCgroup, cgroup_status
from course_grader.sandbox.bubblewrap import SandboxLimits
from course_grader.sandbox.execute import SandboxLimitError

from tests.helpers.sandbox import needs_bwrap, run

MiB = 1024**2
SUPPORT = cgroup.detect()
needs_cgroups = pytest.mark.skipif(not SUPPORT.usable, reason=f"no cgroups here: {SUPPORT.problem}")
needs_memory = pytest.mark.skipif("memory" not in SUPPORT.bases, reason=f"no memory cgroup here: {SUPPORT.problem}")
needs_pids = pytest.mark.skipif("pids" not in SUPPORT.bases, reason=f"no pids cgroup here: {SUPPORT.problem}")


@pytest.fixture
def managers(monkeypatch) -> list[sandbox.SandboxKernelManager]:
    """Every SandboxKernelManager the test starts (to read its cgroup's counters afterwards)."""
    found: list[sandbox.SandboxKernelManager] = []
    prepare = sandbox.SandboxKernelManager._prepare_private_dir
    monkeypatch.setattr(sandbox.SandboxKernelManager, "_prepare_private_dir",
                        lambda self: found.append(self) or prepare(self))
    return found


def _leftover_cgroups() -> list[Path]:
    own = f"{cgroup.PREFIX}-{os.getpid()}-"
    return [p for base in SUPPORT.bases.values() if base.is_dir() for p in base.iterdir() if p.name.startswith(own)]


# ------------------------------------------------------------------ the module alone


def test_status_and_fallback_are_reported(monkeypatch):
    assert cgroup_status().startswith("cgroup v" if SUPPORT.usable else "no cgroups: ")
    monkeypatch.setenv("COURSE_SANDBOX_CGROUP", "off")
    cgroup.detect.cache_clear()
    try:
        assert not cgroup.detect().usable
        assert cgroup_status() == ("no cgroups: switched off (COURSE_SANDBOX_CGROUP=off); "
                                   "sandbox limits apply per process only")
        assert SandboxCgroup.create(SandboxLimits()) is None
        assert "each process on its own (no cgroups: switched off" in SandboxLimits().describe()
    finally:
        monkeypatch.delenv("COURSE_SANDBOX_CGROUP")
        cgroup.detect.cache_clear()
    if SUPPORT.usable:
        assert "counted for the whole notebook (cgroup v" in SandboxLimits().describe()


CHILDREN = r'''
import os, sys, time
size, count = int(sys.argv[1]), int(sys.argv[2])
children = []
for _ in range(count):
    pid = os.fork()
    if pid == 0:
        block = bytearray(b"\1") * size   # touched: resident, not just reserved
        time.sleep(3)
        os._exit(0)
    children.append(pid)
print([os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children])
'''


@needs_memory
def test_children_share_one_memory_limit():
    limit = 192 * MiB
    group = SandboxCgroup.create(SandboxLimits(memory=limit))
    assert group is not None
    try:
        done = subprocess.run(group.wrap([sys.executable, "-c", CHILDREN, str(limit // 2), "3"]),
                              capture_output=True, text=True, timeout=60)
        stats = group.stats()
    finally:
        group.remove()
    codes = eval(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else None
    assert stats.memory_limit == limit
    assert stats.oom_kills >= 1 and stats.memory_peak <= limit, (stats, done.stdout, done.stderr)
    assert done.returncode == -9 or (codes and -9 in codes), (done.returncode, codes)
    assert not any(path.exists() for path in group.paths)


@needs_pids
def test_processes_count_together_and_nothing_is_left():
    group = SandboxCgroup.create(SandboxLimits(processes=16))
    assert group is not None
    spawn = ("import subprocess, sys\nprocs, refused = [], 0\nfor _ in range(40):\n"
             "    try:\n        procs.append(subprocess.Popen(['sleep', '60'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))\n"
             "    except OSError:\n        refused += 1\nprint(len(procs), refused)\n")
    try:
        done = subprocess.run(group.wrap([sys.executable, "-c", spawn]), capture_output=True, text=True, timeout=60)
        started, refused = map(int, done.stdout.split())
        assert len(group.pids()) == started, "the sleeps, orphaned, are still in the cgroup"
        stats = group.stats()
    finally:
        group.remove()
    limit = 16 + cgroup.BWRAP_TASKS
    assert stats.pids_limit == limit and started == limit - 1 and refused == 40 - started
    assert stats.pids_refused >= 1 and (stats.pids_peak is None or stats.pids_peak <= limit)
    assert not any(path.exists() for path in group.paths)
    assert not _leftover_cgroups()


# ------------------------------------------------------------------ notebooks in the sandbox


FORK_HALF_EACH = r'''
import os, time
size = {half}
for _ in range(3):
    if os.fork() == 0:
        try:
            block = bytearray(b"\1") * size    # each child: half the notebook's limit, under its own rlimit
            time.sleep(30)
        finally:
            os._exit(0)
time.sleep(30)
print("all three children held their memory")
'''


@needs_bwrap
@needs_memory
def test_three_children_with_half_the_limit_each_stop_the_notebook(monkeypatch, managers):
    # 2 GiB: a child's address space (the kernel's ~0.75 GiB, inherited, and its half) fits its rlimit
    limit = 2048 * MiB
    monkeypatch.setenv("COURSE_SANDBOX_MEMORY", str(limit))
    with pytest.raises(SandboxLimitError, match="processes together used more than its memory limit of 2 GiB"):
        run(FORK_HALF_EACH.replace("{half}", str(limit // 2)), "print('after')", timeout=60)
    (km,) = managers
    stats = km._cgroup.stats()
    assert stats.memory_limit == limit and km._cgroup.out_of_memory
    assert stats.memory_peak <= limit, f"the notebook held {stats.memory_peak / MiB:.0f} MiB, over {limit / MiB:.0f}"
    assert not any(path.exists() for path in km._cgroup.paths) and not _leftover_cgroups()


@needs_bwrap
@needs_memory
def test_files_in_tmpfs_count_as_the_notebooks_memory(monkeypatch, managers):
    limit = 1024 * MiB  # the kernel's address space alone is ~0.75 GiB: it would not start under less
    monkeypatch.setenv("COURSE_SANDBOX_MEMORY", str(limit))
    monkeypatch.setenv("COURSE_SANDBOX_TMP", str(500 * MiB))  # each tmpfs fits 500 MiB; together they do not
    fill = ("chunk = b'1' * 2**20\nfor folder in ['/tmp', '/dev/shm', '.']:\n"
            "    with open(f'{folder}/fill.bin', 'wb') as f:\n        for _ in range(450):\n            f.write(chunk)\n"
            "print('wrote 1350 MiB')")
    with pytest.raises(SandboxLimitError, match="used more than its memory limit of 1 GiB"):
        run(fill, timeout=60)
    stats = managers[0]._cgroup.stats()
    assert managers[0]._cgroup.out_of_memory and stats.memory_peak <= limit


@needs_bwrap
@needs_cgroups
def test_an_honest_notebook_runs_in_its_cgroup_and_it_is_removed(managers):
    code = ("import subprocess\nprocs = [subprocess.Popen(['sleep', '2']) for _ in range(3)]\n"
            "print(sum(p.wait() == 0 for p in procs))")
    (out,) = run(code)
    assert out == "3\n"
    stats = managers[0]._cgroup.stats()
    if "pids" in SUPPORT.bases:
        assert stats.pids_refused == 0 and (stats.pids_peak is None or stats.pids_peak >= 4), stats
    if "memory" in SUPPORT.bases:
        assert stats.oom_kills == 0 and stats.memory_peak > 10 * MiB, "the kernel's memory is counted"
    assert not any(path.exists() for path in managers[0]._cgroup.paths) and not _leftover_cgroups()


FORK_BOMB = r'''
import os, time
def bomb():
    while True:
        try:
            os.fork()
        except OSError:
            time.sleep(0.01)
first = os.fork()
if first == 0:
    os.setpgid(0, 0)
    bomb()
time.sleep(4)
print("the kernel still answers")
os.killpg(first, 9)
for _ in range(1000):  # until the bomb's processes are gone (on a loaded machine, seconds): the next
    try:               # cell needs a thread of its own under the same process limit
        os.killpg(first, 0)
    except ProcessLookupError:
        break
    time.sleep(0.01)
'''


@needs_bwrap
@needs_pids
def test_a_fork_bomb_stops_at_the_process_limit_and_dies_with_the_notebook(monkeypatch, managers):
    monkeypatch.setenv("COURSE_SANDBOX_PROCESSES", "64")
    out, after = run(FORK_BOMB, "print('after')", timeout=60)
    assert out == "the kernel still answers\n" and after == "after\n"
    stats = managers[0]._cgroup.stats()
    assert stats.pids_limit == 64 + cgroup.BWRAP_TASKS
    assert stats.pids_peak is None or stats.pids_peak <= stats.pids_limit
    assert not any(path.exists() for path in managers[0]._cgroup.paths) and not _leftover_cgroups()
