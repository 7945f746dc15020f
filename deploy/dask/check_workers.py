"""Run `course doctor` on every worker of a Dask cluster: ready to grade, or what is missing.

    python deploy/dask/check_workers.py tcp://scheduler:8786

Each worker needs the course wheel with its `instructor` and `dask` extras, the kernel
(`course setup-kernel`) and bubblewrap (the sandbox's trial run must pass). Exits 1 if any
worker is not ready.
"""

from __future__ import annotations

import subprocess
import sys


def doctor() -> tuple[int, str]:
    """`course doctor` where this runs (on a worker): its exit status and report."""
    result = subprocess.run([sys.executable, "-m", "course_utils.cli", "doctor"],
                            capture_output=True, text=True, timeout=300)
    return result.returncode, result.stdout + result.stderr


def main(address: str) -> int:
    from distributed import Client

    with Client(address) as client:
        reports = client.run(doctor)
    for worker, (code, report) in sorted(reports.items()):
        print(f"== {worker}: {'ready' if code == 0 else 'NOT READY'}\n{report}")
    return 0 if all(code == 0 for code, _ in reports.values()) else 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    raise SystemExit(main(sys.argv[1]))
