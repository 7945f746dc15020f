"""Grading throughput: serial nbgrader vs `course grade` on every core, with and without the sandbox.

    python benchmarks/bench_grading.py [--students 20] [--assignment 00_welcome] [--workers N]
                                       [--sandbox-repeats 5]

Builds a generated class (solutions, blank releases and curated mistakes in turn), grades
it serially (one `nbgrader autograde`, as nbgrader does by default) with each kernel in the
bubblewrap sandbox, serially again without it (`COURSE_SANDBOX=off`), and in parallel
(`course_grader.grading.parallel`, sandboxed); checks that all give the same grades. The
sandbox's cost per notebook is also measured directly: the assignment's solution notebook
executed by `SandboxedExecute` in one process, sandbox on and off alternately, median of
`--sandbox-repeats` runs each. Writes a Markdown table to benchmarks/results/grading.md with
the machine it ran on. Timings on a shared machine are noisy; the ratios measured in the
same run are the numbers to read.

On Dask (`--part dask`, or `all`; needs the `dask` extra): the same class graded by the local
parallel path (2 workers) and by `course grade --scheduler` on a LocalCluster of 2 and of 1
single-threaded workers (cluster start-up not counted): the Dask path's time against the local
one's (target <= 1.1x), throughput, and the client's recording cost per batch and per submission
(its Gradebook API recorder, and nbgrader's autograde with Execute off for comparison). Then a
simulated class of 1,000 students x 13 notebooks: tasks that sleep each notebook's grading time
(its measured `ci` execution time from results/notebooks-cpu.md plus the grading cost measured
here, +-20% per student), scaled down to about `--sim-seconds` of wall time, scheduled by Dask's
scheduler (longest first, as `course grade` does) on 8, 32 and 128 task slots (in-process workers,
16 at most, of 1-8 threads), with the
client recording results as `course grade` does (its measured cost, scaled alike); the wall time
scaled back is the hours that class takes. `--part dask` keeps the local table of the file and
rewrites only its Dask section. `--quick`: 6 students, 1 sandbox repeat, 30 s per simulation.

The targets (`--part targets`, and at the end of `--part dask`): a class of 1,000 students x 13
notebooks on 32 workers in under 1 h, and a MOOC of 10,000 x 13 on 128 in under 2 h. Each is
computed by a discrete-event model of what `course grade --scheduler` does (tasks of each
notebook's seconds, +-20% per student, longest notebook first on the first free worker; the
client recording results in batches of 20, serially, as they arrive) and, for the class, also
by the Dask simulation above; with the mean seconds per notebook and per recorded submission each
target allows. `--part targets` measures nothing: it reads the per-notebook seconds and the
recording cost from the Dask section of `--out` (as the last `--part dask` measured them) and
rewrites only the targets section.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from course_grader.course import Course  # noqa: E402
from course_grader.demo import demo_students, write_submissions  # noqa: E402
from course_grader.grading.scores import autograde, read_scores  # noqa: E402
from course_grader.authoring.mistakes import load_mistakes  # noqa: E402
from course_grader.grading.parallel import autograde_parallel, default_workers  # noqa: E402
from course_grader.authoring.release import generate_release, prepare_scratch_course  # noqa: E402


def build_class(course: Path, assignment: str, n_students: int) -> None:
    prepare_scratch_course(ROOT, course, [assignment])
    generate_release(Course.open(course), [assignment], verbose=False)
    pattern = demo_students(load_mistakes(ROOT, assignment), isolated=True)
    students = []
    for index in range(n_students):
        template = pattern[index % len(pattern)]
        students.append(type(template)(f"s{index:03d}-{template.kind}", template.kind, template.mistakes))
    write_submissions(Course.open(course), assignment, students)


def notebook_seconds(course: Path, assignment: str, repeats: int) -> dict[str, float]:
    """Median seconds to execute the solution notebook with the sandbox ``on`` and ``off``."""
    import nbformat

    from course_grader.sandbox.execute import SandboxedExecute

    source = nbformat.read(course / "solutions" / assignment / f"{assignment}.ipynb", as_version=4)
    times: dict[str, list[float]] = {"on": [], "off": []}
    previous = os.environ.get("COURSE_SANDBOX")
    try:
        for _ in range(repeats):
            for mode in ("on", "off"):  # alternate, so load on a shared machine hits both alike
                os.environ["COURSE_SANDBOX"] = mode
                nb = nbformat.from_dict(source)
                started = time.perf_counter()
                SandboxedExecute(timeout=600).preprocess(nb, {"nbgrader": {"notebook": assignment}})
                times[mode].append(time.perf_counter() - started)
    finally:
        if previous is None:
            os.environ.pop("COURSE_SANDBOX", None)
        else:
            os.environ["COURSE_SANDBOX"] = previous
    return {mode: statistics.median(values) for mode, values in times.items()}


def grades(course: Path) -> dict[tuple[str, str], float]:
    return {(r.student, gid): c.score for r in read_scores(Course.open(course)) for gid, c in r.cells.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=20)
    parser.add_argument("--assignment", default="00_welcome")
    parser.add_argument("--workers", type=int, default=default_workers())
    parser.add_argument("--sandbox-repeats", type=int, default=5)
    parser.add_argument("--out", type=Path,   # BENCH_RESULTS moves every benchmark's results, this one's too
                        default=Path(os.environ.get("BENCH_RESULTS", ROOT / "benchmarks" / "results")) / "grading.md")
    parser.add_argument("--part", choices=("local", "dask", "all", "targets", "ratio", "tasks"), default="all")
    parser.add_argument("--assignments", nargs="*", default=None,
                        help="--part ratio / tasks: the notebooks to time (default: every assignment)")
    parser.add_argument("--task-students", type=int, default=4,
                        help="--part tasks: solution submissions per notebook graded on the Dask cluster")
    parser.add_argument("--ratio-repeats", type=int, default=3, help="--part ratio: interleaved rounds")
    parser.add_argument("--ratio-workers", type=int, default=1,
                        help="--part ratio: also grade the class with --workers N, against N bare executions at once")
    parser.add_argument("--ratio-class", type=int, default=2,
                        help="--part ratio: also grade a class of N solution submissions in one command (the cost of each notebook after the first)")
    parser.add_argument("--sim-students", type=int, default=1000)
    parser.add_argument("--sim-seconds", type=float, default=120.0, help="wall time of each simulated run (scaled)")
    parser.add_argument("--quick", action="store_true", help="6 students, 1 sandbox repeat, 30 s simulations")
    args = parser.parse_args()
    if args.quick:
        args.students, args.sandbox_repeats, args.sim_seconds = min(args.students, 6), 1, 30.0
    os.environ.setdefault("COURSE_PROFILE", "ci")
    os.environ.pop("COURSE_SANDBOX", None)  # sandboxed unless a row says otherwise
    same = True
    if args.part in ("local", "all"):
        same = local_part(args)
    if args.part in ("dask", "all"):
        same = dask_part(args) and same
    if args.part == "targets":
        targets_part(args)
    if args.part == "ratio":
        ratio_part(args)
    if args.part == "tasks":
        tasks_part(args)
    return 0 if same else 1


def local_part(args: argparse.Namespace) -> bool:

    with tempfile.TemporaryDirectory(prefix="bench-grading-") as scratch:
        serial_dir, parallel_dir = Path(scratch) / "serial", Path(scratch) / "parallel"
        open_dir = Path(scratch) / "unsandboxed"
        build_class(serial_dir, args.assignment, args.students)
        shutil.copytree(serial_dir, parallel_dir)
        shutil.copytree(serial_dir, open_dir)

        per_notebook = notebook_seconds(serial_dir, args.assignment, args.sandbox_repeats)
        started = time.perf_counter()
        serial_run = autograde(Course.open(serial_dir), args.assignment)
        serial_s = time.perf_counter() - started
        os.environ["COURSE_SANDBOX"] = "off"
        started = time.perf_counter()
        open_run = autograde(Course.open(open_dir), args.assignment)
        open_s = time.perf_counter() - started
        os.environ.pop("COURSE_SANDBOX")
        started = time.perf_counter()
        parallel_run = autograde_parallel(Course.open(parallel_dir), args.assignment, workers=args.workers)
        parallel_s = time.perf_counter() - started
        same = grades(serial_dir) == grades(parallel_dir) == grades(open_dir)

    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}"
    table = "\n".join([
        f"# Grading throughput ({time.strftime('%Y-%m-%d')})",
        "",
        f"Machine: {machine}. Class: {args.students} generated students on `{args.assignment}`, `ci` profile.",
        "",
        "| mode | sandbox | workers | wall time (s) | s / student | speed-up | failed |",
        "|---|---|---|---|---|---|---|",
        f"| serial `nbgrader autograde` | off | 1 | {open_s:.1f} | {open_s / args.students:.2f} | "
        f"{open_s / serial_s:.2f}x | {len(open_run.failed)} |",
        f"| serial `nbgrader autograde` | on | 1 | {serial_s:.1f} | {serial_s / args.students:.2f} | 1.00x | "
        f"{len(serial_run.failed)} |",
        f"| `course grade` (parallel) | on | {args.workers} | {parallel_s:.1f} | {parallel_s / args.students:.2f} | "
        f"{serial_s / parallel_s:.2f}x | {len(parallel_run.failed)} |",
        "",
        f"Sandbox cost, whole class graded serially: {serial_s / open_s - 1:+.1%}.",
        f"Sandbox cost per notebook (`{args.assignment}` solution executed by `SandboxedExecute`, sandbox on/off "
        f"alternately, median of {args.sandbox_repeats}): {per_notebook['on']:.2f} s vs {per_notebook['off']:.2f} s, "
        f"**{per_notebook['on'] / per_notebook['off'] - 1:+.1%}**.",
        "",
        f"Grades identical between the three runs: **{'yes' if same else 'NO'}**.",
        "",
    ])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    old = args.out.read_text() if args.out.is_file() else ""
    args.out.write_text(table + (old[old.index(DASK_HEADER):] if DASK_HEADER in old else ""))
    print(table)
    return same



# ----------------------------------------------------------------------------- on Dask

DASK_HEADER = "## On a Dask cluster"
NOTEBOOK_TIMES = ROOT / "benchmarks" / "results" / "notebooks-cpu.md"


def _machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}"


def _journal_seconds(course: Path, assignment: str) -> list[float]:
    from course_grader.grading.dask_grading import journal_path

    path = journal_path(Course.open(course), assignment)
    return [json.loads(line)["seconds"] for line in path.read_text().splitlines()] if path.is_file() else []


def recording_cost(fresh: Path, graded: Path, assignment: str, students: list[str]) -> dict[str, tuple[float, float]]:
    """Seconds the client takes to record a batch, as ``(fixed, per submission)``, by nbgrader
    (``parallel.record_executed``: its autograde with Execute off, in a process of its own: the
    client's path before) and by ``recording.record_executed_notebooks`` (the Gradebook API in
    the client: its path now): the executed notebooks of ``graded`` recorded into copies of
    ``fresh``, in a batch of one and a batch of all, each way alternately."""
    from course_grader.grading.parallel import record_executed
    from course_grader.grading.recording import read_tree, record_executed_notebooks

    executed = {s: read_tree(graded / "autograded" / s / assignment) for s in students}
    seconds: dict[str, dict[int, float]] = {"nbgrader": {}, "gradebook": {}}
    with tempfile.TemporaryDirectory(prefix="bench-record-") as scratch:
        staging = Path(scratch) / "staging"
        for student in students:
            shutil.copytree(graded / "autograded" / student / assignment, staging / student / assignment)
        for k in (1, len(students)):
            for way in seconds:
                course = Path(scratch) / f"{way}{k}"
                shutil.copytree(fresh, course)
                batch = students[:k]
                started = time.perf_counter()
                if way == "nbgrader":
                    one = Path(scratch) / f"staging{k}"
                    for student in batch:
                        shutil.copytree(staging / student, one / student)
                    record_executed(Course.open(course), assignment, one)
                else:
                    record_executed_notebooks(Course.open(course), assignment, {s: executed[s] for s in batch})
                seconds[way][k] = time.perf_counter() - started
    n = len(students)
    costs = {}
    for way, by_k in seconds.items():
        per = max((by_k[n] - by_k[1]) / (n - 1), 0.0) if n > 1 else by_k[1]
        costs[way] = (max(by_k[1] - per, 0.0), per)
    return costs


def notebook_durations(graded_s: float, assignment: str) -> tuple[dict[str, float], list[str], float]:
    """Seconds to grade each notebook: its measured ci execution time (results/notebooks-cpu.md)
    plus grading's own cost, measured here (``graded_s`` of ``assignment`` minus its execution
    time, returned third). Notebooks not in that table get the median of the others (listed second)."""
    from course_utils.layout import assignments

    executed: dict[str, float] = {}
    for line in NOTEBOOK_TIMES.read_text().splitlines() if NOTEBOOK_TIMES.is_file() else []:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and re.fullmatch(r"\d\d_\w+", cells[0]) and re.fullmatch(r"[\d.]+", cells[1]):
            executed.setdefault(cells[0], float(cells[1]))
    overhead = max(graded_s - executed.get(assignment, graded_s), 0.0)
    names = assignments(ROOT)
    fallback = statistics.median(executed.values()) if executed else graded_s
    guessed = [n for n in names if n not in executed]
    return {n: executed.get(n, fallback) + overhead for n in names}, guessed, overhead


def simulate(durations: dict[str, float], students: int, workers: int, record: tuple[float, float],
             target_s: float, batch: int = 20) -> dict[str, float]:
    """Hours to grade ``students`` x notebooks on ``workers``: Dask's scheduler runs tasks that
    sleep each (student, notebook)'s duration scaled to about ``target_s`` of wall time, longest
    notebooks first, while this client "records" as `course grade` does (``record``: fixed and
    per-submission seconds per batch, scaled alike)."""
    import random

    import dask
    from distributed import Client, LocalCluster, as_completed

    jitter = random.Random(0)
    work = {name: [d * jitter.uniform(0.8, 1.2) for _ in range(students)] for name, d in durations.items()}
    total = sum(sum(v) for v in work.values())
    fixed, per = record
    recording = students * len(durations) * per  # the client's serial part, at the least
    scale = target_s / max(total / workers, recording)
    processes = min(workers, 16)  # simulated worker processes, each with workers/processes task slots
    with dask.config.set({"distributed.comm.timeouts.connect": "180s"}), \
            LocalCluster(n_workers=processes, threads_per_worker=workers // processes, processes=False,
                         dashboard_address=None) as cluster, Client(cluster) as client:
        started = time.perf_counter()
        futures = []
        for name in sorted(durations, key=lambda name: durations[name], reverse=True):
            futures += client.map(time.sleep, [d * scale for d in work[name]], pure=False,
                                  key=[f"sim-{name}-{i}" for i in range(students)], priority=round(durations[name] * 1000))
        pending = 0
        for finished in as_completed(futures).batches():
            pending += len(finished)
            if pending >= batch:
                time.sleep((fixed + per * pending) * scale)
                pending = 0
        time.sleep((fixed + per * pending) * scale if pending else 0)
        wall = time.perf_counter() - started
    return {"hours": wall / scale / 3600, "bound": total / workers / 3600,
            "recording": recording / 3600}


TARGETS_HEADER = "## The targets: 1,000 x 13 on 32 workers < 1 h, 10,000 x 13 on 128 < 2 h"
TARGETS = ((1000, 32, 1.0), (10_000, 128, 2.0))  # students, workers, hours (issue 39)
ISSUE_NOTEBOOKS = 13  # the targets' "x 13": the course's notebooks 00-12 when the issue was written


def model(durations: dict[str, float], students: int, workers: int, record: tuple[float, float],
          batch: int = 20, batch_seconds: float = 30.0) -> dict[str, float]:
    """Hours to grade ``students`` x notebooks on ``workers``, by a discrete-event model of
    ``grade_on_dask``: each (student, notebook) takes its notebook's seconds +-20% (the jitter of
    :func:`simulate`), tasks start longest notebook first (Dask's ``priority``; submission order
    within a notebook) on the first free worker; the client takes every result finished meanwhile
    and records them serially, ``batch`` at a time (``record``: fixed + per-submission seconds),
    and what is left once ``batch_seconds`` have passed. No per-task cost of Dask's own."""
    import heapq
    import random

    jitter = random.Random(0)
    work = {name: [d * jitter.uniform(0.8, 1.2) for _ in range(students)] for name, d in durations.items()}
    order = [t for name in sorted(durations, key=lambda name: durations[name], reverse=True) for t in work[name]]
    free = [0.0] * workers
    finished = []
    for seconds in order:
        start = heapq.heappop(free)
        heapq.heappush(free, start + seconds)
        finished.append(start + seconds)
    finished.sort()
    fixed, per = record
    clock = last = 0.0
    pending = i = 0
    while i < len(finished):
        clock = max(clock, finished[i])  # as_completed: the next result, and every one finished meanwhile
        while i < len(finished) and finished[i] <= clock:
            pending, i = pending + 1, i + 1
        while pending >= batch or (pending and clock - last >= batch_seconds):
            k = min(pending, batch)
            clock += fixed + per * k
            pending, last = pending - k, clock
    clock += fixed + per * pending if pending else 0.0  # the last, partial, batch
    total = sum(order)
    return {"hours": clock / 3600, "bound": total / workers / 3600, "recording": per * len(order) / 3600,
            "mean": total / len(order)}


