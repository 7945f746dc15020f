"""Grades into the LMS at class scale: roster match, Canvas and Moodle export, parse back, AGS score objects.

    python benchmarks/bench_lms.py [--students 1000] [--assignments 13] [--repeats 5]

A generated class (each student matched by SIS id, by login or by name in turn, 5% of submissions
held) goes through course_grader.grading.lms as `course export --format ...` does, from the
gradebook's rows onwards (reading the gradebook is not timed): the roster matched, the Canvas CSV
written and parsed back, the Moodle CSV likewise, the AGS score objects built. Every round trip is
checked (the parsed scores equal the grades, held ones blank) before anything is timed; the table
gives the median of ``--repeats`` runs per step and the whole round trip against the target of
1 s for 1,000 students. Writes benchmarks/results/lms.md with the machine it ran on.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

TARGET_SECONDS = 1.0  # issue 37: roster -> export -> parse for 1,000 students in under a second


def generated_class(students: int, assignments: int, seed: int = 0):
    """Rows (one notebook per assignment), held pairs, roster, names and an LMS configuration."""
    from course_grader.grading.lms import LmsConfig, LmsItem, RosterEntry
    from course_grader.grading.scores import CellScore, NotebookScore

    rng = random.Random(seed)
    names = [f"{i:02d}_assignment" for i in range(assignments)]
    rows, held, roster, people = [], set(), [], {}
    for i in range(students):
        student = f"s{i:05d}"
        way = i % 3  # matched by SIS id, by login, by name
        roster.append(RosterEntry(f"Last{i}, First{i}", str(100000 + i), student if way == 0 else f"SIS{i}",
                                  f"{student}@uni.example" if way == 1 else f"login{i}", f"S{i % 7}"))
        people[student] = f"First{i} Last{i}"
        for name in names:
            cells = {f"test_{k}": CellScore(f"test_{k}", rng.randrange(0, 9) / 4, 2.0, False) for k in range(5)}
            rows.append(NotebookScore(student, name, name, cells))
            if rng.random() < 0.05:
                held.add((name, student))
    config = LmsConfig({name: LmsItem(f"Assignment {name}", str(5000 + k), f"https://lms.example/line_items/{k}")
                        for k, name in enumerate(names)})
    return rows, held, roster, people, config


def round_trip(rows, held, roster, people, config, folder: Path) -> dict[str, float]:
    """One pass of every step; seconds per step. Raises AssertionError if a score comes back wrong."""
    from course_grader.grading import lms

    times: dict[str, float] = {}
    start = time.perf_counter()
    grades = lms.assignment_grades(rows, held)
    times["grades"] = time.perf_counter() - start

    start = time.perf_counter()
    match = lms.match_roster(people, roster)
    times["roster match"] = time.perf_counter() - start
    assert not match.problems and len(match.matched) == len(people)

    start = time.perf_counter()
    path = lms.write_canvas(grades, match, config, folder / "canvas.csv")
    times["canvas write"] = time.perf_counter() - start
    start = time.perf_counter()
    _, parsed = lms.parse_canvas(path)
    times["canvas parse"] = time.perf_counter() - start
    column = {a: f"{item.name} ({item.canvas_id})" for a, item in config.items.items()}
    key = {s: e.sis_id or e.login for s, e in match.matched.items()}
    assert {(key[g.student], column[g.assignment]): g.score for g in grades} == \
        {(k, c): v for k, cells in parsed.items() for c, v in cells.items()}

    start = time.perf_counter()
    path = lms.write_moodle(grades, match, config, folder / "moodle.csv", feedback=True)
    times["moodle write"] = time.perf_counter() - start
    start = time.perf_counter()
    moodle = lms.parse_moodle(path)
    times["moodle parse"] = time.perf_counter() - start
    label = {item.name: a for a, item in config.items.items()}
    assert {(match.matched[g.student].sis_id, g.assignment): g.score for g in grades} == \
        {(k, label[c]): v for k, cells in moodle.items() for c, v in cells.items()}

    start = time.perf_counter()
    entries = lms.ags_scores(grades, {s: s for s in match.matched}, config)
    lms.write_ags(entries, folder / "ags.json")
    times["lti-ags scores"] = time.perf_counter() - start
    assert sum(len(e["scores"]) for e in entries) == len(grades)
    times["canvas round trip"] = sum(times[k] for k in ("grades", "roster match", "canvas write", "canvas parse"))
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=1000)
    parser.add_argument("--assignments", type=int, default=13)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from _common import write_result

    data = generated_class(args.students, args.assignments)
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeats):
            runs.append(round_trip(*data, Path(tmp)))
    median = {step: statistics.median(run[step] for run in runs) for step in runs[0]}
    lines = [f"{args.students} students x {args.assignments} assignments ({len(data[0])} notebook rows, "
             f"{len(data[1])} held), median of {args.repeats} runs; every round trip checked score by score.", "",
             "| step | seconds |", "|---|---:|"]
    lines += [f"| {step} | {seconds:.3f} |" for step, seconds in median.items()]
    scaled = median["canvas round trip"] * 1000 / args.students
    verdict = "yes" if scaled < TARGET_SECONDS else "NO"
    lines += ["", f"Canvas round trip (roster -> export -> parse) per 1,000 students: {scaled:.3f} s; "
                  f"under {TARGET_SECONDS:g} s: **{verdict}**."]
    path = write_result("lms", "Grades into the LMS: export and parse at class scale", "\n".join(lines), threads=False)
    print("\n".join(lines))
    print(f"written to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
