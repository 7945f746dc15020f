"""Grading throughput: serial nbgrader vs `course grade` on every core, with and without the sandbox.

    python benchmarks/bench_grading.py [--students 20] [--assignment 00_welcome] [--workers N]
                                       [--sandbox-repeats 5]

Builds a generated class (solutions, blank releases and curated mistakes in turn), grades
it serially (one `nbgrader autograde`, as nbgrader does by default) with each kernel in the
bubblewrap sandbox, serially again without it (`COURSE_SANDBOX=off`), and in parallel
(`course_utils.tooling.parallel`, sandboxed); checks that all give the same grades. The
sandbox's cost per notebook is also measured directly: the assignment's solution notebook
executed by `SandboxedExecute` in one process, sandbox on and off alternately, median of
`--sandbox-repeats` runs each. Writes a Markdown table to benchmarks/results/grading.md with
the machine it ran on. Timings on a shared machine are noisy; the ratios measured in the
same run are the numbers to read.
"""

from __future__ import annotations

import argparse
import os
import statistics
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from course_utils.tooling.democlass import demo_students, write_submissions  # noqa: E402
from course_utils.tooling.grading import autograde, read_scores  # noqa: E402
from course_utils.tooling.mistakes import load_mistakes  # noqa: E402
from course_utils.tooling.parallel import autograde_parallel, default_workers  # noqa: E402
from course_utils.tooling.release import generate_release, prepare_scratch_course  # noqa: E402


def build_class(course: Path, assignment: str, n_students: int) -> None:
    prepare_scratch_course(ROOT, course, [assignment])
    generate_release(course, [assignment], verbose=False)
    pattern = demo_students(load_mistakes(ROOT, assignment), isolated=True)
    students = []
    for index in range(n_students):
        template = pattern[index % len(pattern)]
        students.append(type(template)(f"s{index:03d}-{template.kind}", template.kind, template.mistakes))
    write_submissions(course, assignment, students)


def notebook_seconds(course: Path, assignment: str, repeats: int) -> dict[str, float]:
    """Median seconds to execute the solution notebook with the sandbox ``on`` and ``off``."""
    import nbformat

    from course_utils.tooling.sandbox import SandboxedExecute

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
    return {(r.student, gid): c.score for r in read_scores(course) for gid, c in r.cells.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=20)
    parser.add_argument("--assignment", default="00_welcome")
    parser.add_argument("--workers", type=int, default=default_workers())
    parser.add_argument("--sandbox-repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "grading.md")
    args = parser.parse_args()
    os.environ.setdefault("COURSE_PROFILE", "ci")
    os.environ.pop("COURSE_SANDBOX", None)  # sandboxed unless a row says otherwise

    with tempfile.TemporaryDirectory(prefix="bench-grading-") as scratch:
        serial_dir, parallel_dir = Path(scratch) / "serial", Path(scratch) / "parallel"
        open_dir = Path(scratch) / "unsandboxed"
        build_class(serial_dir, args.assignment, args.students)
        shutil.copytree(serial_dir, parallel_dir)
        shutil.copytree(serial_dir, open_dir)

        per_notebook = notebook_seconds(serial_dir, args.assignment, args.sandbox_repeats)
        started = time.perf_counter()
        serial_run = autograde(serial_dir, args.assignment)
        serial_s = time.perf_counter() - started
        os.environ["COURSE_SANDBOX"] = "off"
        started = time.perf_counter()
        open_run = autograde(open_dir, args.assignment)
        open_s = time.perf_counter() - started
        os.environ.pop("COURSE_SANDBOX")
        started = time.perf_counter()
        parallel_run = autograde_parallel(parallel_dir, args.assignment, workers=args.workers)
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
    args.out.write_text(table)
    print(table)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