def targets_section(durations: dict[str, float], record: tuple[float, float], source: str,
                    simulated: dict[int, dict[str, float]] | None = None) -> str:
    """The targets against ``durations`` (seconds per notebook) and ``record`` (the client's
    recording cost): the model's hours, the work-per-worker bound, the client's serial recording,
    and the mean seconds per notebook and per recorded submission each target allows."""
    from course_utils.layout import assignments

    n = len(durations)
    unmeasured = [name for name in assignments(ROOT) if name not in durations]
    rows = []
    # the whole course as measured, and (when it has more) the 13 notebooks the issue's targets count
    sets = [durations] + ([dict(list(durations.items())[:ISSUE_NOTEBOOKS])] if n > ISSUE_NOTEBOOKS else [])
    for notebooks in sets:
        mean = statistics.fmean(notebooks.values())
        for students, workers, hours in TARGETS:
            m = model(notebooks, students, workers, record)
            tasks = students * len(notebooks)
            sim = (simulated or {}).get(students) if notebooks is durations else None
            met = m["hours"] < hours and (sim is None or sim["hours"] < hours)
            rows.append(
                f"| {students:,} x {len(notebooks)} on {workers} | < {hours:g} | **{m['hours']:.2f}**"
                + (f" (Dask: {sim['hours']:.2f}, {sim['bound'] / sim['hours']:.0%} of the bound)" if sim else "")
                + f" | {'yes' if met else '**no**'} | "
                f"{m['bound']:.2f} | {m['recording']:.2f} | {mean:.1f} s -> {hours * 3600 * workers / tasks:.1f} s | "
                f"{record[1]:.3f} s -> {hours * 3600 / tasks:.3f} s |")
    return "\n".join([
        TARGETS_HEADER,
        "",
        source,
        "",
        "| class | target (h) | hours: model (and Dask's scheduler, simulated) | met | lower bound: work / workers (h) | "
        "client recording alone, serial (h) | mean s per notebook: now -> allowed | recording s per submission: "
        "now -> allowed |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        "The model: each (student, notebook) task takes its notebook's seconds +-20%, longest notebook first on the "
        "first free worker; the client records results serially in batches of 20 as they arrive (`grade_on_dask`'s "
        "loop), so the hours are at least the larger of the two bounds. *Allowed*: the mean seconds per notebook that "
        "fill the target on that many workers with no idle time (the next cut must reach below it: the model "
        "reaches 99 % of the work bound; Dask's scheduler, simulated, less, as its own per-task cost on this shared "
        "machine is not scaled down with the sleeping tasks: an upper estimate, 80-96 % of the bound in runs so far), and the recording cost per submission that fills it on the client alone "
        "(recording is serial in one client whatever the workers: it must fall well below that, or be shared)."
        + (f" The rows x {ISSUE_NOTEBOOKS} take the first {ISSUE_NOTEBOOKS} notebooks (00-12), as the targets were "
           f"set; the rows x {n} the whole course." if n > ISSUE_NOTEBOOKS else ""),
        *(["", f"The course now has {n + len(unmeasured)} notebooks ({', '.join(unmeasured)} not in the measured "
            f"costs): at the same mean per notebook, its hours are {(n + len(unmeasured)) / n:.2f}x those above."]
          if unmeasured else []),
        "",
    ])


