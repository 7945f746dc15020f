"""A classmate's grading time beside a hostile notebook: per-notebook cgroups vs per-process limits.

    python benchmarks/bench_neighbours.py [--repeats 3] [--memory 2G] [--processes 256]
                                          [--hostile fork-bomb cpu-burner memory-hog]
                                          [--modes cgroup per-process] [--per-process-fork-bomb]
                                          [--ramp 3] [--weight N]

An honest tiny notebook is executed by ``SandboxedExecute`` (kernel start included, as in
grading) alone, and right after while a hostile notebook runs in its own sandbox in a
parallel grader process: a fork bomb, a CPU burner in 3 processes, or a memory hog (3 children each holding
half the memory limit and reallocating it). In ``cgroup`` mode each sandbox has its cgroup
(course_grader.sandbox.cgroup); in ``per-process`` mode (``COURSE_SANDBOX_CGROUP=off``) only
today's rlimits apply. The hostile notebook starts first; the honest one starts once the
hostile cell runs plus ``--ramp`` seconds, and the hostile one is stopped when it is done.
Modes and cases alternate within each repeat; the slow-down is the median ratio of each
run beside a neighbour to the run alone just before it. The per-process fork bomb is left out
unless asked for: 256 busy processes saturate a shared machine for minutes. ``--weight N``
runs the whole benchmark in a v1 cpu cgroup weighing N ordinary processes, so that other
work on a shared machine crowds it less (as on a machine that only grades).

Writes benchmarks/results/neighbours.md (``BENCH_RESULTS`` sets another folder). On a shared
machine the timings are noisy: the load average before the run is printed with the table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

HONEST = [
    "import json, math",
    "total = 0.0\nfor i in range(1_500_000):\n    total += math.sqrt(i)\nprint(round(total))",
    "print(json.dumps({'ok': True}))",
]

HOSTILE = {
    # not hostile: what every neighbour in parallel grading is, a notebook computing on one core;
    # the other rows are read against it (a hostile neighbour must cost no more than an honest one)
    "honest-busy": r'''
total = 0
while True:
    total += 1
''',
    "fork-bomb": r'''
import os, time
if os.fork() == 0:
    while True:
        try:
            os.fork()
        except OSError:
            pass
time.sleep(3600)
''',
    "cpu-burner": r'''
import os, time
for _ in range(3):
    if os.fork() == 0:
        while True:
            pass
time.sleep(3600)
''',
    "memory-hog": r'''
import os, time
size = {half}
for _ in range(3):
    if os.fork() == 0:
        try:
            while True:
                block = bytearray(b"\1") * size   # half the limit, touched; freed and taken again
                del block
        finally:
            os._exit(0)
time.sleep(3600)
''',
}

MODES = {"cgroup": None, "per-process": "off"}  # COURSE_SANDBOX_CGROUP


def _notebook(*sources: str):
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "attention-course", "display_name": "Python 3 (attention-course)",
                                 "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(source) for source in sources]
    return nb


def _set_mode(mode: str) -> None:
    from course_grader.sandbox import cgroup

    if MODES[mode] is None:
        os.environ.pop("COURSE_SANDBOX_CGROUP", None)
    else:
        os.environ["COURSE_SANDBOX_CGROUP"] = MODES[mode]
    cgroup.detect.cache_clear()


# ---------------------------------------------------------------- the hostile grader (a subprocess)


def neighbour(kind: str, half: int) -> int:
    """Grade the hostile notebook until stdin closes; print one JSON line saying how it ended."""
    from course_grader.sandbox.bubblewrap import SandboxedExecute

    stopped = threading.Event()
    started = time.perf_counter()

    def announce(**_: object) -> None:
        print("running", flush=True)

    execute = SandboxedExecute(timeout=3600, on_cell_execute=announce)

    def stop_on_eof() -> None:
        sys.stdin.read()
        stopped.set()
        km = getattr(execute, "_sandbox_km", None)
        if km is not None:
            km._kill_sandbox()

    threading.Thread(target=stop_on_eof, daemon=True).start()
    try:
        execute.preprocess(_notebook(HOSTILE[kind].replace("{half}", str(half))), {"nbgrader": {"notebook": kind}})
        outcome = "ran to the end"
    except Exception as error:  # noqa: BLE001 - the point is how it ended
        reason = str(error).splitlines()[0].removeprefix("Kernel died: ").split(" (")[0]
        outcome = "stopped when the classmate was done" if stopped.is_set() else f"stopped by its limits: {reason}"
    print(json.dumps({"seconds": time.perf_counter() - started, "outcome": outcome}), flush=True)
    return 0


# ---------------------------------------------------------------- the honest classmate


def honest_seconds() -> float:
    from course_grader.sandbox.bubblewrap import SandboxedExecute

    nb = _notebook(*HONEST)
    started = time.perf_counter()
    SandboxedExecute(timeout=600).preprocess(nb, {"nbgrader": {"notebook": "honest"}})
    seconds = time.perf_counter() - started
    assert "'ok': True" in str(nb.cells[-1].outputs) or '"ok": true' in str(nb.cells[-1].outputs), nb.cells[-1].outputs
    return seconds


def beside(kind: str, half: int, ramp: float) -> tuple[float, dict]:
    """The honest notebook's seconds while ``kind`` runs in a parallel grader; how the hostile one ended."""
    process = subprocess.Popen([sys.executable, __file__, "--neighbour", kind, "--half", str(half)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdin is not None
    line = process.stdout.readline()
    if line.strip() != "running":
        process.stdin.close()
        raise RuntimeError(f"the hostile notebook did not start: {line!r}")
    time.sleep(ramp)
    try:
        seconds = honest_seconds()
    finally:
        process.stdin.close()
    ending = json.loads(process.stdout.read().strip().splitlines()[-1])
    process.wait(timeout=120)
    return seconds, ending


def isolate(weight: int) -> Callable[[], None]:
    """Move this process (and all it starts) into a cpu cgroup weighing ``weight`` ordinary ones
    (v1); return the undo. Simulates a grading machine that other work does not crowd."""
    from course_grader.sandbox import cgroup

    support = cgroup.detect()
    if support.version != 1 or "cpu" not in support.bases:
        raise SystemExit(f"--weight needs a writable v1 cpu controller: {cgroup.cgroup_status()}")
    base = support.bases["cpu"]
    group = base / f"course-bench-{os.getpid()}"
    group.mkdir()
    (group / "cpu.shares").write_text(str(1024 * weight))
    (group / "cgroup.procs").write_text(str(os.getpid()))
    cgroup.detect.cache_clear()  # the sandboxes' cpu cgroups now nest under it

    def undo() -> None:
        (base / "cgroup.procs").write_text(str(os.getpid()))
        group.rmdir()
        cgroup.detect.cache_clear()

    return undo


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--memory", default="2G", help="COURSE_SANDBOX_MEMORY of both notebooks (the hog holds 1.5x)")
    parser.add_argument("--processes", type=int, default=256, help="COURSE_SANDBOX_PROCESSES")
    parser.add_argument("--hostile", nargs="+", choices=list(HOSTILE), default=list(HOSTILE))
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    parser.add_argument("--per-process-fork-bomb", action="store_true")
    parser.add_argument("--ramp", type=float, default=3.0, help="seconds between the hostile cell starting and the honest one")
    parser.add_argument("--weight", type=int, default=0,
                        help="run everything in a cpu cgroup weighing this many ordinary processes (v1; 0: no)")
    parser.add_argument("--neighbour", choices=list(HOSTILE), help=argparse.SUPPRESS)
    parser.add_argument("--half", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("COURSE_PROFILE", "ci")
    os.environ.pop("COURSE_SANDBOX", None)
    if args.neighbour:
        return neighbour(args.neighbour, args.half)

    from course_grader.sandbox.cgroup import cgroup_status
    from course_grader.sandbox.bubblewrap import _parse_size

    os.environ["COURSE_SANDBOX_MEMORY"] = args.memory
    os.environ["COURSE_SANDBOX_PROCESSES"] = str(args.processes)
    half = _parse_size(args.memory) // 2
    status = cgroup_status()
    if "cgroup" in args.modes and status.startswith("no cgroups"):
        print(f"cgroup mode needs cgroups: {status}", file=sys.stderr)
        return 1
    cases = {mode: [k for k in args.hostile
                    if not (k == "fork-bomb" and mode == "per-process" and not args.per_process_fork_bomb)]
             for mode in args.modes}
    alone: dict[tuple[str, str], list[float]] = {}
    times: dict[tuple[str, str], list[float]] = {}
    endings: dict[tuple[str, str], list[str]] = {}
    load_before = os.getloadavg()
    undo = isolate(args.weight) if args.weight else (lambda: None)
    _set_mode(args.modes[0])
    honest_seconds()  # warm the page cache and matplotlib's font cache once
    for repeat in range(args.repeats):
        for mode in args.modes if repeat % 2 == 0 else args.modes[::-1]:
            _set_mode(mode)
            for kind in cases[mode]:  # each time beside a neighbour paired with a time alone just before
                alone.setdefault((mode, kind), []).append(honest_seconds())
                seconds, ending = beside(kind, half, args.ramp)
                times.setdefault((mode, kind), []).append(seconds)
                endings.setdefault((mode, kind), []).append(ending["outcome"].split(" (sandbox limits")[0])
                print(f"{mode:12s} {kind:11s} alone {alone[(mode, kind)][-1]:6.2f} s, beside {seconds:6.2f} s  "
                      f"{ending['outcome'][:100]}", flush=True)
    undo()

    rows = ["| limits | neighbour | honest alone, median (s) | beside it, median (s) | beside it, runs (s) | "
            "slow-down (median of pairs) | beyond an honest busy neighbour | how the neighbour ended |",
            "|---|---|---|---|---|---|---|---|"]
    for mode in args.modes:
        for kind in cases[mode]:
            values, before = times[(mode, kind)], alone[(mode, kind)]
            ratio = statistics.median(b / a for a, b in zip(before, values))
            how = "; ".join(sorted(set(endings[(mode, kind)])))
            honest = times.get((mode, "honest-busy"))
            versus = (f"**{statistics.median(values) / statistics.median(honest) - 1:+.0%}**"
                      if honest and kind != "honest-busy" else "")
            rows.append(f"| {mode} | {kind} | {statistics.median(before):.2f} | {statistics.median(values):.2f} | "
                        f"{', '.join(f'{v:.1f}' for v in values)} | {ratio - 1:+.0%} | {versus} | {how} |")
    skipped = [m for m in args.modes if "fork-bomb" in args.hostile and "fork-bomb" not in cases[m]]
    body = "\n".join([
        f"Command: `python benchmarks/bench_neighbours.py {' '.join(sys.argv[1:])}`".rstrip(),
        "",
        f"Honest tiny notebook (3 cells, ~1 s of Python) executed by `SandboxedExecute`, kernel start included: "
        f"alone, then beside a hostile notebook graded in parallel (another process, its own sandbox). "
        f"Limits: memory {args.memory}, {args.processes} processes. cgroups here: {status}.",
        f"Load average (1 min) before the run: {load_before[0]:.2f} (shared machine: other work ran too"
        + (f"; the whole benchmark ran in a cpu cgroup weighing {args.weight} ordinary processes, "
           "to shield it from that work" if args.weight else "") + "). "
        f"{args.repeats} pairs per row, each a run alone just before a run beside the neighbour (the machine's "
        "load drifts); the slow-down is the median of the pairs' ratios.",
        "",
        *rows,
        "",
        *([f"Not run: the fork bomb with per-process limits only ({args.processes} busy processes saturate a shared "
           "machine; `--per-process-fork-bomb` runs it)."] if skipped else []),
    ])
    from _common import write_result

    path = write_result("neighbours", "A classmate's grading time beside a hostile notebook", body, threads=False)
    print(path.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
