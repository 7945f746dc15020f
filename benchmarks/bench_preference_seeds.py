"""Notebook 14's conclusions over seeds: every stage's greedy answers (base, SFT, DPO, GRPO), the
β sweep's KL, and GRPO's reward, from whole runs of the solution notebook with its seeds shifted.

    python benchmarks/bench_preference_seeds.py [--seeds 0 1 2] [--profile cpu] [--reuse-executed]

Seed ``s`` runs the solution notebook unchanged except for its seeds: the session's (``start``),
SFT's and DPO's and GRPO's batch draws, and the samples that make the preference pairs and GRPO's
groups; the data (training and held-out dates) stay the same, so the runs differ in training and
sampling only. Seed 0 is the notebook as it is (``--reuse-executed`` reads it from
``build/executed/<profile>/`` when `course execute` has just run it). Each run's numbers are read
from the cell that prints them for the written question. Writes
``benchmarks/results/preference-seeds-<profile>.md`` with one row per seed and the range.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_result  # noqa: E402

from course_utils.execute import execute_notebook  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NAME = "14_after_fine_tuning"
SOURCE = ROOT / "solutions" / NAME / f"{NAME}.ipynb"


def seeded(seed: int) -> list[tuple[str, str]]:
    """(old, new) edits of the notebook's code that shift every seed by ``seed`` (identity for 0)."""
    return [
        ("device = start(seed=0)", f"device = start(seed={seed})"),
        ("def sft(lm, steps, lr, batch_size, seed=0):", f"def sft(lm, steps, lr, batch_size, seed={seed}):"),
        ("train_pairs = build_pairs(train_sources, train_targets, seed=1)",
         f"train_pairs = build_pairs(train_sources, train_targets, seed={1 + 10 * seed})"),
        ('dates["train"]["target"][held], seed=2)', f'dates["train"]["target"][held], seed={2 + 10 * seed})'),
        ("def train_dpo(beta, steps, lr, batch_size=4, seed=0):", f"def train_dpo(beta, steps, lr, batch_size=4, seed={seed}):"),
        ("verifier=date_reward, seed=0):", f"verifier=date_reward, seed={seed}):"),
        ("seed=1000 + step,", f"seed={1000 + 100 * seed} + step,"),
    ]


def notebook_for(seed: int, folder: Path) -> Path:
    nb = json.loads(SOURCE.read_text())
    for old, new in seeded(seed):
        hits = [c for c in nb["cells"] if c["cell_type"] == "code" and old in "".join(c["source"])]
        if len(hits) != 1:
            raise SystemExit(f"the notebook changed: {old!r} is in {len(hits)} code cells (expected 1); update seeded()")
        text = "".join(hits[0]["source"]).replace(old, new)
        hits[0]["source"] = text.splitlines(keepends=True)
    path = folder / f"{NAME}.ipynb"
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False))
    return path