def measured_costs(path: Path) -> tuple[dict[str, float], tuple[float, float]]:
    """The seconds per notebook and the client's recording cost (Gradebook API) that the last
    ``--part dask`` wrote in ``path``."""
    text = path.read_text()
    if TASKS_LINE in text:  # measured per notebook by --part tasks
        line = next(ln for ln in text.splitlines() if ln.startswith(TASKS_LINE))
        durations = {name: float(v) for name, v in re.findall(r"\b(\d\d_\w+) ([\d.]+)", line.split(";")[0])}
        cost = re.search(r"recording ([\d.]+) s per submission", line)
        if durations and cost:
            return durations, (0.0, float(cost[1]))
    line = next(ln for ln in text.splitlines() if ln.startswith("Seconds per notebook:"))
    names = {name[:2]: name for name in __import__("course_utils.layout", fromlist=["assignments"]).assignments(ROOT)}
    listed = line.split("here): ", 1)[1] if "here): " in line else line.split(": ", 1)[1]
    durations = {names.get(k, k): float(v) for k, v in re.findall(r"\b(\d\d) ([\d.]+)", listed.split(" (")[0])}
    cost = re.search(r"\*\*([\d.]+) s per batch \+ ([\d.]+) s per submission\*\*", text)
    if not durations or cost is None:
        raise SystemExit(f"{path}: no per-notebook seconds or recording cost (run --part dask first)")
    return durations, (float(cost[1]), float(cost[2]))


