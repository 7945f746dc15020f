"""Multi-head attention: the course's module against PyTorch's, forward + backward.

    python benchmarks/bench_attention.py [--lengths 64 128 256 512 1024 2048] [--device cpu]

Four implementations on the same inputs, measured in one run and interleaved (so a noisy
neighbour slows all of them alike); the ratio to ``torch.nn.MultiheadAttention`` is the number
to read:

- ``course explicit``: :class:`course_utils.multihead.MultiHeadAttention` as notebook 04 builds
  it (scores, masked softmax, weights @ V: builds the ``T x T`` matrix);
- ``course fused``: the same module with ``fused=True`` (calls ``scaled_dot_product_attention``);
- ``nn.MultiheadAttention`` with ``need_weights=False`` (PyTorch's fused path);
- ``F.scaled_dot_product_attention`` alone on pre-split heads (no projections): a floor.

Peak memory is the peak of tensor bytes alive during forward + backward
(:class:`course_utils.benchmark.PeakMemory`), which shows the quadratic growth of the explicit
version. A second table compares where the explicit path applies ``1/sqrt(d_k)``: to q (as the
course module does) or to the ``T x T`` scores. Writes ``benchmarks/results/attention-<device>.md``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_result  # noqa: E402

from course_utils.benchmark import PeakMemory, synchronize  # noqa: E402
from course_utils.device import get_device  # noqa: E402
from course_utils.multihead import MultiHeadAttention, split_heads  # noqa: E402

TARGET = 1.3  # the target: course fused within 1.3x of nn.MultiheadAttention on CPU


def implementations(d_model: int, n_heads: int, device: torch.device) -> dict:
    torch.manual_seed(0)
    reference = nn.MultiheadAttention(d_model, n_heads, batch_first=True).to(device)
    explicit = MultiHeadAttention(d_model, n_heads).to(device).load_from_torch(reference)
    fused = MultiHeadAttention(d_model, n_heads, fused=True).to(device).load_from_torch(reference)

    def sdpa(x: torch.Tensor) -> torch.Tensor:
        q = split_heads(x, n_heads)  # (B, h, T, d_k); the same tensor as q, k and v
        return F.scaled_dot_product_attention(q, q, q)

    return {
        "course explicit": lambda x: explicit(x, x, x)[0],
        "course fused": lambda x: fused(x, x, x)[0],
        "nn.MultiheadAttention": lambda x: reference(x, x, x, need_weights=False)[0],
        "F.sdpa (no projections)": sdpa,
    }


def forward_backward(fn, x: torch.Tensor) -> None:
    fn(x).sum().backward()


def measure(lengths: list[int], batch: int, d_model: int, n_heads: int, repeats: int, device: torch.device) -> list[dict]:
    impls = implementations(d_model, n_heads, device)
    rows = []
    for T in lengths:
        x = torch.randn(batch, T, d_model, device=device, requires_grad=True)
        times: dict[str, list[float]] = {name: [] for name in impls}
        for fn in impls.values():  # warm-up
            forward_backward(fn, x)
        for _ in range(repeats):
            for name, fn in impls.items():  # interleaved
                synchronize(device)
                start = time.perf_counter()
                forward_backward(fn, x)
                synchronize(device)
                times[name].append(time.perf_counter() - start)
        peaks = {}
        for name, fn in impls.items():
            with PeakMemory() as meter:
                forward_backward(fn, x)
            peaks[name] = meter.peak
        for name in impls:
            rows.append({"T": T, "impl": name, "ms": 1000 * statistics.median(times[name]), "peak_mb": peaks[name] / 2**20})
        ref = statistics.median(times["nn.MultiheadAttention"])
        print(f"T={T:5d}  " + "  ".join(f"{n}: {1000 * statistics.median(t):8.2f} ms ({statistics.median(t) / ref:4.2f}x)"
                                         for n, t in times.items()), flush=True)
    return rows


def scaling_comparison(lengths: list[int], batch: int, d_model: int, n_heads: int, repeats: int,
                       device: torch.device) -> list[tuple[int, float, float]]:
    """Forward + backward of ``softmax(. ) @ v`` with the ``1/sqrt(d_k)`` applied to q (the library's explicit
    path) or to the ``T x T`` scores, interleaved; returns ``(T, ms scaling q, ms scaling scores)`` per length."""
    d_k = d_model // n_heads
    variants = {
        "q": lambda q, k, v: torch.softmax((q * d_k**-0.5) @ k.transpose(-2, -1), dim=-1) @ v,
        "scores": lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1) / d_k**0.5, dim=-1) @ v,
    }
    out = []
    for T in lengths:
        q, k, v = (torch.randn(batch, n_heads, T, d_k, device=device, requires_grad=True) for _ in range(3))
        times: dict[str, list[float]] = {name: [] for name in variants}
        for repeat in range(repeats + 1):  # the first round warms up
            for name, fn in variants.items():
                synchronize(device)
                start = time.perf_counter()
                fn(q, k, v).sum().backward()
                synchronize(device)
                if repeat:
                    times[name].append(time.perf_counter() - start)
        out.append((T, 1000 * statistics.median(times["q"]), 1000 * statistics.median(times["scores"])))
        print(f"T={T:5d}  scaling q {out[-1][1]:8.2f} ms, scaling scores {out[-1][2]:8.2f} ms "
              f"({out[-1][1] / out[-1][2]:.2f}x)", flush=True)
    return out


def table(rows: list[dict]) -> str:
    names = list(dict.fromkeys(r["impl"] for r in rows))
    lines = ["| T | " + " | ".join(f"{n} ms (x ref)" for n in names) + " | " + " | ".join(f"{n} peak MB" for n in names) + " |",
             "|---|" + "---|" * (2 * len(names))]
    for T in dict.fromkeys(r["T"] for r in rows):
        by = {r["impl"]: r for r in rows if r["T"] == T}
        ref = by["nn.MultiheadAttention"]["ms"]
        lines.append(f"| {T} | " + " | ".join(f"{by[n]['ms']:.2f} ({by[n]['ms'] / ref:.2f}x)" for n in names) + " | "
                     + " | ".join(f"{by[n]['peak_mb']:.1f}" for n in names) + " |")
    return "\n".join(lines)


def growth(rows: list[dict], impl: str) -> float:
    """Slope of log(peak memory) against log(T) between the two longest sequences."""
    import math
    pts = sorted((r["T"], r["peak_mb"]) for r in rows if r["impl"] == impl)
    (t0, m0), (t1, m1) = pts[-2], pts[-1]
    return math.log(m1 / m0) / math.log(t1 / t0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 128, 256, 512, 1024, 2048])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default=None, help="default: CUDA if present, else CPU")
    parser.add_argument("--threads", type=int, default=1,
                        help="CPU threads for torch (default 1: on a shared machine, a second thread that is "
                             "descheduled stalls every parallel op, which swamps the comparison)")
    parser.add_argument("--note", default="", help="a sentence for the result file (e.g. how busy the machine was)")
    args = parser.parse_args()
    device = get_device(args.device)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rows = measure(args.lengths, args.batch, args.d_model, args.heads, args.repeats, device)
    scaling = scaling_comparison(args.lengths, args.batch, args.d_model, args.heads, args.repeats, device)
    scaling_table = "\n".join(["| T | scaling q ms | scaling the scores ms | ratio |", "|---|---|---|---|"]
                              + [f"| {T} | {a:.2f} | {b:.2f} | {a / b:.2f}x |" for T, a, b in scaling])
    fused_ratios = []
    for T in args.lengths:
        by = {r["impl"]: r["ms"] for r in rows if r["T"] == T}
        fused_ratios.append(by["course fused"] / by["nn.MultiheadAttention"])
    worst = max(fused_ratios)
    verdict = "met" if worst <= TARGET else "NOT met"
    body = f"""
Forward + backward of self-attention, batch {args.batch}, d_model {args.d_model}, {args.heads} heads, float32,
device `{device}`; median of {args.repeats} interleaved runs after one warm-up. "x ref" is the time divided
by `nn.MultiheadAttention`'s in the same run.

{table(rows)}

- Target: the course module with `fused=True` within {TARGET}x of `nn.MultiheadAttention` at every length:
  **{verdict}** (worst ratio {worst:.2f}x, median {statistics.median(fused_ratios):.2f}x).
- Peak memory of the explicit version grows as T^{growth(rows, "course explicit"):.2f} between the two longest
  lengths (the T x T weights, kept for backward); the fused version as T^{growth(rows, "course fused"):.2f}.

{args.note}

Where the explicit path applies `1/sqrt(d_k)`: to q before `q @ k^T` (what the course module does) or to
the `T x T` scores after it; attention core only (no projections), forward + backward, same inputs,
median of {args.repeats} interleaved runs:

{scaling_table}

Command: `python benchmarks/bench_attention.py --device {device.type} --lengths {' '.join(map(str, args.lengths))} --repeats {args.repeats}`.
"""
    path = write_result(f"attention-{device.type}", f"Multi-head attention: course vs PyTorch on {device.type}", body, device)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
