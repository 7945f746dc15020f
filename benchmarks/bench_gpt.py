"""The course's GPT: generation with and without the KV cache, and training throughput.

    python benchmarks/bench_gpt.py [--device cpu]

Generation: greedy decoding from a 16-token prompt until the context is full, with the cache
(one new position per step) and without it (the whole prefix recomputed at every step); the
tokens must be identical. Configurations: the notebook 10 model and a longer context, where the
cache saves more. Training: tokens/s of forward + backward + AdamW at a fixed configuration.
Untrained weights: speed does not depend on what the model learned. Writes
``benchmarks/results/gpt-<device>.md``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_result  # noqa: E402

from course_utils.device import get_device  # noqa: E402
from course_utils.gpt import GPT, GPTConfig, generation_speed, training_speed  # noqa: E402

VOCAB = 96  # about the character vocabulary of the notebook's corpus

GENERATION = {
    "notebook 10 (4 layers, d 128, context 128)": GPTConfig(VOCAB, block_size=128, n_layer=4, n_head=4, d_model=128),
    "longer context (4 layers, d 128, context 512)": GPTConfig(VOCAB, block_size=512, n_layer=4, n_head=4, d_model=128),
    "wider (6 layers, d 384, context 256)": GPTConfig(VOCAB, block_size=256, n_layer=6, n_head=6, d_model=384),
}
TRAINING = GPTConfig(VOCAB, block_size=128, n_layer=4, n_head=4, d_model=128)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None, help="default: CUDA if present, else CPU")
    parser.add_argument("--threads", type=int, default=1,
                        help="CPU threads for torch (default 1: on a shared machine, a second thread that is "
                             "descheduled stalls every parallel op, which swamps the comparison)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--small", action="store_true", help="tiny models (a smoke test of this script)")
    args = parser.parse_args()
    device = get_device(args.device)
    torch.set_num_threads(args.threads)
    generation, training = GENERATION, TRAINING
    if args.small:
        generation = {"tiny (1 layer, d 32, context 32)": GPTConfig(VOCAB, block_size=32, n_layer=1, n_head=2, d_model=32)}
        training = generation["tiny (1 layer, d 32, context 32)"]

    lines = ["| model | parameters | tokens/s without cache | tokens/s with cache | speed-up | identical tokens |",
             "|---|---|---|---|---|---|"]
    all_identical = True
    for name, config in generation.items():
        torch.manual_seed(0)
        model = GPT(config).to(device).eval()
        r = generation_speed(model, repeats=args.repeats, device=device)
        all_identical &= r["identical"]
        lines.append(f"| {name} | {model.num_parameters() / 1e6:.2f} M | {r['without_cache']:.0f} | {r['with_cache']:.0f} | "
                     f"{r['speedup']:.1f}x | {'yes' if r['identical'] else 'NO'} |")
        print(lines[-1], flush=True)
    train_tps = training_speed(training, batch_size=32, steps=10, device=device)
    print(f"training: {train_tps:.0f} tokens/s", flush=True)
    body = "\n".join([
        "## Generation with and without the KV cache",
        "",
        f"Greedy decoding, batch 1, a 16-token prompt, generating until the context is full; median of {args.repeats} runs",
        "after one warm-up, device `" + str(device) + "`.",
        "",
        *lines,
        "",
        f"Identical tokens with and without the cache in every configuration: **{'yes' if all_identical else 'NO'}**.",
        "",
        "## Training throughput",
        "",
        f"{'A tiny model' if args.small else 'Notebook 10' + chr(39) + 's model'} ({training.n_layer} layers, d_model {training.d_model}, "
        f"{training.n_head} heads, context {training.block_size}), batch 32, forward + backward + AdamW,",
        f"10 steps after 2 warm-up steps: **{train_tps:.0f} tokens/s** on `{device}`.",
        "",
        f"Command: `python benchmarks/bench_gpt.py --device {device.type}{' --small' if args.small else ''}`.",
    ])
    path = write_result(f"gpt-{device.type}", f"GPT generation and training speed on {device.type}", body, device)
    print(f"wrote {path}")
    return 0 if all_identical else 1


if __name__ == "__main__":
    raise SystemExit(main())