TASKS_HEADER = "## Seconds per graded notebook on a one-thread Dask worker"
TASKS_LINE = "Seconds per task (median):"


def tasks_part(args: argparse.Namespace) -> None:
    """Issue 39, item 2, measured rather than added up: every notebook's class of ``--task-students``
    solution submissions graded at once by `course grade --scheduler`'s path (``grade_on_dask``) on a
    LocalCluster of 2 workers of one thread each (one per core); each task's seconds from the journal
    (the worker's whole task: scratch course, nbgrader's autograde with the sandboxed kernel and the
    checker, the result sent back), and the client's recording cost per submission of each notebook
    (``record_executed_notebooks`` of the class into a fresh copy of the course). The targets are then
    modelled from these numbers alone."""
    from distributed import Client, LocalCluster

    from course_grader.demo import DemoStudent
    from course_grader.grading import dask_grading
    from course_grader.grading.recording import read_tree, record_executed_notebooks
    from course_utils.layout import assignments

    names = args.assignments or assignments(ROOT)
    k = max(args.task_students, 1)
    students = [f"s{i}-solutions" for i in range(k)]
    seconds: dict[str, list[float]] = {}
    recording: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-tasks-") as scratch:
        course, fresh = Path(scratch) / "course", Path(scratch) / "fresh"
        prepare_scratch_course(ROOT, course, names)
        generate_release(Course.open(course), names, verbose=False)
        for name in names:
            write_submissions(Course.open(course), name, [DemoStudent(s, "solution") for s in students])
        shutil.copytree(course, fresh, symlinks=True)
        load_before = os.getloadavg()
        started = time.perf_counter()
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            runs = dask_grading.grade_on_dask(Course.open(course), {name: students for name in names}, client,
                                              progress=False)
        wall = time.perf_counter() - started
        failed = {run.assignment: len(run.failed) for run in runs if run.failed}
        for name in names:
            seconds[name] = _journal_seconds(course, name)
            executed = {s: read_tree(course / "autograded" / s / name) for s in students}
            copy = Path(scratch) / f"record-{name}"
            shutil.copytree(fresh, copy, symlinks=True)
            begun = time.perf_counter()
            record_executed_notebooks(Course.open(copy), name, executed)
            recording[name] = (time.perf_counter() - begun) / k
            shutil.rmtree(copy)
    load = os.getloadavg()
    durations = {name: statistics.median(values) for name, values in seconds.items() if values}
    record = statistics.fmean(recording.values())
    line = (f"{TASKS_LINE} " + ", ".join(f"{name} {durations[name]:.1f}" for name in durations)
            + f"; recording {record:.3f} s per submission (the mean over the notebooks)")
    rows = [f"| {name} | {durations[name]:.1f} | {min(seconds[name]):.1f}-{max(seconds[name]):.1f} | "
            f"{len(seconds[name])} | {recording[name]:.3f} |" for name in durations]
    section = "\n".join([
        TASKS_HEADER, "",
        f"Command: `python benchmarks/bench_grading.py {' '.join(sys.argv[1:])}` on {_machine()}; load "
        f"{load_before[0]:.1f} at the start, {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f} (1/5/15 min) at the end. "
        f"Every notebook's class of {k} solution submissions graded at once by `grade_on_dask` (the path of "
        "`course grade --scheduler`) on a LocalCluster of 2 workers of one thread each, sandbox on, `ci` profile: "
        f"{len(durations) * k} tasks in {wall:.0f} s of wall time (cluster start included)"
        + (f"; failed: {failed}" if failed else ", none failed") + ". *Task*: the worker's seconds for one "
        "submission as its journal records them (scratch course, nbgrader's autograde with the sandboxed kernel "
        "and the checker, the result sent back). *Recording*: the client's `record_executed_notebooks` of the "
        f"class's {k} executed notebooks into a fresh copy of the course, per submission.", "",
        "| notebook | task (s), median | min-max | tasks | recording (s per submission) |",
        "|---|---:|---|---:|---:|",
        *rows, "",
        line, "",
    ])
    text = args.out.read_text() if args.out.exists() else ""
    text = _replace_section(text, TASKS_HEADER, section)
    source = (f"From the section above (`--part tasks`): each notebook's median seconds per task on a one-thread "
              f"Dask worker, the recording cost per submission the mean over the notebooks ({record:.3f} s).")
    targets = targets_section(durations, (0.0, record), source)
    text = _replace_section(text, TARGETS_HEADER, targets)
    args.out.write_text(text)
    print(section)
    print(targets)


