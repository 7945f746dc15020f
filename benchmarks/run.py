"""Run every benchmark and write its Markdown result to benchmarks/results/.

    python benchmarks/run.py            # everything (the cpu profile of the notebooks takes a while)
    python benchmarks/run.py --quick    # notebooks in the ci profile only, fewer repeats

Each script can also be run alone (see its docstring). On a GPU machine the scripts use CUDA and
the notebooks run in the gpu profile; results carry the device in their file name.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="ci profile only, fewer repeats, smaller grading class")
    args = parser.parse_args()
    import torch

    gpu = torch.cuda.is_available()
    profiles = ["ci"] if args.quick else (["ci", "gpu"] if gpu else ["ci", "cpu"])
    runs = [
        ["bench_attention.py"] + (["--repeats", "2", "--lengths", "64", "256", "1024"] if args.quick else []),
        ["bench_gpt.py"] + (["--repeats", "1"] if args.quick else []),
        ["bench_notebooks.py", "--profiles", *profiles],
        ["bench_grading.py"] + (["--students", "6"] if args.quick else []),
        ["bench_lms.py"] + (["--repeats", "2"] if args.quick else []),
    ]
    failed = []
    for script, *rest in runs:
        print(f"== {script} {' '.join(rest)}", flush=True)
        if subprocess.call([sys.executable, str(HERE / script), *rest]) != 0:
            failed.append(script)
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
