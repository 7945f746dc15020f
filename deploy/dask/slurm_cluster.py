"""Start grading workers as SLURM jobs and print the scheduler's address for `course grade`.

    python deploy/dask/slurm_cluster.py --jobs 16        # 16 jobs x 8 workers = 128 workers
    course grade 03_self_attention --scheduler tcp://login-node:8786   # in another terminal

Reads deploy/dask/jobqueue.yaml (or ~/.config/dask/jobqueue.yaml). The scheduler runs in this
process on the login/grader node; keep it running while grading. Ctrl-C cancels the jobs.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import dask
import yaml

HERE = Path(__file__).resolve().parent


def load_config(path: Path = HERE / "jobqueue.yaml") -> dask.config.set:
    """Set every value of ``path`` in Dask's configuration, key by key (dask-jobqueue's defaults
    stay for the others); usable as a context manager that puts the old values back."""

    def flat(tree: dict, prefix: str = "") -> dict:
        items: dict = {}
        for key, value in tree.items():
            if isinstance(value, dict) and value:
                items.update(flat(value, f"{prefix}{key}."))
            else:
                items[f"{prefix}{key}"] = value
        return items

    return dask.config.set(flat(yaml.safe_load(path.read_text())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=4, help="SLURM jobs to start (workers: jobs x processes)")
    parser.add_argument("--port", type=int, default=8786, help="the scheduler's port")
    args = parser.parse_args()
    load_config()
    from dask_jobqueue import SLURMCluster

    with SLURMCluster(scheduler_options={"port": args.port, "dashboard_address": ":8787"}) as cluster:
        print(cluster.job_script())
        cluster.scale(jobs=args.jobs)
        print(f"scheduler: {cluster.scheduler_address}   dashboard: {cluster.dashboard_link}")
        print(f"grade with: course grade ASSIGNMENT --scheduler {cluster.scheduler_address}")
        try:
            while True:
                time.sleep(60)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
