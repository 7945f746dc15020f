"""The memory wall of notebook 13: naive, tiled (flash) and PyTorch's fused attention, side by side.

    python benchmarks/bench_flash.py [--lengths 1024 4096 8192] [--repeats 3] [--block 128] [--device cpu]

Three implementations of the same attention, measured in one run on the same inputs, interleaved
(so a noisy neighbour slows all of them alike):

- ``naive``: :func:`course_utils.flash.naive_attention`, the whole ``T x T`` score matrix at once;
- ``tiled``: :func:`course_utils.flash.tiled_attention` (the reference of notebook 13's
  exercise 3), tiles of ``block x block``, queries outside (FlashAttention-2's loop order);
- ``SDPA``: ``F.scaled_dot_product_attention`` (on a CPU its fused, tiled flash kernel).

Forward pass, one sequence, one head (``--heads`` for more), ``d = 64``, float32, without
gradients: the question is what each *algorithm* holds at once. Peak memory is the peak of tensor
bytes alive during the call (:class:`course_utils.benchmark.PeakMemory`, a ``TorchDispatchMode``
that sees every tensor an operator creates; the inputs exist before and are not counted, the
output is), so it does not depend on the allocator or on the machine's load. Time is the median
of ``--repeats`` interleaved runs after one warm-up.

The issue's targets (issue 36): peak memory naive/tiled at least 10x at ``T = 4096``; the time
ratio tiled/SDPA is reported, not targeted (Python tiling pays a call per tile on a CPU).
With ``--backward`` a second table measures forward + backward: naive attention through autograd
(which keeps the ``T x T`` probabilities) against :class:`course_utils.flash.TiledAttention`
(which keeps ``q, k, v, out, lse`` and recomputes each tile). Writes
``benchmarks/results/flash-<device>.md``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_result  # noqa: E402

from course_utils import flash  # noqa: E402
from course_utils.benchmark import PeakMemory, synchronize  # noqa: E402
from course_utils.device import get_device  # noqa: E402

MEMORY_TARGET = 10.0  # naive / tiled peak at T = 4096 (issue 36)


def forward_versions(block: int) -> dict:
    return {
        "naive": lambda q, k, v: flash.naive_attention(q, k, v),
        "tiled": lambda q, k, v: flash.tiled_attention(q, k, v, block, block),
        "SDPA": lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
    }


def backward_versions(block: int) -> dict:
    def naive(q, k, v):  # noqa: ANN001, ANN202
        out, _ = flash.naive_attention(q, k, v)
        out.sum().backward()

    def tiled(q, k, v):  # noqa: ANN001, ANN202
        out, _ = flash.TiledAttention.apply(q, k, v, block, block)
        out.sum().backward()

    def sdpa(q, k, v):  # noqa: ANN001, ANN202
        F.scaled_dot_product_attention(q, k, v).sum().backward()

    return {"naive": naive, "tiled": tiled, "SDPA": sdpa}


def peak_bytes(fn, *args) -> int:  # noqa: ANN001
    with PeakMemory() as meter:
        result = fn(*args)
        del result
    return meter.peak


def measure(versions: dict, lengths: list[int], heads: int, d: int, repeats: int, device: torch.device,
            grad: bool) -> list[dict]:
    rows = []
    for T in lengths:
        torch.manual_seed(T)
        q, k, v = (torch.randn(1, heads, T, d, device=device, requires_grad=grad) for _ in range(3))
        context = torch.enable_grad() if grad else torch.no_grad()
        times: dict[str, list[float]] = {name: [] for name in versions}
        peaks: dict[str, int] = {}
        with context:
            for name, fn in versions.items():  # memory first (and a warm-up)
                peaks[name] = peak_bytes(fn, q, k, v)
            for _ in range(repeats):
                for name, fn in versions.items():  # interleaved
                    synchronize(device)
                    start = time.perf_counter()
                    fn(q, k, v)
                    synchronize(device)
                    times[name].append(time.perf_counter() - start)
        row = {"T": T}
        for name in versions:
            row[f"{name} MiB"] = peaks[name] / 2**20
            row[f"{name} ms"] = 1000 * statistics.median(times[name])
            row[f"{name} spread"] = (1000 * min(times[name]), 1000 * max(times[name]))
        rows.append(row)
        print(f"T={T:5d} " + "  ".join(f"{n}: {row[f'{n} MiB']:8.2f} MiB {row[f'{n} ms']:9.1f} ms" for n in versions),
              flush=True)
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| T | naive peak MiB | tiled peak MiB | SDPA peak MiB | output MiB | **naive / tiled peak** | tiled / SDPA peak "
             "| naive ms | tiled ms | SDPA ms | tiled / naive time | **tiled / SDPA time** |",
             "|---|" + "---|" * 11]
    for r in rows:
        lines.append(
            f"| {r['T']} | {r['naive MiB']:.2f} | {r['tiled MiB']:.2f} | {r['SDPA MiB']:.2f} | {r['out MiB']:.2f} "
            f"| **{r['naive MiB'] / r['tiled MiB']:.1f}x** | {r['tiled MiB'] / r['SDPA MiB']:.1f}x "
            f"| {r['naive ms']:.1f} [{r['naive spread'][0]:.1f}-{r['naive spread'][1]:.1f}] "
            f"| {r['tiled ms']:.1f} [{r['tiled spread'][0]:.1f}-{r['tiled spread'][1]:.1f}] "
            f"| {r['SDPA ms']:.1f} [{r['SDPA spread'][0]:.1f}-{r['SDPA spread'][1]:.1f}] "
            f"| {r['tiled ms'] / r['naive ms']:.2f}x | **{r['tiled ms'] / r['SDPA ms']:.1f}x** |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 4096, 8192])
    parser.add_argument("--heads", type=int, default=1)
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--block", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--backward", action="store_true", help="also forward + backward (slower: Python tile loops twice)")
    parser.add_argument("--backward-lengths", type=int, nargs="+", default=[1024, 2048, 4096])
    parser.add_argument("--device", default=None, help="default: CUDA if present, else CPU")
    parser.add_argument("--threads", type=int, default=1,
                        help="CPU threads for torch (default 1: on a shared machine a descheduled second thread "
                             "stalls every parallel op)")
    parser.add_argument("--note", default="", help="a sentence for the result file (e.g. how busy the machine was)")
    args = parser.parse_args()
    device = get_device(args.device)
    torch.set_num_threads(args.threads)
    load = Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"
    rows = measure(forward_versions(args.block), args.lengths, args.heads, args.d, args.repeats, device, grad=False)
    for r in rows:
        r["out MiB"] = args.heads * r["T"] * args.d * 4 / 2**20
    by_T = {r["T"]: r for r in rows}
    checks = []
    if 4096 in by_T:
        ratio = by_T[4096]["naive MiB"] / by_T[4096]["tiled MiB"]
        checks.append(f"- Target: peak memory naive/tiled at least {MEMORY_TARGET:.0f}x at T = 4096: "
                      f"**{'met' if ratio >= MEMORY_TARGET else 'NOT met'}** ({ratio:.1f}x).")
    if len(rows) >= 2:
        a, b = rows[0], rows[-1]
        import math
        for name in ("naive", "tiled", "SDPA"):
            slope = math.log(b[f"{name} MiB"] / a[f"{name} MiB"]) / math.log(b["T"] / a["T"])
            checks.append(f"- {name}'s peak grows as T^{slope:.2f} from T = {a['T']} to {b['T']}.")
    squares = rows[-1]["naive MiB"] * 2**20 / (4 * args.heads * rows[-1]["T"] ** 2)
    body = f"""
