"""Execution time of every solution notebook, per profile.

    python benchmarks/bench_notebooks.py [--profiles ci cpu] [A ...]

Runs each notebook top to bottom in a fresh kernel (as `course execute` does) in every profile
asked for, and writes ``benchmarks/results/notebooks.md``. The ``ci`` profile should keep each
notebook to about a minute on a 2-core CPU and the ``cpu`` profile to at most 10 minutes.
Executed copies go to ``build/executed/<profile>/``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_result  # noqa: E402

from course_utils.device import get_device  # noqa: E402
from course_utils.tooling.execute import execute_solutions  # noqa: E402
from course_utils.tooling.layout import assignments, find_root  # noqa: E402

BUDGET_S = {"ci": 60, "cpu": 600, "gpu": 600}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("assignments", nargs="*", help="default: all")
    parser.add_argument("--profiles", nargs="+", default=["ci", "cpu"], choices=["ci", "cpu", "gpu"])
    args = parser.parse_args()
    root = find_root()
    names = args.assignments or assignments(root)
    times: dict[str, dict[str, str]] = {name: {} for name in names}
    failed = 0
    for profile in args.profiles:
        for result in execute_solutions(root, names, profile=profile, out_dir=root / "build" / "executed" / profile):
            name = result.path.parent.name
            over = " (over budget)" if result.seconds > BUDGET_S[profile] else ""
            times[name][profile] = f"{result.seconds:.1f}{over}" if result.ok else f"FAILED: {result.error}"
            failed += not result.ok
    device = get_device()
    header = "| notebook | " + " | ".join(f"{p} profile (s)" for p in args.profiles) + " |"
    lines = [header, "|---|" + "---|" * len(args.profiles)]
    for name in names:
        lines.append(f"| {name} | " + " | ".join(times[name].get(p, "") for p in args.profiles) + " |")
    budgets = ", ".join(f"{p} {BUDGET_S[p]} s" for p in args.profiles)
    body = (f"Each notebook executed top to bottom in a fresh `attention-course` kernel, device `{device}`. "
            f"Budgets per notebook: {budgets}.\n\n" + "\n".join(lines) +
            f"\n\nCommand: `python benchmarks/bench_notebooks.py --profiles {' '.join(args.profiles)}`"
            f"{' ' + ' '.join(args.assignments) if args.assignments else ''}.\n")
    suffix = "-".join(args.profiles)
    path = write_result(f"notebooks-{device.type}-{suffix}", f"Notebook execution times ({', '.join(args.profiles)})", body, device)
    print(f"wrote {path}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
