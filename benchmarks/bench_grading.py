"""Grading throughput: serial nbgrader vs `course grade` on every core, same class, same run.

    python benchmarks/bench_grading.py [--students 20] [--assignment 00_welcome] [--workers N]

Builds a generated class (solutions, blank releases and curated mistakes in turn), grades
it serially (one `nbgrader autograde`, as nbgrader does by default) and in parallel
(`course_utils.tooling.parallel`), checks that both give the same grades, and writes a
Markdown table to benchmarks/results/grading.md with the machine it ran on. Timings on a
shared machine are noisy; the ratio measured in the same run is the number to read.
"""

from __future__ import annotations

import argparse
import os
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


def grades(course: Path) -> dict[tuple[str, str], float]:
    return {(r.student, gid): c.score for r in read_scores(course) for gid, c in r.cells.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=20)
    parser.add_argument("--assignment", default="00_welcome")
    parser.add_argument("--workers", type=int, default=default_workers())
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "grading.md")
    args = parser.parse_args()
    os.environ.setdefault("COURSE_PROFILE", "ci")

    with tempfile.TemporaryDirectory(prefix="bench-grading-") as scratch:
        serial_dir, parallel_dir = Path(scratch) / "serial", Path(scratch) / "parallel"
        build_class(serial_dir, args.assignment, args.students)
        shutil.copytree(serial_dir, parallel_dir)

        started = time.perf_counter()
        serial_run = autograde(serial_dir, args.assignment)
        serial_s = time.perf_counter() - started
        started = time.perf_counter()
        parallel_run = autograde_parallel(parallel_dir, args.assignment, workers=args.workers)
        parallel_s = time.perf_counter() - started
        same = grades(serial_dir) == grades(parallel_dir)

    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}"
    table = "\n".join([
        f"# Grading throughput ({time.strftime('%Y-%m-%d')})",
        "",
        f"Machine: {machine}. Class: {args.students} generated students on `{args.assignment}`, `ci` profile.",
        "",
        "| mode | workers | wall time (s) | s / student | speed-up | failed |",
        "|---|---|---|---|---|---|",
        f"| serial `nbgrader autograde` | 1 | {serial_s:.1f} | {serial_s / args.students:.2f} | 1.00x | {len(serial_run.failed)} |",
        f"| `course grade` (parallel) | {args.workers} | {parallel_s:.1f} | {parallel_s / args.students:.2f} | "
        f"{serial_s / parallel_s:.2f}x | {len(parallel_run.failed)} |",
        "",
        f"Grades identical between the two runs: **{'yes' if same else 'NO'}**.",
        "",
    ])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table)
    print(table)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