Forward pass of attention, one sequence, {args.heads} head(s), d = {args.d}, float32, no gradients, device
`{device}`, tiles of {args.block} x {args.block}. Peak = tensor bytes alive at once during the call
(`PeakMemory`: every tensor an operator creates, inputs not counted, the output counted; exact and
independent of load). Time: median of {args.repeats} interleaved runs after a warm-up, min-max in brackets.
"output MiB" is the size of the result alone (T x d floats per head).

{table(rows)}

{chr(10).join(checks)}
- Naive attention's peak at the longest T is {squares:.1f} float32 T x T matrices per head (the scores, their
  exponentials and the normalised weights alive at once); the tiled version holds its output, its running
  (m, l, o) state and a few {args.block} x {args.block} tiles; SDPA's CPU kernel
  (`_scaled_dot_product_flash_attention_for_cpu`) is itself tiled, so its peak is about its output.
- Time: the tiled version is the reference in Python (one matmul, a few exponentials and bookkeeping
  per tile, each a separate PyTorch call), hence far slower than the fused kernel; against naive
  attention it depends on the machine's bandwidth and load. On a GPU the speed comes from the fused
  kernel keeping tiles in SRAM (Dao et al. 2022), which Python cannot show.

Load average (1 min) when the run started: {load}. {args.note}
"""
    if args.backward:
        brows = measure(backward_versions(args.block), args.backward_lengths, args.heads, args.d, args.repeats,
                        device, grad=True)
        for r in brows:
            r["out MiB"] = args.heads * r["T"] * args.d * 4 / 2**20
        body += f"""
Forward + backward (`out.sum().backward()`), same settings: naive attention through autograd keeps the
T x T probabilities for the backward pass; `TiledAttention` keeps q, k, v, out, lse and recomputes each tile
(FlashAttention's backward); SDPA's CPU flash kernel has its own backward. Peaks include the gradients.

{table(brows)}
"""
    command = (f"python benchmarks/bench_flash.py --device {device.type} --lengths {' '.join(map(str, args.lengths))} "
               f"--repeats {args.repeats} --block {args.block} --heads {args.heads}"
               + (f" --backward --backward-lengths {' '.join(map(str, args.backward_lengths))}" if args.backward else ""))
    body += f"\nCommand: `{command}`.\n"
    path = write_result(f"flash-{device.type}", f"Attention at scale: naive vs tiled vs SDPA on {device.type}", body, device)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