RATIO_HEADER = "## A graded notebook against its bare execution"


def ratio_part(args: argparse.Namespace) -> None:
    """Issue 39, item 1: per notebook, `course execute` (the solution, ci profile, no sandbox: what a
    student's run costs) against `course grade` of one solution submission (sandbox, checker,
    nbgrader, scan, similarity, views, recording), the two commands interleaved, median of rounds."""
    import subprocess

    from course_grader.demo import DemoStudent
    from course_utils.layout import assignments

    names = args.assignments or assignments(ROOT)
    course_bin = str(Path(sys.executable).with_name("course"))
    times: dict[str, dict[str, list[float]]] = {n: {"execute": [], "grade": [], "class": [], "executes": [],
                                                     "workers": []} for n in names}
    workers = max(args.ratio_workers, 1)
    # where the graded run's execute step spent its time (the autograded notebook's course_grade.seconds)
    parts: dict[str, dict[str, list[float]]] = {n: {} for n in names}
    with tempfile.TemporaryDirectory(prefix="bench-ratio-") as scratch:
        course, klass = Path(scratch) / "course", Path(scratch) / "class"
        class_size = max(args.ratio_class, 1)
        scratch_courses = [(course, 1)] + ([(klass, class_size)] if class_size > 1 else [])  # one submission; a class
        for folder, size in scratch_courses:
            prepare_scratch_course(ROOT, folder, names)
            generate_release(Course.open(folder), names, verbose=False)
            for name in names:
                write_submissions(Course.open(folder), name, [DemoStudent(f"s{i}-solutions", "solution") for i in range(size)])

        def timed(*command: str, where: Path = course, at_once: int = 1) -> float:
            """Seconds until ``at_once`` copies of `course COMMAND` (each in a scratch course of its own) all end."""
            started = time.perf_counter()
            places = [where] + [Path(scratch) / f"copy{i}" for i in range(1, at_once)]
            for place in places[1:]:
                if not place.exists():
                    shutil.copytree(where, place, symlinks=True)
            running = [subprocess.Popen([course_bin, *command], cwd=place, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True) for place in places]
            for run in running:
                output = run.communicate()[0]
                if run.returncode:
                    raise SystemExit(f"course {' '.join(command)} failed:\n{output[-4000:]}")
            return time.perf_counter() - started

        for round_ in range(args.ratio_repeats):
            for name in names:  # the two alternate, so a noisy neighbour slows both alike
                times[name]["execute"].append(timed("execute", name, "--profile", "ci"))
                times[name]["grade"].append(timed("grade", name, "--workers", "1"))
                if class_size > 1:
                    times[name]["class"].append(timed("grade", name, "--workers", "1", where=klass))
                if workers > 1 and class_size > 1:  # the class on `workers` cores, against as many bare runs at once
                    times[name]["executes"].append(timed("execute", name, "--profile", "ci", at_once=workers))
                    times[name]["workers"].append(timed("grade", name, "--workers", str(workers), where=klass))
                graded = json.loads((course / "autograded" / "s0-solutions" / name / f"{name}.ipynb").read_text())
                for part, seconds in graded["metadata"].get("course_grade", {}).get("seconds", {}).items():
                    parts[name].setdefault(part, []).append(float(seconds))
                print(f"round {round_ + 1}: {name} execute {times[name]['execute'][-1]:.1f} s, "
                      f"grade {times[name]['grade'][-1]:.1f} s", flush=True)
    load = os.getloadavg()
    header = RATIO_HEADER if workers == 1 else f"{RATIO_HEADER}, a class on {workers} workers"
    lines = [header, "",
             f"Command: `python benchmarks/bench_grading.py {' '.join(sys.argv[1:])}` on {os.cpu_count()} cores "
             f"({platform.processor() or platform.machine()}), load at the end {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f} "
             f"(1/5/15 min); median of {args.ratio_repeats} interleaved rounds. Execute: `course execute NAME --profile ci` "
             "(the solution, no sandbox). Grade: `course grade NAME --workers 1` of one solution submission in a scratch "
             "course (its whole command: sandbox, kernel, checker, nbgrader, scan, similarity, views, recording). "
             "Target: grade <= 1.25x execute. The breakdown is the graded notebook's own record of its execute step "
             "(the checker's start (a fork) and the variant lookup, the sandboxed kernel's start, answer cells, test cells "
             "with the checker, the kernel's stop with its sandbox and cgroup); *outside* is the grade command's time around that step (its own start, "
             "Course.open, the submissions' inspection, nbgrader's process start and imports, the checker's fork "
             "server, recording, views). *Each further notebook*: a class of "
             f"{class_size} solution submissions graded by one `course grade NAME --workers 1`, less the one-submission "
             f"grade, over {class_size - 1}: what each notebook after the first costs when a class is graded (the command's "
             "own start, Course.open and nbgrader's process are paid once per command, not per notebook)."
             + (f" *With --workers {workers}*: the same class graded by `course grade NAME --workers {workers}`, seconds "
                f"per notebook (its time x {workers} / {class_size}: the cores' time each notebook took), against "
                f"{workers} `course execute` of it at once (their time x {workers} / {workers}), both on the {workers} cores."
                if workers > 1 else ""), "",
             "| notebook | execute (s) | grade (s) | grade / execute | target met | each further notebook (s) | "
             "further / execute | checker start | kernel start | answer cells | test cells | kernel stop | execute step | outside |"
             + (f" with --workers {workers}: per notebook (s) | {workers} executes at once: per notebook (s) | ratio |"
                if workers > 1 else ""),
             "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|---:|---:|" if workers > 1 else "")]
    for name in names:
        execute, grade = statistics.median(times[name]["execute"]), statistics.median(times[name]["grade"])
        part = {key: statistics.median(values) for key, values in parts[name].items()}
        step = part.get("execute", float("nan"))
        further = ((statistics.median(times[name]["class"]) - grade) / (class_size - 1)
                   if times[name]["class"] else float("nan"))
        lines.append(f"| {name} | {execute:.1f} | {grade:.1f} | {grade / execute:.2f} | "
                     f"{'yes' if grade <= 1.25 * execute else 'no'} | {further:.1f} | {further / execute:.2f} | "
                     + " | ".join(f"{part.get(key, float('nan')):.1f}" for key in
                                  ("checker_start", "kernel_start", "answer_cells", "test_cells", "kernel_stop"))
                     + f" | {step:.1f} | {grade - step:.1f} |"
                     + (_workers_columns(times[name], workers, class_size) if workers > 1 else ""))
    section = "\n".join(lines) + "\n"
    args.out.write_text(_replace_section(args.out.read_text() if args.out.exists() else "", header, section))
    print(section)


