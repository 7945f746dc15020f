"""Notebook 07's depth sweep over several seeds: the range its conclusions must hold in.

    python benchmarks/bench_depth_sweep.py                 # the cpu profile's sweep, seeds 0 1 2
    python benchmarks/bench_depth_sweep.py --seeds 0 1 2 3 --threads 2

Runs the notebook's own ``train_counting`` (the code cell of ``solutions/07_transformer_block`` that
defines it, so the two cannot drift apart) for every setting, depth and seed, and writes
``results/depth-sweep-cpu.md``: the lowest and highest final training loss over the seeds, and for each
of the three claims the notebook prints a verdict for, in how many seeds it held. The notebook's prose
states those claims with this table's ranges, never one run's digits.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import nbformat
import torch

from _common import write_result

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "solutions" / "07_transformer_block" / "07_transformer_block.ipynb"
SWEEP = {"residual + LayerNorm": dict(residual=True, norm=True),
         "residual, no LayerNorm": dict(residual=True, norm=False),
         "LayerNorm, no residual": dict(residual=False, norm=True),
         "neither": dict(residual=False, norm=False)}


def notebook_namespace() -> dict:
    """The names the sweep needs, from the notebook's own cell (the course's blocks for its exercises)."""
    from torch import nn
    import torch.nn.functional as F
    from course_utils.blocks import EncoderBlock, LayerNorm

    source = next(c.source for c in nbformat.read(str(NOTEBOOK), as_version=4).cells
                  if c.cell_type == "code" and "def train_counting" in c.source)
    namespace = {"torch": torch, "nn": nn, "F": F, "EncoderBlock": EncoderBlock, "LayerNorm": LayerNorm,
                 "device": torch.device("cpu"), "print": lambda *a, **k: None}
    exec(compile(source, str(NOTEBOOK), "exec"), namespace)
    return namespace


def verdicts(losses: dict[str, list[float]], depths: list[int], blind: float) -> dict[str, bool]:
    """The notebook's three claims on one seed's final losses (the same rule as its verdict lines)."""
    deep = [i for i, depth in enumerate(depths) if depth >= 4]
    return {
        "residual + LayerNorm learns at every depth": all(loss < blind / 2 for loss in losses["residual + LayerNorm"]),
        "no stack of 4 or more blocks without residuals learns": all(
            losses[name][i] >= blind / 2 for name in ("LayerNorm, no residual", "neither") for i in deep),
        "residual without LayerNorm ends above the blind guess at the deepest": losses["residual, no LayerNorm"][-1] > blind,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--depths", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the notebook sets one)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    ns = notebook_namespace()
    blind = ns["blind_loss"]
    t0 = time.perf_counter()
    per_seed = []
    for seed in args.seeds:
        losses = {name: [ns["train_counting"](depth, steps=args.steps, seed=seed, **kw)["loss"] for depth in args.depths]
                  for name, kw in SWEEP.items()}
        per_seed.append(losses)
        print(f"seed {seed}: " + "; ".join(f"{n}: " + " ".join(f"{v:.3g}" for v in vs) for n, vs in losses.items()), flush=True)
    lines = [f"Final training loss (mean of the last 20 steps) after {args.steps} steps, seeds {args.seeds}, "
             f"lowest-highest over the seeds; blind guess {blind:.3f} nats; {time.perf_counter() - t0:.0f} s in all.", "",
             "| setting | " + " | ".join(f"L = {d}" for d in args.depths) + " |", "|---|" + "---|" * len(args.depths)]
    for name in SWEEP:
        cells = []
        for i in range(len(args.depths)):
            values = [run[name][i] for run in per_seed]
            cells.append(f"{min(values):.3g}-{max(values):.3g}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "| claim (the notebook prints it for your run) | seeds where it held |", "|---|---|"]
    held = [verdicts(run, args.depths, blind) for run in per_seed]
    for claim in held[0]:
        lines.append(f"| {claim} | {sum(h[claim] for h in held)} of {len(held)} |")
    print("\n".join(lines))
    write_result("depth-sweep-cpu", "Notebook 07: the depth sweep over seeds", "\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
