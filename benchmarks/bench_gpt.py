"""The course's GPT: generation with and without the KV cache, and training speed against PyTorch's modules.

    python benchmarks/bench_gpt.py [--device cpu] [--repeats 3] [--train-repeats 15]

Generation: greedy decoding from a 16-token prompt until the context is full, with the cache
(one new position per step) and without it (the whole prefix recomputed at every step), the two
interleaved; the tokens must be identical. Configurations: the notebook 10 model and a longer
context, where the cache saves more. Untrained weights: speed does not depend on what the model
learned.

Training: one step of notebook 10's training (forward, cross-entropy, backward, gradient clipping,
AdamW; batch 16, context 128) of the course GPT and of a nanoGPT-style copy built from
``nn.LayerNorm``, ``nn.GELU`` and ``F.scaled_dot_product_attention``, holding the same weights
(checked: equal logits). The steps alternate, each model with its own optimiser on the same
batches; the ratio of the median step times is the number to read. Target: at most
``TRAIN_TARGET``. Writes ``benchmarks/results/gpt-<device>.md``.
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

from course_utils.benchmark import synchronize  # noqa: E402
from course_utils.device import get_device  # noqa: E402
from course_utils.benchmark import generation_speed  # noqa: E402
from course_utils.gpt import GPT, GPTConfig, generate, lm_batch, lm_train_step  # noqa: E402

VOCAB = 96  # about the character vocabulary of the notebook's corpus
NOTEBOOK_10 = GPTConfig(VOCAB, block_size=128, n_layer=4, n_head=4, d_model=128)
NOTEBOOK_10_BATCH = 16  # the cpu profile's batch size
TRAIN_TARGET = 1.05  # course GPT step time / the same model from PyTorch's modules
CACHE_TARGETS = {128: 2.5, 512: 4.0}  # context length -> least speed-up of cached generation

GENERATION = {
    "notebook 10 (4 layers, d 128, context 128)": NOTEBOOK_10,
    "longer context (4 layers, d 128, context 512)": GPTConfig(VOCAB, block_size=512, n_layer=4, n_head=4, d_model=128),
    "wider (6 layers, d 384, context 256)": GPTConfig(VOCAB, block_size=256, n_layer=6, n_head=6, d_model=384),
}


# --------------------------------------------------------------------------- the reference: nanoGPT's model.py layout
class _RefAttention(nn.Module):
    def __init__(self, c: GPTConfig) -> None:
        super().__init__()
        self.n_head = c.n_head
        self.qkv = nn.Linear(c.d_model, 3 * c.d_model, bias=c.bias)
        self.proj = nn.Linear(c.d_model, c.d_model, bias=c.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, d = x.shape
        q, k, v = (t.view(B, T, self.n_head, d // self.n_head).transpose(1, 2) for t in self.qkv(x).split(d, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, d))


class _RefMLP(nn.Module):
    def __init__(self, c: GPTConfig) -> None:
        super().__init__()
        self.fc1 = nn.Linear(c.d_model, 4 * c.d_model, bias=c.bias)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(4 * c.d_model, c.d_model, bias=c.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class _RefBlock(nn.Module):
    def __init__(self, c: GPTConfig) -> None:
        super().__init__()
        self.ln1, self.attn = nn.LayerNorm(c.d_model), _RefAttention(c)
        self.ln2, self.ffn = nn.LayerNorm(c.d_model), _RefMLP(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.ffn(self.ln2(x))


class ReferenceGPT(nn.Module):
    """nanoGPT's model (no dropout) from PyTorch's modules; parameter names follow the course GPT,
    so ``load_state_dict`` copies its weights."""

    def __init__(self, c: GPTConfig) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(c.vocab_size, c.d_model), nn.Embedding(c.block_size, c.d_model)
        self.blocks = nn.ModuleList(_RefBlock(c) for _ in range(c.n_layer))
        self.ln_f = nn.LayerNorm(c.d_model)
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.wte(idx) + self.wpe(torch.arange(idx.size(1), device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def training_step_ratio(config: GPTConfig, batch_size: int, repeats: int, device: torch.device) -> dict:
    """Median seconds of one training step of the course GPT and of :class:`ReferenceGPT` (same weights),
    interleaved; also the largest logit difference between the two before training."""
    torch.manual_seed(0)
    course = GPT(config).to(device)
    reference = ReferenceGPT(config).to(device)
    reference.load_state_dict(course.state_dict())
    gen = torch.Generator().manual_seed(0)
    data = torch.randint(0, config.vocab_size, (50 * config.block_size,), generator=gen)
    with torch.no_grad():
        x, _ = lm_batch(data, config.block_size, batch_size, gen, device)
        logit_diff = (course(x) - reference(x)).abs().max().item()

    def make_step(model: nn.Module):
        decay = [p for p in model.parameters() if p.dim() >= 2]
        no_decay = [p for p in model.parameters() if p.dim() < 2]
        optimiser = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                                      lr=3e-3, betas=(0.9, 0.95))

        scheduler = torch.optim.lr_scheduler.LambdaLR(optimiser, lambda step: 1.0)

        def step(x: torch.Tensor, y: torch.Tensor) -> None:  # train_lm's default step
            lm_train_step(model, x, y, optimiser, scheduler, max_norm=1.0)
        return step

    steps = {"course": make_step(course), "reference": make_step(reference)}
    times: dict[str, list[float]] = {name: [] for name in steps}
    for repeat in range(repeats + 2):  # two warm-up rounds
        x, y = lm_batch(data, config.block_size, batch_size, gen, device)
        for name, step in (steps.items() if repeat % 2 else reversed(steps.items())):  # alternate who goes first
            synchronize(device)
            start = time.perf_counter()
            step(x, y)
            synchronize(device)
            if repeat >= 2:
                times[name].append(time.perf_counter() - start)
    course_s, reference_s = (statistics.median(times[n]) for n in ("course", "reference"))
    return {"course_ms": 1e3 * course_s, "reference_ms": 1e3 * reference_s, "ratio": course_s / reference_s,
            "logit_diff": logit_diff}


def training_speed(config: GPTConfig, batch_size: int = 32, steps: int = 10, warmup: int = 2,
                   device: torch.device | str = "cpu", seed: int = 0) -> float:
    """Training tokens/s of a fresh :class:`GPT` on random tokens, one ``lm_train_step`` per batch
    (forward, cross-entropy, backward, clipping, AdamW)."""
    torch.manual_seed(seed)
    model = GPT(config).to(device)
    optimiser = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimiser, lambda step: 1.0)
    gen = torch.Generator().manual_seed(seed)
    data = torch.randint(0, config.vocab_size, (10 * config.block_size * batch_size,), generator=gen)

    def step() -> None:
        x, y = lm_batch(data, config.block_size, batch_size, gen, device)
        lm_train_step(model, x, y, optimiser, scheduler)

    for _ in range(warmup):
        step()
    synchronize(device)
    start = time.perf_counter()
    for _ in range(steps):
        step()
    synchronize(device)
    return steps * batch_size * config.block_size / (time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None, help="default: CUDA if present, else CPU")
    parser.add_argument("--threads", type=int, default=1,
                        help="CPU threads for torch (default 1: on a shared machine, a second thread that is "
                             "descheduled stalls every parallel op, which swamps the comparison)")
    parser.add_argument("--repeats", type=int, default=3, help="generation runs per configuration")
    parser.add_argument("--train-repeats", type=int, default=15, help="training steps per model")
    parser.add_argument("--small", action="store_true", help="tiny models (a smoke test of this script)")
    parser.add_argument("--note", default="", help="a sentence for the result file (e.g. how busy the machine was)")
    args = parser.parse_args()
    device = get_device(args.device)
    torch.set_num_threads(args.threads)
    generation, training, batch = GENERATION, NOTEBOOK_10, NOTEBOOK_10_BATCH
    if args.small:
        generation = {"tiny (1 layer, d 32, context 32)": GPTConfig(VOCAB, block_size=32, n_layer=1, n_head=2, d_model=32)}
        training, batch = generation["tiny (1 layer, d 32, context 32)"], 4

    lines = ["| model | parameters | tokens/s without cache | tokens/s with cache | speed-up | target | identical tokens |",
             "|---|---|---|---|---|---|---|"]
    all_identical, targets_met = True, True
    for name, config in generation.items():
        torch.manual_seed(0)
        model = GPT(config).to(device).eval()
        r = generation_speed(model, generate, repeats=args.repeats, device=device)
        all_identical &= r["identical"]
        target = CACHE_TARGETS.get(config.block_size) if config.d_model == 128 else None
        met = target is None or r["speedup"] >= target
        targets_met &= met
        lines.append(f"| {name} | {model.num_parameters() / 1e6:.2f} M | {r['without_cache']:.0f} | {r['with_cache']:.0f} | "
                     f"{r['speedup']:.2f}x | {f'>= {target}x: ' + ('met' if met else 'NOT met') if target else '-'} | "
                     f"{'yes' if r['identical'] else 'NO'} |")
        print(lines[-1], flush=True)
    step = training_step_ratio(training, batch, args.train_repeats, device)
    train_met = step["ratio"] <= TRAIN_TARGET
    print(f"training step: course {step['course_ms']:.1f} ms, reference {step['reference_ms']:.1f} ms, "
          f"ratio {step['ratio']:.3f} (max |logit diff| {step['logit_diff']:.1e})", flush=True)
    train_tps = training_speed(training, batch_size=32, steps=10, device=device)
    print(f"training: {train_tps:.0f} tokens/s", flush=True)
    model_name = "A tiny model" if args.small else "Notebook 10's model"
    shape = f"{training.n_layer} layers, d_model {training.d_model}, {training.n_head} heads, context {training.block_size}"
    command = (f"python benchmarks/bench_gpt.py --device {device.type} --repeats {args.repeats} "
               f"--train-repeats {args.train_repeats}{' --small' if args.small else ''}")
    body = "\n".join([
        *([args.note, ""] if args.note else []),
        "## Generation with and without the KV cache",
        "",
        f"Greedy decoding, batch 1, a 16-token prompt, generating until the context is full; median of {args.repeats} runs",
        f"after one warm-up, the cached and uncached runs interleaved, device `{device}`.",
        "",
        *lines,
        "",
        f"Identical tokens with and without the cache in every configuration: **{'yes' if all_identical else 'NO'}**.",
        "",
        "## Training step against PyTorch's modules",
        "",
        f"{model_name} ({shape}), batch {batch}: forward, cross-entropy, backward, gradient clipping, AdamW",
        "(as `train_lm` does). The course GPT against the same model built from `nn.LayerNorm`, `nn.GELU` and",
        "`F.scaled_dot_product_attention` in nanoGPT's layout, holding the same weights (largest logit difference",
        f"{step['logit_diff']:.1e}); median of {args.train_repeats} steps each after 2 warm-up steps, the two alternating.",
        "",
        "| course GPT ms/step | reference ms/step | ratio | target |",
        "|---|---|---|---|",
        f"| {step['course_ms']:.1f} | {step['reference_ms']:.1f} | **{step['ratio']:.3f}x** | "
        f"<= {TRAIN_TARGET}x: {'met' if train_met else 'NOT met'} |",
        "",
        "## Training throughput",
        "",
        f"{model_name} ({shape}), batch 32, `lm_train_step` (forward, backward, clipping, AdamW),",
        f"10 steps after 2 warm-up steps: **{train_tps:.0f} tokens/s** on `{device}`.",
        "",
        f"Command: `{command}`.",
    ])
    path = write_result(f"gpt-{device.type}", f"GPT generation and training speed on {device.type}", body, device)
    print(f"wrote {path}")
    if not (targets_met and train_met):
        print("note: a speed target was not met (timings on a busy machine are noisy; run again before concluding)")
    return 0 if all_identical else 1


if __name__ == "__main__":
    raise SystemExit(main())