def printed(nb_path: Path) -> str:
    """The stdout of the cell that prints the numbers for the written question."""
    nb = json.loads(nb_path.read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code" and "For your answer" in "".join(cell["source"]):
            return "".join("".join(o.get("text", "")) for o in cell.get("outputs", []) if o.get("name") == "stdout")
    raise SystemExit(f"{nb_path}: no executed cell prints 'For your answer'")


def parse(text: str) -> dict:
    row: dict = {}
    for stage, exact, fmt, length in re.findall(r"^\s+(\w+)\s*: exact (\d+)%, ISO format (\d+)%, mean answer length ([\d.]+)",
                                                  text, re.M):
        row[stage] = (int(exact) / 100, int(fmt) / 100, float(length))
    for beta, kl, acc, exact in re.findall(r"DPO β = ([\d.]+): KL to reference (-?[\d.]+) nats, held-out preference accuracy "
                                           r"([\d.na]+), exact (\d+)%", text):
        row[f"β={beta}"] = (float(kl), float(acc), int(exact) / 100)
    grpo = re.search(r"GRPO: mean reward first/last step ([\d.]+) / ([\d.]+), groups with signal (\d+)%", text)
    if grpo:
        row["GRPO reward"] = (float(grpo.group(1)), float(grpo.group(2)), int(grpo.group(3)) / 100)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--profile", default="cpu", choices=["ci", "cpu", "gpu"])
    parser.add_argument("--reuse-executed", action="store_true", help="seed 0 from build/executed/<profile>/ when there")
    parser.add_argument("--note", default="")
    args = parser.parse_args()
    rows, seconds = {}, {}
    work = Path(tempfile.mkdtemp(prefix="preference-seeds-"))
    try:
        for seed in args.seeds:
            executed = ROOT / "build" / "executed" / args.profile / NAME / f"{NAME}.ipynb"
            if seed == 0 and args.reuse_executed and executed.is_file():
                rows[seed], seconds[seed] = parse(printed(executed)), None
                print(f"seed 0: read from {executed.relative_to(ROOT)}", flush=True)
                continue
            folder = work / f"seed{seed}"
            folder.mkdir()
            for extra in SOURCE.parent.iterdir():
                if extra.name != SOURCE.name:
                    (shutil.copytree if extra.is_dir() else shutil.copy)(extra, folder / extra.name)
            path = notebook_for(seed, folder)
            out = folder / "executed" / path.name
            started = time.perf_counter()
            _, result = execute_notebook(path, out, profile=args.profile)
            seconds[seed] = time.perf_counter() - started
            if not result.ok:
                print(f"seed {seed}: FAILED {result.error}", flush=True)
                return 1
            rows[seed] = parse(printed(out))
            print(f"seed {seed} ({seconds[seed]:.0f} s): {rows[seed]}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    stages = [s for s in ("base", "SFT", "DPO", "GRPO") if all(s in r for r in rows.values())]
    betas = sorted({k for r in rows.values() for k in r if k.startswith("β=")}, key=lambda k: float(k[2:]))
    head = "| seed | " + " | ".join(f"{s} exact / format" for s in stages) + " | " + " | ".join(f"DPO {b}: KL, pref. acc." for b in betas) \
        + " | GRPO reward first → last, groups with signal | run (s) |"
    lines = [head, "|---|" + "---|" * (len(stages) + len(betas) + 2)]
    for seed, r in rows.items():
        lines.append(f"| {seed} | " + " | ".join(f"{r[s][0]:.0%} / {r[s][1]:.0%}" for s in stages) + " | "
                     + " | ".join(f"{r[b][0]:.2f}, {r[b][1]:.2f}" if b in r else "" for b in betas) + " | "
                     + (f"{r['GRPO reward'][0]:.2f} → {r['GRPO reward'][1]:.2f}, {r['GRPO reward'][2]:.0%}" if "GRPO reward" in r else "")
                     + (f" | {seconds[seed]:.0f} |" if seconds[seed] else " | (executed copy) |"))
    summary = []
    for s in stages:
        ex = [r[s][0] for r in rows.values()]
        fm = [r[s][1] for r in rows.values()]
        summary.append(f"- {s}: exact {min(ex):.0%}–{max(ex):.0%} (median {statistics.median(ex):.0%}), "
                       f"ISO format {min(fm):.0%}–{max(fm):.0%} (median {statistics.median(fm):.0%}).")
    if "DPO" in stages and "base" in stages:
        gains = [r["DPO"][1] - r["base"][1] for r in rows.values()]
        dpo_fmt = [r["DPO"][1] for r in rows.values()]
        met = min(dpo_fmt) >= 0.8 and min(gains) >= 0.5
        summary.append(f"- Issue 38's target (after DPO, held-out ISO-format rate of greedy answers at least 0.8 and above the "
                       f"base by at least 0.5, every seed): **{'met' if met else 'NOT met'}** (DPO format "
                       f"{min(dpo_fmt):.0%}–{max(dpo_fmt):.0%}, gain over the base {min(gains):+.0%} to {max(gains):+.0%}).")
    for b in betas:
        kls = [r[b][0] for r in rows.values() if b in r]
        summary.append(f"- DPO {b}: KL to the reference {min(kls):.2f}–{max(kls):.2f} nats.")
    body = f"""
Notebook 14 (`solutions/{NAME}`) executed top to bottom in the `{args.profile}` profile once per seed, the seeds of
training and sampling shifted (`seeded()` in the script), the training and held-out dates the same. Rates are over
the notebook's held-out dates (greedy answers); "exact" is the ISO date, "format" any `YYYY-MM-DD` answer.

{chr(10).join(lines)}

{chr(10).join(summary)}

{args.note}

Command: `python benchmarks/bench_preference_seeds.py --profile {args.profile} --seeds {' '.join(map(str, args.seeds))}`
{'`--reuse-executed`' if args.reuse_executed else ''}
"""
    path = write_result(f"preference-seeds-{args.profile}", f"Notebook 14 over seeds ({args.profile} profile)", body, threads=False)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
