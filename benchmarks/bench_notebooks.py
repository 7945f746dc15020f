"""Execution time of every solution notebook, per profile.

    python benchmarks/bench_notebooks.py [--profiles ci cpu] [A ...]

Runs each notebook top to bottom in a fresh kernel (as `course execute` does) in every profile
asked for, and writes ``benchmarks/results/notebooks.md``. The ``ci`` profile should keep each
notebook to about a minute on a 2-core CPU and the ``cpu`` profile to at most 10 minutes.
Executed copies go to ``build/executed/<profile>/``.

``--from-executed PROFILE ...`` reads the time of those profiles from the executed copies already
in ``build/executed/<profile>/`` instead (first cell started to last cell finished, from the cell
timing nbclient records), with the date each ran: for the long ``cpu`` profile when it was run
earlier with `course execute`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_result  # noqa: E402

from course_utils.device import get_device  # noqa: E402
from course_grader.authoring.execute import execute_solutions  # noqa: E402
from course_utils.layout import assignments, find_root  # noqa: E402

BUDGET_S = {"ci": 60, "cpu": 600, "gpu": 600}


def executed_seconds(path: Path) -> tuple[float, str] | None:
    """(seconds from the first cell's start to the last cell's reply, when it ran) of an executed copy."""
    if not path.is_file():
        return None
    stamps = []
    for cell in json.loads(path.read_text())["cells"]:
        timing = cell.get("metadata", {}).get("execution", {})
        if "iopub.execute_input" in timing and "shell.execute_reply" in timing:
            stamps.append((timing["iopub.execute_input"], timing["shell.execute_reply"]))
    if not stamps:
        return None
    parse = lambda text: dt.datetime.fromisoformat(text.replace("Z", "+00:00"))  # noqa: E731
    start, end = parse(stamps[0][0]), parse(stamps[-1][1])
    return (end - start).total_seconds(), start.strftime("%Y-%m-%d %H:%M UTC")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("assignments", nargs="*", help="default: all")
    parser.add_argument("--profiles", nargs="+", default=["ci", "cpu"], choices=["ci", "cpu", "gpu"])
    parser.add_argument("--from-executed", nargs="*", default=[], choices=["ci", "cpu", "gpu"],
                        help="profiles read from build/executed/<profile>/ instead of run now")
    args = parser.parse_args()
    root = find_root()
    names = args.assignments or assignments(root)
    times: dict[str, dict[str, str]] = {name: {} for name in names}
    failed = 0
    profiles = list(dict.fromkeys(args.profiles + args.from_executed))
    notes = []
    for profile in args.from_executed:
        for name in names:
            found = executed_seconds(root / "build" / "executed" / profile / name / f"{name}.ipynb")
            if found is None:
                times[name][profile] = "not run"
                continue
            seconds, when = found
            over = " (over budget)" if seconds > BUDGET_S[profile] else ""
            times[name][profile] = f"{seconds:.1f}{over} *"
            notes.append(when)
    for profile in [p for p in args.profiles if p not in args.from_executed]:
        for result in execute_solutions(root, names, profile=profile, out_dir=root / "build" / "executed" / profile):
            name = result.path.parent.name
            over = " (over budget)" if result.seconds > BUDGET_S[profile] else ""
            times[name][profile] = f"{result.seconds:.1f}{over}" if result.ok else f"FAILED: {result.error}"
            failed += not result.ok
    device = get_device()
    header = "| notebook | " + " | ".join(f"{p} profile (s)" for p in profiles) + " |"
    lines = [header, "|---|" + "---|" * len(profiles)]
    for name in names:
        lines.append(f"| {name} | " + " | ".join(times[name].get(p, "") for p in profiles) + " |")
    budgets = ", ".join(f"{p} {BUDGET_S[p]} s" for p in profiles)
    if notes:
        lines += ["", f"\\* read from the executed copies in build/executed/ (runs between {min(notes)} and {max(notes)}), "
                  "not measured in this run."]
    body = (f"Each notebook executed top to bottom in a fresh `attention-course` kernel, device `{device}` "
            f"(in the ci profile the kernel uses one torch thread, see `course_utils.session.start`). "
            f"Budgets per notebook: {budgets}.\n\n" + "\n".join(lines) +
            f"\n\nCommand: `python benchmarks/bench_notebooks.py {' '.join(args.assignments) + ' ' if args.assignments else ''}"
            f"--profiles {' '.join(args.profiles)}{' --from-executed ' + ' '.join(args.from_executed) if args.from_executed else ''}`.\n")
    path = write_result(f"notebooks-{device.type}", f"Notebook execution times ({', '.join(profiles)})", body, device,
                        threads=False)
    print(f"wrote {path}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