def _replace_section(text: str, header: str, section: str) -> str:
    """``text`` with the section under the line ``header`` (to the next ``## `` line) replaced by
    ``section``, or ``section`` appended when no line is ``header``."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.rstrip("\n") == header]
    if not starts:
        return text.rstrip("\n") + "\n\n" + section
    start = starts[0]
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return "".join(lines[:start]) + section + ("\n" if end < len(lines) else "") + "".join(lines[end:])


def _workers_columns(times: dict[str, list[float]], workers: int, class_size: int) -> str:
    """`` a | b | a / b |``: a class graded on ``workers`` cores, and ``workers`` bare runs at once, each as
    core-seconds per notebook."""
    if not times["workers"] or not times["executes"]:
        return " - | - | - |"
    graded = statistics.median(times["workers"]) * workers / class_size
    bare = statistics.median(times["executes"])
    return f" {graded:.1f} | {bare:.1f} | {graded / bare:.2f} |"


def targets_part(args: argparse.Namespace) -> None:
    durations, record = measured_costs(args.out)
    started = time.perf_counter()
    students, workers, _ = TARGETS[0]
    sim = {students: simulate(durations, students, workers, record, args.sim_seconds)}
    where = ("`--part tasks` measured (each notebook's median seconds per task on a one-thread Dask worker, the "
             "recording cost the mean over the notebooks)" if TASKS_LINE in args.out.read_text()
             else "the Dask section above measured")
    source = (f"Not measured by this run (`--part targets`): the seconds per notebook and the recording cost are those "
              f"{where} ({len(durations)} notebooks: "
              + ", ".join(f"{k[:2]} {v:.1f}" for k, v in durations.items())
              + f"; recording {record[0]:.2f} s per batch + {record[1]:.3f} s per submission). The class of "
              f"{students:,} also simulated on Dask's scheduler as above ({args.sim_seconds:g} s of wall time; "
              f"{time.perf_counter() - started:.0f} s with its start-up). Command: "
              f"`python benchmarks/bench_grading.py {' '.join(sys.argv[1:])}`.")
    section = targets_section(durations, record, source, sim)
    old = args.out.read_text()
    if TARGETS_HEADER in old:
        before, after = old.split(TARGETS_HEADER, 1)
        rest = after[after.index("\n## "):] if "\n## " in after else ""
        new = before + section + rest.lstrip("\n") if not rest else before + section + rest
    else:
        new = old.rstrip("\n") + "\n\n" + section
    args.out.write_text(new)
    print(section)


def dask_part(args: argparse.Namespace) -> bool:
    from distributed import Client, LocalCluster

    from course_grader.grading import dask_grading
    from course_grader.grading.submissions import submitted_students

    n = args.students
    times: dict[str, float] = {}
    load: dict[str, tuple[float, float]] = {}  # 1-minute load average at the start and end of each run
    starts: dict[int, float] = {}
    per_task: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-dask-") as scratch:
        base = Path(scratch) / "class"
        build_class(base, args.assignment, n)
        dirs = {name: Path(scratch) / name for name in ("local", "dask2", "dask1")}
        for folder in dirs.values():
            shutil.copytree(base, folder)
        students = submitted_students(Course.open(base), args.assignment)
        started, before = time.perf_counter(), os.getloadavg()[0]
        local_run = autograde_parallel(Course.open(dirs["local"]), args.assignment, workers=2)
        times["local"] = time.perf_counter() - started
        load["local"] = (before, os.getloadavg()[0])
        failed = {"local": len(local_run.failed)}
        for workers in (2, 1):
            started = time.perf_counter()
            with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                    Client(cluster) as client:
                starts[workers] = time.perf_counter() - started
                started, before = time.perf_counter(), os.getloadavg()[0]
                # 2 workers: one batch at the end, as the local path records; 1 worker: batches of n/3
                [run] = dask_grading.grade_on_dask(Course.open(dirs[f"dask{workers}"]), {args.assignment: students}, client,
                                                   progress=False, batch=n if workers == 2 else max(2, n // 3))
                times[f"dask{workers}"] = time.perf_counter() - started
                load[f"dask{workers}"] = (before, os.getloadavg()[0])
            failed[f"dask{workers}"] = len(run.failed)
            per_task += _journal_seconds(dirs[f"dask{workers}"], args.assignment)
        same = grades(dirs["local"]) == grades(dirs["dask2"]) == grades(dirs["dask1"])
        before = os.getloadavg()[0]
        record = recording_cost(base, dirs["local"], args.assignment, students)
        load["record"] = (before, os.getloadavg()[0])
    graded = statistics.median(per_task)
    durations, guessed, overhead = notebook_durations(graded, args.assignment)
    sims = {w: simulate(durations, args.sim_students, w, record["gradebook"], args.sim_seconds) for w in (8, 32, 128)}

    def rate(seconds: float) -> str:
        return f"{n / seconds * 3600:.0f}"

    def during(run: str) -> str:
        return f"{load[run][0]:.1f} / {load[run][1]:.1f}"

    def cost(way: str) -> str:
        fixed, per = record[way]
        return f"{fixed:.2f} s per batch + {per:.3f} s per submission"

    lines = [
        DASK_HEADER,
        "",
        f"Machine: {_machine()} (a shared machine: the load average, 1 minute, is given at the start and end "
        f"of each run). Class: {n} generated students on `{args.assignment}`, `ci` profile, sandbox on. "
        f"LocalCluster start-up (not counted): {starts[2]:.1f} s (2 workers), {starts[1]:.1f} s (1 worker).",
        "",
        "| path | workers | wall time (s) | notebooks / hour | vs local parallel | failed | load average |",
        "|---|---|---|---|---|---|---|",
        f"| `course grade --workers 2` (local parallel) | 2 | {times['local']:.1f} | {rate(times['local'])} | 1.00x | "
        f"{failed['local']} | {during('local')} |",
        f"| `course grade --scheduler` (Dask LocalCluster) | 2 | {times['dask2']:.1f} | {rate(times['dask2'])} | "
        f"**{times['dask2'] / times['local']:.2f}x** | {failed['dask2']} | {during('dask2')} |",
        f"| `course grade --scheduler` (Dask LocalCluster) | 1 | {times['dask1']:.1f} | {rate(times['dask1'])} | "
        f"{times['dask1'] / times['local']:.2f}x | {failed['dask1']} | {during('dask1')} |",
        "",
        f"Per task on a worker (median, the journal's seconds): {graded:.2f} s; the Dask path's overhead per "
        f"notebook against the local path, 2 workers: {(times['dask2'] - times['local']) / n * 2:+.2f} s of a "
        f"worker's time. Grades identical between the three runs: **{'yes' if same else 'NO'}**.",
        "",
        f"The client's recording (the local run's {n} executed notebooks recorded into fresh copies of the class, "
        f"in a batch of 1 and of {n}; load {during('record')}): by the Gradebook API in the client "
        f"(`recording.record_executed_notebooks`, the Dask path's now), **{cost('gradebook')}**; by nbgrader's "
        f"autograde with Execute off in a process of its own (`parallel.record_executed`, the Dask and local paths' before, "
        f"both record in-process now), {cost('nbgrader')}.",
        "",
        f"### {args.sim_students:,} students x {len(durations)} notebooks, simulated",
        "",
        "Seconds per notebook: its ci execution time from `results/notebooks-cpu.md` plus grading's own cost, "
        f"{overhead:.1f} s (`{args.assignment}` took {graded:.1f} s per task on a worker here): " + ", ".join(f"{k[:2]} {v:.1f}" for k, v in durations.items())
        + (f" ({', '.join(guessed)}: not in that table, the median)" if guessed else "") + ".",
        "",
        "| workers | hours (Dask's scheduler, simulated) | lower bound: work / workers (h) | efficiency | "
        "client recording, per-submission part alone (h) |",
        "|---|---|---|---|---|",
        *[f"| {w} | **{r['hours']:.2f}** | {r['bound']:.2f} | {r['bound'] / r['hours']:.0%} | {r['recording']:.2f} |"
          for w, r in sims.items()],
        "",
        f"Each simulation: {args.sim_students * len(durations):,} tasks that sleep their duration scaled to about "
        f"{args.sim_seconds:g} s of wall time, in-process workers (8 or 16, one thread per slot), the client recording in batches "
        "(`grade_on_dask`'s loop: results that finished meanwhile are recorded together, at the Gradebook API's cost "
        "above); Dask's own per-task cost is "
        "scaled up with the rest, so the hours are an upper estimate. The client's serial recording bounds what more "
        "workers can give.",
        "",
        f"Command: `python benchmarks/bench_grading.py {' '.join(sys.argv[1:])}`.",
        "",
        targets_section(durations, record["gradebook"], "The costs measured above.",
                        {args.sim_students: sims[32]} if args.sim_students == TARGETS[0][0] else None),
    ]
    section = "\n".join(lines)
    old = args.out.read_text() if args.out.is_file() else ""
    head = old[:old.index(DASK_HEADER)] if DASK_HEADER in old else (old + "\n" if old else "")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(head + section)
    print(section)
    return same


if __name__ == "__main__":
    sys.exit(main())
