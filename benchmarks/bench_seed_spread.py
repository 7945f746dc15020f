"""Notebooks 01, 02, 03, 04, 06, 07 (ladder and warm-up), 08, 09, 10 and 12 over several seeds: the ranges their prose states, instead of one run's digits.

    COURSE_PROFILE=cpu python benchmarks/bench_seed_spread.py                  # all nine, seeds 0-4, 1 thread
    COURSE_PROFILE=cpu python benchmarks/bench_seed_spread.py --only 08 --seeds 0 1 2 --threads 2
    COURSE_PROFILE=cpu python benchmarks/bench_seed_spread.py --only 01 06 --seeds 0 1 2

Runs the ``cpu`` profile's experiments with the notebooks' own settings, changing only the model seed
(initial weights and order of the batches; the data sets keep the notebooks' seeds), and writes
``results/seed-spread-NN-cpu.md`` for each notebook: every number as
mean ± sd [lowest-highest] over the seeds, and for each conclusion the prose draws, in how many seeds it
held. Seed 0 is the notebook's own run. Notebook 08's models and recipes come from its own code cell
(the one that defines ``new_model``), and notebook 12's from its ViT and GPT cells, so the two cannot drift apart.

* 01: the date model without attention (1,000 steps) and the reversal without attention (800 steps):
  exact match and per-character accuracy per length bucket.
* 02: the date model's exact match (section 5) and the length sweep of section 6 (800 steps each, with
  and without attention): exact match per bucket and the drop from the shortest to the longest bucket.
* 03: the flagged-digit head of section 4 (the notebook's cell, the course's head): final loss, the
  first step with a loss under 0.01 and the held-out accuracy.
* 04: section 5, one head against two on "copy both neighbours" (the notebook's cell): final loss of each,
  and where each of the two heads looks.
* 06: the negation task (section 6): train and test accuracy of the four models (no positions,
  sinusoidal, learned, RoPE), from the notebook's own code cells, and the first step at 90 % test accuracy.
* 07: section 7, the AMAL lab's ladder (Q1-Q4, the notebook's cell and data set): train, test and contrast accuracy.
* 07w: section 6, six blocks at lr 3e-3: post-LN with and without warm-up, and pre-LN (the notebook's cell):
  final training loss and test accuracy.
* 08: section 7.2 (16,000 training strings per model), 7.3 (17-24 letters, never seen in training) and
  section 10 (English -> Portuguese, 12,800 sentences per model: exact match and BLEU).
* 09: the whole of sections 5 and 6 from the notebook's own cells (the exercises replaced by the course's functions),
  per pretraining seed: the MLM's validation loss and polarity probe, and the fine-tuning learning curve (pretrained
  against from scratch, with the notebook's three fine-tuning seeds per point) on every evaluation split.
* 10: the whole notebook's experiments from its own cells (the exercises replaced by the course's functions): section
  4's pretraining (validation loss in bits per character, where the curve leaves the bigram's plateau), section 7's
  fine-tuning against a random-initialisation control with the notebook's three fine-tuning seeds per pretraining
  seed, and section 8's prompting (zero-shot template, and the prompt as context against no prompt and the unigram).
* 12: section 3's ViT on the 8 x 8 digits (the notebook's cell; the data split keeps seed 0): test accuracy
  after 6 and after all epochs, the first epoch at 95 %, and section 4's position-embedding similarity (same
  row, same column, neither); section 6's four GPTs (dense, wide, MoE with and without the balancing loss):
  validation loss, and for both MoEs the share of assignments per expert and the share dropped at capacity
  factors 1.0 and 1.25 on the notebook's validation batch.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from typing import Any, Callable
from pathlib import Path

os.environ.setdefault("COURSE_PROFILE", "cpu")

import nbformat  # noqa: E402
import torch  # noqa: E402

from _common import write_result  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NB08 = ROOT / "solutions" / "08_encoder_decoder" / "08_encoder_decoder.ipynb"
NB03 = ROOT / "solutions" / "03_self_attention" / "03_self_attention.ipynb"
NB04 = ROOT / "solutions" / "04_multihead" / "04_multihead.ipynb"
NB06 = ROOT / "solutions" / "06_positional_encoding" / "06_positional_encoding.ipynb"
NB12 = ROOT / "solutions" / "12_vit_moe" / "12_vit_moe.ipynb"


def claims_table(claims: dict[str, int], n: int) -> list[str]:
    """The closing table of a notebook's section: each claim and in how many of the ``n`` seeds it held."""
    return ["", "| claim | seeds where it held |", "|---|---|"] + [f"| {claim} | {k} of {n} |" for claim, k in claims.items()]


def spread(values: list[float]) -> str:
    """'mean ± sd [lowest-highest]' (the notebooks' own format)."""
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.1f} ± {sd:.1f} [{min(values):.1f}-{max(values):.1f}]"


def spread3(values: list[float]) -> str:
    """The same with three decimals (losses)."""
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.3f} ± {sd:.3f} [{min(values):.3f}-{max(values):.3f}]"


def overall(rows: list[dict], metric: str = "exact") -> float:
    return 100 * sum(r[metric] * r["n"] for r in rows) / sum(r["n"] for r in rows)


def run_02(seeds: list[int], small: bool = False) -> str:
    from course_utils.rnn_seq2seq import build_seq2seq
    from course_utils.seq2seq_data import date_vocab, make_dates, make_string_task, string_vocab
    from course_utils.seq2seq_train import evaluate_by_length, train_seq2seq, translate

    n_train, n_test, date_steps, rev_steps = (200, 48, 3, 3) if small else (20_000, 1_200, 600, 800)
    dates, dvocab = make_dates(n_train, n_test, seed=0), date_vocab()
    reverse, rvocab = make_string_task(n_train, n_test, task="reverse", min_len=2, max_len=24, seed=0), string_vocab()
    edges = [2, 6, 10, 14, 18, 22, 25]
    names = {"no attention": None, "attention": "additive"}
    date_exact, per_bucket, drops, total = [], {n: [] for n in names}, {n: [] for n in names}, {n: [] for n in names}
    buckets: list[str] = []
    t0 = time.perf_counter()
    for seed in seeds:
        torch.manual_seed(seed)
        model = build_seq2seq(len(dvocab), attention="additive", embed_size=32, hidden_size=64)
        train_seq2seq(model, dates["train"], dvocab, steps=date_steps, batch_size=64, lr=3e-3, seed=seed)
        pred = translate(model, dates["test"]["source"], dvocab)
        date_exact.append(100 * sum(p == t for p, t in zip(pred, dates["test"]["target"])) / len(pred))
        for name, attention in names.items():
            torch.manual_seed(seed)
            model = build_seq2seq(len(rvocab), attention=attention, embed_size=32, hidden_size=64)
            train_seq2seq(model, reverse["train"], rvocab, steps=rev_steps, batch_size=64, lr=3e-3, seed=seed)
            rows, _ = evaluate_by_length(model, reverse["test"], rvocab, edges)
            buckets = [r["bucket"] for r in rows]
            per_bucket[name].append([100 * r["exact"] for r in rows])
            drops[name].append(100 * (rows[0]["exact"] - rows[-1]["exact"]))
            total[name].append(overall(rows))
        print(f"seed {seed}: dates {date_exact[-1]:.1f}%; drop without attention {drops['no attention'][-1]:.1f}, "
              f"with {drops['attention'][-1]:.1f} points", flush=True)
    n = len(seeds)
    lines = [f"Notebook 02, `cpu` profile settings, model seeds {seeds} (seed 0 is the notebook's run), "
             f"{torch.get_num_threads()} torch thread(s), {time.perf_counter() - t0:.0f} s in all. "
             "Exact match (%), mean ± sd [lowest-highest] over the seeds.", "",
             f"Dates (section 5, 600 steps, 1,000 held-out dates): {spread(date_exact)}", "",
             "Reversal (section 6, 800 steps each, 1,200 held-out strings of 2-24 letters):", "",
             "| input length | " + " | ".join(buckets) + " | all | drop, shortest to longest |",
             "|---|" + "---|" * (len(buckets) + 2)]
    for name in names:
        cols = [spread([run[i] for run in per_bucket[name]]) for i in range(len(buckets))]
        lines.append(f"| {name} | " + " | ".join(cols) + f" | {spread(total[name])} | {spread(drops[name])} |")
    claims = {"with attention the longest bucket is over 75 % and the drop under 25 points (the notebook's 'stays high')":
              sum(run[-1] > 75 and d < 25 for run, d in zip(per_bucket["attention"], drops["attention"])),
              "with attention the drop is under 10 points (the notebook's claim and its 'in your run' line)":
              sum(d < 10 for d in drops["attention"]),
              "without attention the drop is over 50 points (the notebook's 'collapse')":
              sum(d > 50 for d in drops["no attention"]),
              "without attention the longest bucket is under 5 %":
              sum(run[-1] < 5 for run in per_bucket["no attention"]),
              "every date model is above 95 % exact": sum(d > 95 for d in date_exact)}
    return "\n".join(lines + claims_table(claims, n))


def run_01(seeds: list[int], small: bool = False) -> str:
    from course_utils.rnn_seq2seq import build_seq2seq
    from course_utils.seq2seq_data import date_vocab, make_dates, make_string_task, string_vocab
    from course_utils.seq2seq_train import evaluate_by_length, train_seq2seq, translate

    n_train, n_test, date_steps, rev_steps = (200, 48, 3, 3) if small else (20_000, 1_200, 1_000, 800)
    dates, dvocab = make_dates(n_train, 24 if small else 1_000, seed=0), date_vocab()
    reverse, rvocab = make_string_task(n_train, n_test, task="reverse", min_len=2, max_len=24, seed=0), string_vocab()
    edges = [2, 6, 10, 14, 18, 22, 25]
    date_exact: list[float] = []
    exact: list[list[float]] = []
    char: list[list[float]] = []
    buckets: list[str] = []
    t0 = time.perf_counter()
    for seed in seeds:
        torch.manual_seed(seed)
        model = build_seq2seq(len(dvocab), attention=None, embed_size=32, hidden_size=64)
        train_seq2seq(model, dates["train"], dvocab, steps=date_steps, batch_size=64, lr=3e-3, seed=seed)
        pred = translate(model, dates["test"]["source"], dvocab)
        date_exact.append(100 * sum(p == t for p, t in zip(pred, dates["test"]["target"])) / len(pred))
        torch.manual_seed(seed)
        model = build_seq2seq(len(rvocab), attention=None, embed_size=32, hidden_size=64)
        train_seq2seq(model, reverse["train"], rvocab, steps=rev_steps, batch_size=64, lr=3e-3, seed=seed)
        rows, _ = evaluate_by_length(model, reverse["test"], rvocab, edges)
        buckets = [r["bucket"] for r in rows]
        exact.append([100 * r["exact"] for r in rows])
        char.append([100 * r["char"] for r in rows])
        print(f"seed {seed}: dates {date_exact[-1]:.1f}%; reversal exact {exact[-1][0]:.1f} -> {exact[-1][-1]:.1f}, "
              f"per character {char[-1][0]:.1f} -> {char[-1][-1]:.1f}", flush=True)
    n = len(seeds)
    lines = [f"Notebook 01, `cpu` profile settings, model seeds {seeds} (seed 0 is the notebook's run), "
             f"{torch.get_num_threads()} torch thread(s), {time.perf_counter() - t0:.0f} s in all. "
             "Mean ± sd [lowest-highest] over the seeds.", "",
             f"Dates without attention (section 6, {date_steps} steps, held-out dates), exact match (%): {spread(date_exact)}", "",
             f"Reversal without attention (section 8, {rev_steps} steps, 1,200 held-out strings of 2-24 letters):", "",
             "| input length | " + " | ".join(buckets) + " |", "|---|" + "---|" * len(buckets),
             "| exact match (%) | " + " | ".join(spread([run[i] for run in exact]) for i in range(len(buckets))) + " |",
             "| per-character (%) | " + " | ".join(spread([run[i] for run in char]) for i in range(len(buckets))) + " |"]
    claims = {"the date model is above 95 % exact": sum(d > 95 for d in date_exact),
              "the shortest bucket (2-5) is above 90 % exact": sum(run[0] > 90 for run in exact),
              "from 14 letters on, no string is exactly right": sum(all(v == 0 for v in run[3:]) for run in exact),
              "per-character accuracy falls at every bucket, shortest to longest": sum(
                  all(a > b for a, b in zip(run, run[1:])) for run in char),
              "the longest bucket's per-character accuracy is under 25 %": sum(run[-1] < 25 for run in char)}
    return "\n".join(lines + claims_table(claims, n))


def _cell(notebook: Path, key: str) -> str:
    return next(c.source for c in nbformat.read(str(notebook), as_version=4).cells if c.cell_type == "code" and key in c.source)


def run_03(seeds: list[int], small: bool = False) -> str:
    from course_utils.attention import SelfAttentionHead
    from course_utils.profiles import choose

    source = _cell(NB03, "class FlagModel")
    assert "torch.Generator().manual_seed(0)" in source
    res: dict[str, list] = {"loss": [], "first": [], "accuracy": []}
    t0 = time.perf_counter()
    steps = 0
    for seed in seeds:
        torch.manual_seed(seed)
        ns: dict = {"torch": torch, "choose": (lambda **k: 5) if small else choose, "device": torch.device("cpu"),
                    "SelfAttention": SelfAttentionHead, "print": lambda *a, **k: None}
        exec(compile(source.replace("torch.Generator().manual_seed(0)", f"torch.Generator().manual_seed({seed})"),
                     str(NB03), "exec"), ns)
        steps = ns["steps"]
        res["loss"].append(ns["losses"][-1])
        res["first"].append(next((i + 1 for i, v in enumerate(ns["losses"]) if v < 0.01), None))
        res["accuracy"].append(100 * ns["accuracy"])
        print(f"seed {seed}: final loss {res['loss'][-1]:.4f}, accuracy {res['accuracy'][-1]:.1f}%", flush=True)
    n = len(seeds)
    firsts = ", ".join("never" if f is None else str(f) for f in res["first"])
    lines = [f"Notebook 03, section 4 (the flagged digit), `cpu` profile settings ({steps} steps of batch 128), the course's "
             f"head, model and batch seeds {seeds} (the notebook's own run draws its initial weights from the session's seed "
             f"after the cells before it: one more seed), {torch.get_num_threads()} torch thread(s), "
             f"{time.perf_counter() - t0:.0f} s in all.", "",
             f"Final training loss: {', '.join(f'{v:.4f}' for v in res['loss'])} (largest {max(res['loss']):.4f}).", "",
             f"First step with a loss under 0.01: {firsts}.", "",
             f"Held-out accuracy (1,000 sequences, %): {spread(res['accuracy'])}.", "",
             "| claim | seeds where it held |", "|---|---|",
             f"| the final loss is under 0.01 | {sum(v < 0.01 for v in res['loss'])} of {n} |",
             f"| the held-out accuracy is above 99 % | {sum(a > 99 for a in res['accuracy'])} of {n} |",
             f"| the loss is under 0.01 within 400 steps | {sum(f is not None and f <= 400 for f in res['first'])} of {n} |"]
    return "\n".join(lines)


def run_04(seeds: list[int], small: bool = False) -> str:
    from course_utils.multihead import MultiHeadAttention
    from course_utils.profiles import choose

    source = _cell(NB04, "def train_heads")
    source = source[:source.index("train_steps =")]  # the definitions, not the notebook's own training
    ns: dict = {"torch": torch, "choose": choose, "device": torch.device("cpu"), "MultiHeadAttention": MultiHeadAttention,
                "plot_attention_grid": None, "plot_curves": None}
    exec(compile(source, str(NB04), "exec"), ns)
    steps = 5 if small else 400
    final: dict[int, list[float]] = {1: [], 2: []}
    sides: list[tuple[float, float]] = []
    opposite = 0
    t0 = time.perf_counter()
    T = ns["T_task"]
    shift = torch.arange(T)
    for seed in seeds:
        for n_heads in (1, 2):
            layer, losses = ns["train_heads"](n_heads, steps, seed=seed)
            final[n_heads].append(sum(losses[-20:]) / len(losses[-20:]))
        x, _ = ns["neighbour_batch"](1, torch.Generator().manual_seed(123))
        with torch.no_grad():
            _, w = layer(x, x, x)
        left = [w[0, i, shift, (shift - 1) % T].mean().item() for i in range(2)]
        right = [w[0, i, shift, (shift + 1) % T].mean().item() for i in range(2)]
        best = [max(a, b) for a, b in zip(left, right)]
        sides.append((min(best), max(best)))
        opposite += (left[0] > right[0]) != (left[1] > right[1])
        print(f"seed {seed}: loss h=1 {final[1][-1]:.4f}, h=2 {final[2][-1]:.5f}; heads' weight on their side "
              f"{best[0]:.2f}, {best[1]:.2f}", flush=True)
    n = len(seeds)
    ratios = [a / b for a, b in zip(final[1], final[2])]
    lines = [f"Notebook 04, section 5 (copy both neighbours), `cpu` profile settings ({steps} steps of batch 32), seeds {seeds} "
             f"(seed 0 is the notebook's run), {torch.get_num_threads()} torch thread(s), {time.perf_counter() - t0:.0f} s in all.", "",
             "| layer | final loss (mean of the last 20 steps), per seed | range |", "|---|---|---|",
             f"| h = 1 | {', '.join(f'{v:.4f}' for v in final[1])} | {min(final[1]):.4f}-{max(final[1]):.4f} |",
             f"| h = 2 | {', '.join(f'{v:.5f}' for v in final[2])} | {min(final[2]):.5f}-{max(final[2]):.5f} |", "",
             f"One head's loss over two heads', per seed: {', '.join(f'{r:,.0f}' for r in ratios)}.", "",
             "The two-head layer on one new sequence (the notebook's seed 123): the mean weight each head puts on the side "
             f"it prefers (t-1 or t+1), lower and higher head per seed: {', '.join(f'{a:.2f}/{b:.2f}' for a, b in sides)}.", "",
             "| claim | seeds where it held |", "|---|---|",
             f"| one head's loss is over 1,000 times two heads' | {sum(r > 1000 for r in ratios)} of {n} |",
             f"| one head's loss is between 0.4 and 0.5 (about half the target's variance, 1) | "
             f"{sum(0.4 <= v <= 0.5 for v in final[1])} of {n} |",
             f"| the two heads look to opposite sides | {opposite} of {n} |",
             f"| each head puts over 0.8 of its weight on its side | {sum(a > 0.8 for a, _ in sides)} of {n} |"]
    return "\n".join(lines)


def namespace_06(small: bool = False) -> dict:
    """Notebook 06's data cell, its settings cell and the cell that defines ``train``, run as the notebook runs them."""
    import torch.nn as nn
    from course_utils.profiles import choose, get_profile

    cells = [c.source for c in nbformat.read(str(NB06), as_version=4).cells if c.cell_type == "code"]
    wanted = ("def make_negation_data", "n_train, n_test = choose", "def train(positions")
    ns: dict = {"torch": torch, "nn": nn, "device": torch.device("cpu"), "choose": choose, "get_profile": get_profile,
                "print": lambda *a, **k: None}
    for key in wanted:
        source = next(c for c in cells if key in c)
        exec(compile(source, str(NB06), "exec"), ns)
        if key.startswith("n_train") and small:
            ns.update(steps=20, eval_every=10)
    ns["progress"] = lambda iterable, **_: iterable
    return ns


def run_06(seeds: list[int], small: bool = False) -> str:
    ns = namespace_06(small)
    variants = ("none", "sinusoidal", "learned", "rope")
    res: dict[str, dict[str, list]] = {v: {"train": [], "test": [], "first90": []} for v in variants}
    t0 = time.perf_counter()
    for seed in seeds:
        for variant in variants:
            model, curve = ns["train"](variant, seed=seed)
            res[variant]["train"].append(100 * ns["accuracy"](model, ns["X_train"], ns["y_train"]))
            res[variant]["test"].append(100 * ns["accuracy"](model, ns["X_test"], ns["y_test"]))
            first = next((ns["eval_every"] * (i + 1) for i, acc in enumerate(curve) if acc >= 0.9), None)
            res[variant]["first90"].append(first)
        print(f"seed {seed}: " + "; ".join(f"{v} {res[v]['test'][-1]:.1f}%" for v in variants), flush=True)
    n = len(seeds)
    lines = [f"Notebook 06, `cpu` profile settings ({ns['n_train']} training and {ns['n_test']} test sentences, "
             f"{ns['steps']} steps of batch 64), model seeds {seeds} (seed 0 is the notebook's run), "
             f"{torch.get_num_threads()} torch thread(s), {time.perf_counter() - t0:.0f} s in all. "
             "Accuracy (%), mean ± sd [lowest-highest] over the seeds; the first evaluation step at 90 % test accuracy per seed.", "",
             "| positions | train accuracy | test accuracy | first step at 90 % test |", "|---|---|---|---|"]
    for v in variants:
        firsts = ", ".join("never" if f is None else str(f) for f in res[v]["first90"])
        lines.append(f"| {v} | {spread(res[v]['train'])} | {spread(res[v]['test'])} | {firsts} |")
    lowest_with = [min(res[v]["test"][i] for v in variants[1:]) for i in range(n)]
    claims = {"without positions, test accuracy is within 5 points of chance (45-55 %)":
              sum(45 <= a <= 55 for a in res["none"]["test"]),
              "every model with positions is above 85 % test": sum(a > 85 for a in lowest_with),
              "RoPE reaches 90 % test first (or together with the first)": sum(
                  res["rope"]["first90"][i] is not None and all(
                      res[v]["first90"][i] is None or res["rope"]["first90"][i] <= res[v]["first90"][i]
                      for v in ("sinusoidal", "learned")) for i in range(n)),
              "sinusoidal ends above learned (the order changes with the seed)": sum(
                  s > lr for s, lr in zip(res["sinusoidal"]["test"], res["learned"]["test"]))}
    return "\n".join(lines + claims_table(claims, n))


def namespace_08() -> dict:
    """Notebook 08's recipe cell (``new_model``, ``train``, ``evaluate``, ``BATCH``), run as the notebook runs it."""
    import math

    import torch.nn.functional as F
    from course_utils import transformer_seq2seq as ts
    from course_utils.profiles import choose
    from course_utils.rnn_seq2seq import build_seq2seq
    from course_utils.transformer_seq2seq import TransformerSeq2Seq

    source = next(c.source for c in nbformat.read(str(NB08), as_version=4).cells
                  if c.cell_type == "code" and "def new_model" in c.source)
    ns = {"torch": torch, "math": math, "F": F, "ts": ts, "choose": choose, "build_seq2seq": build_seq2seq,
          "TransformerSeq2Seq": TransformerSeq2Seq, "device": torch.device("cpu"),
          "D_MODEL": 64, "WARMUP": 100, "FACTOR": 1.0, "print": lambda *a, **k: None}
    exec(compile(source, str(NB08), "exec"), ns)
    return ns


OUTPUT08 = ROOT / "benchmarks" / "results" / "outputs-cpu" / "08_encoder_decoder.txt"


def _recorded_08() -> tuple[int | None, dict[tuple[str, int], float]]:
    """The notebook's recorded ``cpu`` run (``course quoted --record``): the thread count its first line prints and the
    exact match (%) of every model and seed its section 7.2 printed ("transformer, seed 1: ... exact match 99.3%")."""
    import re

    if not OUTPUT08.exists():
        return None, {}
    text = OUTPUT08.read_text()
    threads = re.search(r"^device: cpu \((\d+) threads?\)", text, re.M)
    found = re.findall(r"^(.+), seed (\d+): \d+ steps of \d+ in \d+ s, exact match ([\d.]+)%$", text, re.M)
    return (int(threads.group(1)) if threads else None), {(name, int(seed)): float(v) for name, seed, v in found}


def _same_as_notebook_08(all_exact: dict[str, list[float]], seeds: list[int]) -> str:
    """Seed 0 is the notebook's run only if this process trains the notebook's models to the same digits: the table of
    2026-11-28 did not (seed 0's gap +7.5 against the notebook's +9.8 at one thread, same code; see
    docs/ranges/08_encoder_decoder.md). One line comparing every (model, seed) both runs trained."""
    threads, recorded = _recorded_08()
    if threads != torch.get_num_threads():
        return (f"Not compared with the notebook's recorded cpu run ({OUTPUT08.name}): it ran at {threads} thread(s), "
                f"this run at {torch.get_num_threads()}.")
    pairs = [(name, seed, float(f"{all_exact[name][i]:.1f}"), recorded[(name, seed)])
             for name in all_exact for i, seed in enumerate(seeds) if (name, seed) in recorded]
    differ = [f"{name} seed {seed}: {mine:.1f} here, {nb:.1f} there" for name, seed, mine, nb in pairs if mine != nb]
    if not pairs:
        return f"Not compared with the notebook's recorded cpu run ({OUTPUT08.name}): no model and seed in common."
    if not differ:
        return (f"Same as the notebook's recorded cpu run ({OUTPUT08.name}, {threads} thread(s)): all {len(pairs)} "
                "exact-match numbers both printed (model, seed) are equal to the digit.")
    return (f"NOT the notebook's run: {len(differ)} of {len(pairs)} exact-match numbers differ from the notebook's recorded "
            f"cpu run ({OUTPUT08.name}, {threads} thread(s)): " + "; ".join(differ)
            + ". Re-record the notebook's output or find what this process runs differently before quoting this table.")


def run_08(seeds: list[int], small: bool = False) -> str:
    import sacrebleu
    from course_utils import transformer_seq2seq as ts
    from course_utils.seq2seq_data import make_string_task, string_vocab
    from course_utils.seq2seq_train import translate
    from course_utils.translation import make_translation, translation_vocab

    ns = namespace_08()
    ctx, rnn, tf = ns["CTX_NAME"], ns["RNN_NAME"], ns["TF_NAME"]
    vocab = string_vocab()
    n_train, n_test, examples, tr_examples = (200, 30, 192, 128) if small else (20_000, 600, 16_000, 12_800)
    reverse = make_string_task(n_train, n_test, task="reverse", min_len=2, max_len=16, seed=0)
    edges = [2, 5, 8, 11, 14, 17]
    longer = make_string_task(1, 20 if small else 200, task="reverse", min_len=17, max_len=24, seed=1)["test"]
    far_edges = list(range(17, 26, 2))
    pairs, words = make_translation(300 if small else 20_000, 20 if small else 500, lang="pt", seed=0), translation_vocab("pt")
    names = (ctx, rnn, tf)
    res: dict[str, dict[str, list]] = {n: {"all": [], "buckets": [], "far_char": [], "tr_exact": [], "tr_bleu": []}
                                       for n in names}
    buckets: list[str] = []
    far_buckets: list[str] = []
    t0 = time.perf_counter()
    for seed in seeds:
        for name in names:
            model = ns["new_model"](name, len(vocab), seed)
            ns["train"](name, model, reverse["train"], vocab, steps=examples // ns["BATCH"][name], seed=seed)
            rows, _ = ns["evaluate"](name, model, reverse["test"], vocab, edges)
            far, _ = ns["evaluate"](name, model, longer, vocab, far_edges)
            buckets, far_buckets = [r["bucket"] for r in rows], [r["bucket"] for r in far]
            r = res[name]
            r["all"].append(overall(rows))
            r["buckets"].append([100 * row["exact"] for row in rows])
            r["far_char"].append([100 * row["char"] for row in far])
            if name == ctx:
                continue
            model = ns["new_model"](name, len(words), seed)
            ns["train"](name, model, pairs["train"], words, steps=tr_examples // ns["BATCH"][name], seed=seed)
            src, refs = pairs["test"]["source"], list(pairs["test"]["target"])
            hyps = translate(model, src, words) if name == rnn else ts.translate_transformer(model, src, words)
            r["tr_exact"].append(100 * sum(h == t for h, t in zip(hyps, refs)) / len(refs))
            r["tr_bleu"].append(sacrebleu.corpus_bleu(hyps, [refs]).score)
        print(f"seed {seed}: " + "; ".join(f"{n} {res[n]['all'][-1]:.1f}%" for n in names)
              + f"; translation exact {res[rnn]['tr_exact'][-1]:.1f} / {res[tf]['tr_exact'][-1]:.1f}", flush=True)
    n = len(seeds)
    gaps = [t - r for t, r in zip(res[tf]["all"], res[rnn]["all"])]
    ranges = {name: max(res[name]["all"]) - min(res[name]["all"]) for name in (rnn, tf)}
    same = ("Not compared with the notebook's recorded run (--small: other sizes)." if small
            else _same_as_notebook_08({name: res[name]["all"] for name in names}, seeds))
    print(same, flush=True)
    lines = [f"Notebook 08, `cpu` profile settings, model seeds {seeds} (seed 0 is the notebook's seed), "
             f"{torch.get_num_threads()} torch thread(s), {time.perf_counter() - t0:.0f} s in all. "
             "Mean ± sd [lowest-highest] over the seeds.", "", same, "",
             "Section 7.2: exact match (%) on 600 held-out strings, 16,000 training strings per model:", "",
             "| model | all lengths | " + " | ".join(buckets) + " |", "|---|---|" + "---|" * len(buckets)]
    for name in names:
        cols = [spread([run[i] for run in res[name]["buckets"]]) for i in range(len(buckets))]
        lines.append(f"| {name} | {spread(res[name]['all'])} | " + " | ".join(cols) + " |")
    lines += ["", f"Transformer minus RNN + attention, seed by seed: {', '.join(f'{g:+.1f}' for g in gaps)} points; "
              f"range over seeds: RNN + attention {ranges[rnn]:.1f}, transformer {ranges[tf]:.1f}.", "",
              "Section 7.3: per-character accuracy (%) on 200 strings of 17-24 letters (never seen in training):", "",
              "| model | " + " | ".join(far_buckets) + " |", "|---|" + "---|" * len(far_buckets)]
    for name in names:
        cols = [spread([run[i] for run in res[name]["far_char"]]) for i in range(len(far_buckets))]
        lines.append(f"| {name} | " + " | ".join(cols) + " |")
    lines += ["", "Section 10: English -> Portuguese, 12,800 training sentences per model, 500 test sentences:", "",
              "| model | exact match (%) | BLEU |", "|---|---|---|"]
    for name in (rnn, tf):
        lines.append(f"| {name} | {spread(res[name]['tr_exact'])} | {spread(res[name]['tr_bleu'])} |")
    claims = {
        "the transformer is ahead of the RNN + attention (7.2, all lengths)": sum(g > 0 for g in gaps),
        "the RNN without attention is at 0 % from 8 letters on (7.2)":
            sum(all(v == 0 for v in run[2:]) for run in res[ctx]["buckets"]),
        "on 17-18 letters the RNN + attention keeps more characters in place than the transformer (7.3)":
            sum(a > b for a, b in zip((run[0] for run in res[rnn]["far_char"]), (run[0] for run in res[tf]["far_char"]))),
        "on 23-24 letters the transformer keeps under 15 % of characters in place (7.3)":
            sum(run[-1] < 15 for run in res[tf]["far_char"]),
        "both translators are above 90 % exact (10)":
            sum(a > 90 and b > 90 for a, b in zip(res[rnn]["tr_exact"], res[tf]["tr_exact"])),
    }
    return "\n".join(lines + claims_table(claims, n))


def _swap(source: str, old: str, new: str) -> str:
    """``source`` with ``old`` (there exactly once, or the notebook changed under the benchmark) replaced by ``new``."""
    assert source.count(old) == 1, f"the notebook's cell no longer holds {old!r} exactly once"
    return source.replace(old, new)


def run_12(seeds: list[int], small: bool = False) -> str:
    from course_utils.corpus import CharTokenizer, corpus_splits
    from course_utils.gpt import GPTConfig, lm_batch, train_lm
    from course_utils.moe import dense_gpt, expert_load, ffn_parameters, moe_gpt, moe_layers
    from course_utils.profiles import choose
    from course_utils.vit import ViT, ViTConfig, digits_splits, digits_tensors, position_similarity, train_classifier

    pick = (lambda **k: k["ci"]) if small else choose  # --small: the ci profile's sizes
    cpu = torch.device("cpu")
    quiet = {"torch": torch, "choose": pick, "device": cpu, "print": lambda *a, **k: None}
    digits = digits_splits(test_fraction=0.25, seed=0)  # section 1's split, the same for every seed
    (x_train, y_train), (x_test, y_test) = digits_tensors(digits["train"], cpu), digits_tensors(digits["test"], cpu)
    vit_cell = _cell(NB12, "vit_config = ViTConfig(")
    vit: dict[str, list] = {"params": [], "early": [], "final": [], "first95": [], "row": [], "col": [], "neither": []}
    epochs = early = 0
    t0 = time.perf_counter()
    for seed in seeds:
        source = _swap(_swap(vit_cell, "torch.manual_seed(0)", f"torch.manual_seed({seed})"), "seed=0)", f"seed={seed})")
        ns = dict(quiet, ViTConfig=ViTConfig, ViT=ViT, train_classifier=train_classifier, x_train=x_train,
                  y_train=y_train, x_test=x_test, y_test=y_test)
        exec(compile(source, str(NB12), "exec"), ns)
        acc, epochs = [100 * a for a in ns["vit_history"]["test_acc"]], ns["epochs"]
        early = min(6, epochs)
        vit["params"].append(sum(p.numel() for p in ns["vit"].parameters()))
        vit["early"].append(acc[early - 1])
        vit["final"].append(acc[-1])
        vit["first95"].append(next((i + 1 for i, a in enumerate(acc) if a >= 95), None))
        with torch.no_grad():  # section 4: pairs of patch positions in the same row, the same column, neither
            sim = position_similarity(ns["vit"].pos_embed[0, 1:].cpu())
        side = ns["vit_config"].image_size // ns["vit_config"].patch_size
        r, c = torch.arange(side * side) // side, torch.arange(side * side) % side
        same_r, same_c = r[:, None] == r[None, :], c[:, None] == c[None, :]
        different = ~torch.eye(side * side, dtype=torch.bool)
        vit["row"].append(sim[same_r & different].mean().item())
        vit["col"].append(sim[same_c & different].mean().item())
        vit["neither"].append(sim[~same_r & ~same_c].mean().item())
        print(f"seed {seed}: ViT test accuracy {vit['early'][-1]:.1f}% after {early} epochs, {vit['final'][-1]:.1f}% "
              f"after {epochs}", flush=True)
    vit_seconds = time.perf_counter() - t0

    # Section 6: the notebook's own cell, over these seeds, keeping every seed's models (not only seed 0's)
    source = _swap(_cell(NB12, "builders = {"), "SEEDS = choose(ci=[0], cpu=[0, 1, 2])", f"SEEDS = {list(seeds)!r}")
    source = _swap(_swap(source, "if seed == 0:", "if True:"), "models[name], histories[name]", "models[seed, name], histories[seed, name]")
    ns = dict(quiet, corpus_splits=corpus_splits, CharTokenizer=CharTokenizer, GPTConfig=GPTConfig, train_lm=train_lm,
              dense_gpt=dense_gpt, moe_gpt=moe_gpt, ffn_parameters=ffn_parameters)
    t0 = time.perf_counter()
    exec(compile(source, str(NB12), "exec"), ns)
    names, val_losses, steps = list(ns["builders"]), ns["val_losses"], ns["gpt_steps"]
    dense, wide, balanced, unbalanced = names
    routers = {"balanced": balanced, "no balancing": unbalanced}
    factors = (1.0, 1.25)
    # the notebook's validation batch (section 6's figures) and its capacity sweep, at the two factors the question asks for
    probe_x, _ = lm_batch(ns["val_data"], ns["gpt_config"].block_size, 32, torch.Generator().manual_seed(7), cpu)
    load: dict[str, list[torch.Tensor]] = {r: [] for r in routers}
    dropped: dict[str, dict[float, list[float]]] = {r: {f: [] for f in factors} for r in routers}
    for i, seed in enumerate(seeds):
        for router, name in routers.items():
            model = ns["models"][seed, name]
            model.eval()
            with torch.no_grad():
                model(probe_x)
                load[router].append(100 * expert_load(model))  # (layers, E), % of the assignments
                for factor in factors:
                    for moe in moe_layers(model):
                        moe.capacity_factor = factor
                    model(probe_x)
                    dropped[router][factor].append(100 * sum(m.dropped for m in moe_layers(model)) / len(moe_layers(model)))
        print(f"seed {seed}: " + "; ".join(f"{n} {val_losses[n][i]:.3f}" for n in names)
              + "; dropped at 1.25: " + ", ".join(f"{r} {dropped[r][1.25][-1]:.1f}%" for r in routers), flush=True)
    gpt_seconds = time.perf_counter() - t0
    n = len(seeds)

    def shares(router: str, i: int) -> str:
        per_layer = load[router][i]
        return "; ".join(f"layer {layer} " + " ".join(f"{v:.0f}" for v in per_layer[layer].tolist())
                         for layer in range(per_layer.size(0)))

    firsts = ", ".join("never" if f is None else str(f) for f in vit["first95"])
    cfg = ns["gpt_config"]
    lines = [f"Notebook 12, `cpu` profile settings, model seeds {seeds} (seed 0 is the notebook's run; the digits' split "
             f"keeps seed 0), {torch.get_num_threads()} torch thread(s). Mean ± sd [lowest-highest] over the seeds.", "",
             f"Section 3, the ViT ({vit['params'][0]:,} parameters, {epochs} epochs of batch 32, 450 test digits; "
             f"{vit_seconds:.0f} s in all):", "",
             "| seed | " + " | ".join(map(str, seeds)) + " | over the seeds |", "|---|" + "---|" * (n + 1),
             *([f"| test accuracy after {early} epochs (%) | " + " | ".join(f"{v:.1f}" for v in vit["early"])
                + f" | {spread(vit['early'])} |"] if early < epochs else []),
             f"| test accuracy after {epochs} epochs (%) | " + " | ".join(f"{v:.1f}" for v in vit["final"])
             + f" | {spread(vit['final'])} |",
             "| first epoch at 95 % test | " + firsts.replace(", ", " | ") + " | |",
             "| position similarity, same row | " + " | ".join(f"{v:.2f}" for v in vit["row"]) + " | |",
             "| position similarity, same column | " + " | ".join(f"{v:.2f}" for v in vit["col"]) + " | |",
             "| position similarity, neither | " + " | ".join(f"{v:.2f}" for v in vit["neither"]) + " | |", "",
             f"Section 6, four GPTs ({steps} steps of batch 16, d = {cfg.d_model}, {cfg.n_layer} blocks, {cfg.block_size} "
             f"characters of context; {gpt_seconds:.0f} s in all). Validation loss (nats per character):", "",
             "| model | " + " | ".join(f"seed {s}" for s in seeds) + " | over the seeds |", "|---|" + "---|" * (n + 1)]
    lines += [f"| {name} | " + " | ".join(f"{v:.3f}" for v in val_losses[name]) + f" | {spread3(val_losses[name])} |"
              for name in names]
    gaps = {"balanced MoE minus dense": [m - d for m, d in zip(val_losses[balanced], val_losses[dense])],
            "balanced MoE minus wide": [m - w for m, w in zip(val_losses[balanced], val_losses[wide])],
            "MoE without minus with balancing": [u - b for u, b in zip(val_losses[unbalanced], val_losses[balanced])]}
    lines += [f"| {name} | " + " | ".join(f"{v:+.3f}" for v in values) + f" | {spread3(values)} |" for name, values in gaps.items()]
    lines += ["", f"On the notebook's validation batch (32 x {cfg.block_size} characters): share of the assignments per expert (%), per "
              "layer, and the share dropped (%, mean of the two layers) at capacity factors 1.0 and 1.25:", "",
              "| seed | router | share per expert | least and most loaded | dropped at 1.0 | dropped at 1.25 |",
              "|---|---|---|---|---|---|"]
    for i, seed in enumerate(seeds):
        for router in routers:
            lines.append(f"| {seed} | {router} | {shares(router, i)} | {load[router][i].min():.0f}-{load[router][i].max():.0f} "
                         f"| {dropped[router][1.0][i]:.1f} | {dropped[router][1.25][i]:.1f} |")
    for router in routers:
        lows, highs = [float(x.min()) for x in load[router]], [float(x.max()) for x in load[router]]
        lines.append(f"| all | {router} | | least {min(lows):.0f}-{max(lows):.0f}, most {min(highs):.0f}-{max(highs):.0f} "
                     f"| {spread(dropped[router][1.0])} | {spread(dropped[router][1.25])} |")
    claims = {f"the ViT is above 95 % test after {epochs} epochs": sum(a > 95 for a in vit["final"]),
              f"the ViT reaches 95 % test within two thirds of the epochs ({2 * epochs // 3})":
              sum(f is not None and f <= 2 * epochs // 3 for f in vit["first95"]),
              "a row pattern in the position embeddings (same row above neither by 0.05 or more, the notebook's test)":
              sum(r >= x + 0.05 for r, x in zip(vit["row"], vit["neither"])),
              "a column pattern (same column above neither by 0.05 or more)":
              sum(c >= x + 0.05 for c, x in zip(vit["col"], vit["neither"])),
              "the balanced MoE is below the dense model (equal active parameters)": sum(g < 0 for g in gaps["balanced MoE minus dense"]),
              "the balanced MoE is below the wide model (equal total parameters)": sum(g < 0 for g in gaps["balanced MoE minus wide"]),
              "the MoE without balancing is behind the balanced one": sum(g > 0 for g in gaps["MoE without minus with balancing"]),
              "with balancing every expert gets 20-30 % of the assignments":
              sum(bool(x.min() >= 20 and x.max() <= 30) for x in load["balanced"]),
              "with balancing nothing is dropped at capacity factor 1.25": sum(v == 0 for v in dropped["balanced"][1.25]),
              "without balancing more is dropped than with it, at 1.0 and at 1.25": sum(
                  all(dropped["no balancing"][f][i] > dropped["balanced"][f][i] for f in factors) for i in range(n))}
    return "\n".join(lines + claims_table(claims, n))

NB07 = ROOT / "solutions" / "07_transformer_block" / "07_transformer_block.ipynb"


def _data_07(pick: Callable[..., object]) -> tuple[Any, Any]:
    """Notebook 07's sentiment data set (its own line, seed 0: the same for every model seed) and its vocabulary."""
    from course_utils.sentiment_data import WordVocab, make_sentiment

    data_line = next(line for line in _cell(NB07, "data = make_sentiment(").splitlines() if line.startswith("data = make_sentiment("))
    ns: dict = {"make_sentiment": make_sentiment, "choose": pick}
    exec(compile(data_line, str(NB07), "exec"), ns)
    return ns["data"], WordVocab.from_texts(ns["data"]["train"]["text"])


def run_07(seeds: list[int], small: bool = False) -> str:
    from course_utils.profiles import choose
    from course_utils.sentiment_data import bag_of_words_accuracy
    from course_utils.sentiment_models import RUNGS, AttentionClassifier, train_sentiment_classifier

    pick = (lambda **k: k["ci"]) if small else choose  # --small: the ci profile's sizes
    cpu = torch.device("cpu")
    data, vocab = _data_07(pick)
    bow = {split: 100 * bag_of_words_accuracy(data["train"], data[split]) for split in ("test", "contrast")}
    ladder = _cell(NB07, "ladder_epochs = choose(")
    ladder = ladder[: ladder.index("\nbow = ")]  # the training loop; the bag of words has no seed
    splits = ("train", "test", "contrast")
    acc: dict[str, dict[str, list[float]]] = {}
    t0 = time.perf_counter()
    for seed in seeds:
        # the model seed draws the initial weights and the order of the batches
        source = _swap(_swap(ladder, "torch.manual_seed(0)", f"torch.manual_seed({seed})"), "device=device)",
                       f"device=device, seed={seed})")
        ns = {"torch": torch, "choose": pick, "RUNGS": RUNGS, "AttentionClassifier": AttentionClassifier, "vocab": vocab,
              "data": data, "train_sentiment_classifier": train_sentiment_classifier, "device": cpu,
              "print": lambda *a, **k: None}
        exec(compile(source, str(NB07), "exec"), ns)
        for name, r in ns["results"].items():
            for split in splits:
                acc.setdefault(name, {s: [] for s in splits})[split].append(100 * r.accuracy[split])
        print(f"seed {seed}: " + "; ".join(f"{name} test {a['test'][-1]:.1f}%, contrast {a['contrast'][-1]:.1f}%"
                                            for name, a in acc.items()), flush=True)
    n, epochs = len(seeds), ns["ladder_epochs"]
    names = list(acc)
    q1, q2, q3, q4 = names
    lines = [f"Notebook 07, section 7 (the AMAL lab's ladder), `cpu` profile settings ({epochs} epochs of batch 64 per model, "
             f"{len(data['train'])} training sentences, the notebook's data set), model seeds {seeds} (initial weights and batch "
             f"order; seed 0 is the notebook's run), {torch.get_num_threads()} torch thread(s), {time.perf_counter() - t0:.0f} s "
             "in all. Accuracy (%), mean ± sd [lowest-highest] over the seeds.", "",
             f"Bag of words (no seed): test {bow['test']:.1f}, contrast {bow['contrast']:.1f}.", "",
             "| model | train | test | contrast |", "|---|---|---|---|"]
    lines += [f"| {name} | " + " | ".join(spread(acc[name][s]) for s in splits) + " |" for name in names]
    lines += ["", "| model | " + " | ".join(f"seed {s}: train / test / contrast" for s in seeds) + " |", "|---|" + "---|" * n]
    lines += [f"| {name} | " + " | ".join(" / ".join(f"{acc[name][s][i]:.1f}" for s in splits) for i in range(n)) + " |"
              for name in names]
    claims = {"Q1 and Q2 are at exactly 50 % on contrast": sum(acc[q1]["contrast"][i] == 50 and acc[q2]["contrast"][i] == 50
                                                              for i in range(n)),
              "Q2 fits the training set better than Q1": sum(acc[q2]["train"][i] > acc[q1]["train"][i] for i in range(n)),
              "Q3 is above 95 % on test and contrast": sum(acc[q3]["test"][i] > 95 and acc[q3]["contrast"][i] > 95
                                                          for i in range(n)),
              "Q4 matches or beats Q3 on contrast (within 1 point or above)": sum(acc[q4]["contrast"][i] >= acc[q3]["contrast"][i] - 1
                                                                                 for i in range(n))}
    return "\n".join(lines + claims_table(claims, n))


def run_07w(seeds: list[int], small: bool = False) -> str:
    """Notebook 07, section 6: six blocks trained with Adam at lr 3e-3, post-LN with and without warm-up and
    pre-LN, from the notebook's own cell (its data set; the seed draws the weights and the batch order)."""
    from course_utils.profiles import choose
    from course_utils.sentiment_models import AttentionClassifier, train_sentiment_classifier

    pick = (lambda **k: k["ci"]) if small else choose
    data, vocab = _data_07(pick)
    cell = _cell(NB07, "warm_epochs, warmup_steps = choose(")
    cell = cell[: cell.index("\ndef smooth(")]  # the training loop, not the figure and the verdicts after it
    loss: dict[str, list[float]] = {}
    test: dict[str, list[float]] = {}
    t0 = time.perf_counter()
    for seed in seeds:
        source = _swap(_swap(cell, "torch.manual_seed(0)", f"torch.manual_seed({seed})"), "warmup_steps=warmup, device=device",
                       f"warmup_steps=warmup, device=device, seed={seed}")
        ns = {"torch": torch, "choose": pick, "AttentionClassifier": AttentionClassifier, "vocab": vocab, "data": data,
              "train_sentiment_classifier": train_sentiment_classifier, "device": torch.device("cpu"),
              "LiveCurve": None}
        exec(compile(source, str(NB07), "exec"), ns)
        for name, r in ns["warmup_runs"].items():
            loss.setdefault(name, []).append(sum(r.losses[-10:]) / 10)
            test.setdefault(name, []).append(100 * r.accuracy["test"])
        print(f"seed {seed}: " + "; ".join(f"{name} loss {loss[name][-1]:.3f} test {test[name][-1]:.1f}%" for name in loss),
              flush=True)
    n, names = len(seeds), list(loss)
    post, warm, pre = names   # the notebook's order: post-LN, post-LN with warm-up, pre-LN
    lines = [f"Notebook 07, section 6 (warm-up), `cpu` profile settings ({ns['warm_epochs']} epochs, warm-up "
             f"{ns['warmup_steps']} steps, 6 blocks, Adam lr 3e-3, the notebook's data set), model seeds {seeds} (initial "
             f"weights and batch order; seed 0 is the notebook's run), {torch.get_num_threads()} torch thread(s), "
             f"{time.perf_counter() - t0:.0f} s in all. Final training loss (mean of the last 10 batches; chance is "
             "ln 2 = 0.693) and test accuracy (%), mean ± sd [lowest-highest] over the seeds.", "",
             "| model | final loss | test accuracy |", "|---|---|---|"]
    lines += [f"| {name} | {spread3(loss[name])} | {spread(test[name])} |" for name in names]
    lines += ["", "| model | " + " | ".join(f"seed {s}: loss / test" for s in seeds) + " |", "|---|" + "---|" * n]
    lines += [f"| {name} | " + " | ".join(f"{loss[name][i]:.3f} / {test[name][i]:.1f}" for i in range(n)) + " |"
              for name in names]
    claims = {"post-LN without warm-up stays at or near chance (test below 60 %)": sum(test[post][i] < 60 for i in range(n)),
              "pre-LN learns (test above 80 %)": sum(test[pre][i] > 80 for i in range(n)),
              "post-LN with warm-up ends above post-LN without it (test)": sum(test[warm][i] > test[post][i] for i in range(n)),
              "post-LN with warm-up reaches pre-LN (test within 2 points)": sum(test[warm][i] >= test[pre][i] - 2
                                                                                 for i in range(n))}
    return "\n".join(lines + claims_table(claims, n))


NB09 = ROOT / "solutions" / "09_bert" / "09_bert.ipynb"


class _NoCurve:
    """A stand-in for LiveCurve: the benchmark draws nothing."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def add(self, *args: object, **kwargs: object) -> None:
        pass

    def close(self) -> None:
        pass


def run_09(seeds: list[int], small: bool = False) -> str:
    """Notebook 09 from its own cells (the exercises replaced by the course's functions): the MLM's polarity probe
    (section 5) and the fine-tuning learning curve (section 6) for each pretraining seed, with the notebook's
    own fine-tuning seeds."""
    import matplotlib

    matplotlib.use("Agg")
    from course_utils.profiles import choose

    pick = (lambda **k: k["ci"]) if small else choose
    not_done = "def {0}(*args, **kwargs):\n    raise NotImplementedError\n"
    prelude = "".join(not_done.format(f) for f in ("mask_tokens", "bert_embeddings", "token_classification_loss",
                                                   "mean_pool", "convert_hf_names"))
    setup = _swap(_cell(NB09, "device = start(seed=0)"), "device = start(seed=0)", "device = torch.device('cpu')")
    data_cells = [_cell(NB09, "splits = corpus_splits()"), _cell(NB09, "TAGS = [\"O\""), _cell(NB09, "tokenizer = WordPieceTokenizer("),
                  _cell(NB09, "mask_tokens_ = yours_or_course("), _cell(NB09, "def pretraining_examples(")]
    pretrain = _swap(_cell(NB09, "def mlm_batch("), "from course_utils.progress import LiveCurve, progress", "")
    probe, fine = _cell(NB09, "def adjective_mass("), _cell(NB09, "def fine_tune(")
    quiet = {"print": lambda *a, **k: None, "LiveCurve": _NoCurve, "progress": lambda iterable, **kwargs: iterable}
    os.environ["NBGRADER_EXECUTION"] = "1"
    per: list[dict] = []
    t0 = time.perf_counter()
    for seed in seeds:
        ns: dict = {}
        exec(compile(setup + "\n" + prelude, str(NB09), "exec"), ns)
        ns.update(choose=pick, **quiet)
        for source in data_cells:
            exec(compile(source, str(NB09), "exec"), ns)
        # the pretraining seed draws the MLM's weights, its masking and the order of its batches; data and vocabulary are fixed
        source = _swap(pretrain, "torch.manual_seed(0)\nmlm =", f"torch.manual_seed({seed})\nmlm =")
        source = _swap(source, "g = torch.Generator().manual_seed(0)\norder_rng = random.Random(0)",
                       f"g = torch.Generator().manual_seed({seed})\norder_rng = random.Random({seed})")
        exec(compile(source, str(NB09), "exec"), ns)
        exec(compile(probe, str(NB09), "exec"), ns)
        exec(compile(fine, str(NB09), "exec"), ns)
        runs, counts = ns["runs"], ns["label_counts"]
        per.append({"seed": seed, "mlm": ns["mlm_val_loss"], "masses": ns["masses"], "same": ns["same"],
                    "opposite": ns["opposite"], "runs": runs, "counts": counts, "ft_seeds": list(ns["ft_seeds"]),
                    "splits": list(ns["eval_sets"]), "steps": ns["steps"], "ft_steps": ns["ft_steps"]})
        print(f"pretraining seed {seed}: MLM validation loss {ns['mlm_val_loss']:.2f}; " + "; ".join(
            f"{n} labels test {100 * statistics.mean(r['test'] for r in runs['our MLM-pretrained'][n]):.1f} vs "
            f"{100 * statistics.mean(r['test'] for r in runs['from scratch'][n]):.1f}" for n in counts), flush=True)
    n_seeds, counts, splits = len(seeds), per[0]["counts"], per[0]["splits"]
    pre, scratch = "our MLM-pretrained", "from scratch"

    def values(name: str, n: int, split: str) -> list[float]:   # every (pretraining seed, fine-tuning seed) pair
        return [100 * r[split] for run in per for r in run["runs"][name][n]]

    def gaps(n: int, split: str) -> list[float]:
        return [100 * (p[split] - q[split]) for run in per for p, q in zip(run["runs"][pre][n], run["runs"][scratch][n])]

    lines = [f"Notebook 09, sections 5 and 6, `cpu` profile settings (MLM pretraining {per[0]['steps']} steps; fine-tuning "
             f"{per[0]['ft_steps']} updates per point with the notebook's fine-tuning seeds {per[0]['ft_seeds']}), pretraining "
             f"seeds {seeds} (the MLM's weights, masking and batch order; seed 0 is the notebook's run; the data and the "
             f"vocabulary are the notebook's), {torch.get_num_threads()} torch thread(s), {time.perf_counter() - t0:.0f} s in all.",
             "", "Section 5, the MLM's polarity probe, one row per pretraining seed: validation MLM loss, the probability of the "
             "unseen positive / negative adjectives after each context, and the mean cosine of an unseen adjective with the "
             "labelled adjectives of the same and of the opposite polarity.", "",
             "| seed | MLM loss | loved it | hated it | great, brilliant and | awful, dull and | same / opposite cosine |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {run['seed']} | {run['mlm']:.2f} | " + " | ".join(f"{p:.3f} / {q:.3f}" for p, q in run["masses"])
              + f" | {run['same']:.2f} / {run['opposite']:.2f} |" for run in per]
    lines += ["", f"Section 6, accuracy (%) over every pair of pretraining seed and fine-tuning seed ({len(gaps(counts[0], 'test'))} "
              "runs per point; the from-scratch encoder does not depend on the pretraining seed, so its nine are its three "
              "fine-tuning seeds three times), mean ± sd [lowest-highest]; the gain is pretrained minus from scratch with the "
              "same seeds.", "",
              "| labels | split | from scratch | pretrained | gain (points) |", "|---|---|---|---|---|"]
    for n in counts:
        for split in splits:
            lines.append(f"| {n} | {split} | {spread(values(scratch, n, split))} | {spread(values(pre, n, split))} | "
                         f"{spread(gaps(n, split))} |")
    lines += ["", "Mean gain on test (points) per pretraining seed, over its fine-tuning seeds:", "",
              "| labels | " + " | ".join(f"seed {run['seed']}" for run in per) + " |", "|---|" + "---|" * n_seeds]
    for n in counts:
        lines.append(f"| {n} | " + " | ".join(
            f"{statistics.mean(100 * (p['test'] - q['test']) for p, q in zip(run['runs'][pre][n], run['runs'][scratch][n])):+.1f}"
            for run in per) + " |")

    def seed_mean(run: dict, name: str, n: int, split: str) -> float:
        return statistics.mean(100 * r[split] for r in run["runs"][name][n])

    few, most = counts[0], counts[-1]
    claims = {
        "the MLM's probe shows no polarity: same- and opposite-polarity cosines within 0.05": sum(
            abs(run["same"] - run["opposite"]) < 0.05 for run in per),
        f"{few} labels: the pretrained encoder is not ahead on test (mean over fine-tuning seeds)": sum(
            seed_mean(run, pre, few, "test") <= seed_mean(run, scratch, few, "test") for run in per),
        f"{most} labels: both encoders at 95 % or more on test": sum(
            seed_mean(run, pre, most, "test") >= 95 and seed_mean(run, scratch, most, "test") >= 95 for run in per),
        f"{most} labels: the gap on test is under 2 points": sum(
            abs(seed_mean(run, pre, most, "test") - seed_mean(run, scratch, most, "test")) < 2 for run in per)}
    for n in counts[1:-1]:
        claims[f"{n} labels: the pretrained encoder is ahead on test (mean over fine-tuning seeds)"] = sum(
            seed_mean(run, pre, n, "test") > seed_mean(run, scratch, n, "test") for run in per)
        claims[f"{n} labels: ahead or level (within 1 point) in every fine-tuning seed"] = sum(
            all(100 * (p["test"] - q["test"]) >= -1 for p, q in zip(run["runs"][pre][n], run["runs"][scratch][n]))
            for run in per)
    for split in splits[2:]:
        claims[f"{split}: both encoders within 10 points of chance at every size"] = sum(
            all(abs(seed_mean(run, name, n, split) - 50) <= 10 for name in (pre, scratch) for n in counts) for run in per)
    return "\n".join(lines + claims_table(claims, n_seeds))


NB10 = ROOT / "solutions" / "10_gpt" / "10_gpt.ipynb"


def _same_init_10(setup: str) -> None:
    """Seed 0 is the notebook's run only if the notebook's answer to exercise 2 (``init_gpt2_``) draws the same initial
    weights as the course's ``gpt2_init_``, which this benchmark runs (the notebook falls back to it too): the same
    distribution drawn in another order (say, the residual projections drawn twice) gives another model at the same seed."""
    from course_utils.gpt import GPT, GPTConfig, gpt2_init_

    ns: dict = {"print": lambda *a, **k: None}
    exec(compile(setup + "\n" + _cell(NB10, "def init_gpt2_("), str(NB10), "exec"), ns)
    config = GPTConfig(vocab_size=50, block_size=16, n_layer=2, n_head=4, d_model=32)
    torch.manual_seed(0)
    answer = ns["init_gpt2_"](GPT(config)).state_dict()
    torch.manual_seed(0)
    course = gpt2_init_(GPT(config), config.n_layer).state_dict()
    assert all(torch.equal(answer[k], course[k]) for k in course), (
        "notebook 10's init_gpt2_ draws other initial weights than course_utils.gpt.gpt2_init_: the benchmark's seed 0 "
        "would not be the notebook's run")


def run_10(seeds: list[int], small: bool = False) -> str:
    from course_utils.profiles import choose

    pick = (lambda **k: k["ci"]) if small else choose  # --small: the ci profile's sizes
    not_done = "def {0}(*args, **kwargs):\n    raise NotImplementedError\n"  # the exercises: the course's versions run
    prelude = "".join(not_done.format(f) for f in ("next_token_batch", "init_gpt2_", "train_step", "last_token_pool"))
    setup = _swap(_cell(NB10, "from course_utils.session import start"), "device = start(seed=0)", "device = torch.device('cpu')")
    cells = [_cell(NB10, "splits = shakespeare_splits("), _cell(NB10, "bigram = bigram_log_probs(")]
    model_cell, train_cell = _cell(NB10, "config = GPTConfig("), _cell(NB10, "gpt_val = history[")
    ft_cell = _swap(_cell(NB10, "ft_seeds = choose("), "from course_utils.progress import progress",
                    "progress = lambda iterable, **kwargs: iterable")
    later = [_cell(NB10, "def label_log_likelihood"), _cell(NB10, "n_pairs, P = choose(")]
    _same_init_10(setup)
    per: list[dict] = []
    os.environ["NBGRADER_EXECUTION"] = "1"  # no progress bars (train_lm's): the notebook's numbers do not depend on them
    t0 = time.perf_counter()
    for seed in seeds:
        ts = time.perf_counter()
        ns: dict = {"print": lambda *a, **k: None}
        exec(compile(setup + "\n" + prelude, str(NB10), "exec"), ns)
        ns.update(choose=pick, print=lambda *a, **k: None)
        for source in cells:
            exec(compile(source, str(NB10), "exec"), ns)
        # the model seed draws the initial weights and the pretraining batches; the data and the bigram are fixed
        exec(compile(_swap(model_cell, "torch.manual_seed(0)\nmodel =", f"torch.manual_seed({seed})\nmodel ="), str(NB10), "exec"), ns)
        exec(compile(_swap(train_cell, "step_fn=train_step_)", f"step_fn=train_step_, seed={seed})"), str(NB10), "exec"), ns)
        pretrain_s = time.perf_counter() - ts
        exec(compile(ft_cell, str(NB10), "exec"), ns)  # fine-tuning with the notebook's own ft_seeds, pretrained and control
        for source in later:
            exec(compile(source, str(NB10), "exec"), ns)
        h, bits, bigram = ns["history"], 1 / math.log(2), ns["bigram_val"]
        val, steps_at = h["val"], h["steps"]
        results = ns["results"]
        rates = {name: 100 * (good > bad).float().mean().item() for name, (good, bad) in ns["choices"].items()}
        run = {"seed": seed, "val": val[-1], "train": h["train"][-1], "bigram": bigram,
               "reach": next((s for s, v in zip(steps_at, val) if v < bigram + 0.05), None),
               "leave": next((s for s, v in zip(steps_at, val) if v < bigram - 0.1), None),
               "last50": next(v for s, v in zip(steps_at, val) if s >= steps_at[-1] - 50) - val[-1],
               "every": steps_at[1] - steps_at[0], "n_prompt": ns["n_prompt"],
               "ft_seeds": list(ns["ft_seeds"]),
               "pre": [100 * r["test"] for r in results["pretrained GPT"]],
               "pre_c": [100 * r["contrast"] for r in results["pretrained GPT"]],
               "ctl": [100 * r["test"] for r in results["random init (control)"]],
               "ctl_c": [100 * r["contrast"] for r in results["random init (control)"]],
               "raw": 100 * ns["raw_acc"], "cal": 100 * ns["cal_acc"],
               "positive": 100 * (ns["scores"].argmax(1) == 1).float().mean().item(),
               "with": rates["GPT with the prompt"], "without": rates["GPT without the prompt"],
               "unigram": rates["unigram (character frequencies, no context)"],
               "bits_prompt": -ns["with_prompt"] * bits, "n_pairs": ns["n_pairs"], "steps": ns["steps"],
               "pretrain_s": pretrain_s, "seconds": time.perf_counter() - ts}
        run["gain"] = [p - c for p, c in zip(run["pre"], run["ctl"])]
        run["gain_c"] = [p - c for p, c in zip(run["pre_c"], run["ctl_c"])]
        per.append(run)
        print(f"seed {seed}: GPT {run['val'] * bits:.2f} bits/char (bigram {bigram * bits:.2f}); gains on test "
              + " ".join(f"{g:+.1f}" for g in run["gain"]) + f"; prompt {run['with']:.1f}% vs {run['without']:.1f}%; "
              f"zero-shot raw {run['raw']:.1f}%, calibrated {run['cal']:.1f}% ({run['seconds']:.0f} s)", flush=True)
    n, bits = len(seeds), 1 / math.log(2)
    col = lambda key, fmt="{:.1f}": " | ".join(fmt.format(r[key]) for r in per)  # noqa: E731
    flat = lambda key: [v for r in per for v in r[key]]  # noqa: E731
    ft_seeds = per[0]["ft_seeds"]
    lines = [f"Notebook 10, `cpu` profile settings, model seeds {seeds} (the pretraining's initial weights and batches; "
             f"seed 0 is the notebook's run, which uses the machine's thread count), {torch.get_num_threads()} torch "
             f"thread(s), {time.perf_counter() - t0:.0f} s in all. Each pretrained model is then fine-tuned as the "
             f"notebook does, with its own fine-tuning seeds {ft_seeds} (the head, the control's weights, the batches). "
             "Mean ± sd [lowest-highest] over the seeds.", "",
             f"Section 4, pretraining ({per[0]['steps']} steps; validation evaluated every {per[0]['every']} steps):", "",
             "| pretraining seed | " + " | ".join(map(str, seeds)) + " | over the seeds |", "|---|" + "---|" * (n + 1),
             "| GPT validation loss (bits per character) | " + " | ".join(f"{r['val'] * bits:.3f}" for r in per)
             + f" | {spread3([r['val'] * bits for r in per])} |"]
    lines += ["| GPT validation loss (nats per character) | " + " | ".join(f"{r['val']:.3f}" for r in per)
              + f" | {spread3([r['val'] for r in per])} |",
              "| bigram validation loss (bits per character, no seed) | " + " | ".join(f"{r['bigram'] * bits:.3f}" for r in per) + " | |",
              "| GPT perplexity, e^loss | " + " | ".join(f"{math.exp(r['val']):.2f}" for r in per)
              + f" | {spread([math.exp(r['val']) for r in per])} |",
              "| train minus validation loss at the end (nats) | " + " | ".join(f"{r['train'] - r['val']:+.3f}" for r in per) + " | |",
              "| validation drop over the last 50 steps (nats) | " + " | ".join(f"{r['last50']:.3f}" for r in per) + " | |",
              "| first evaluation within 0.05 nats of the bigram (step) | " + " | ".join(str(r["reach"]) for r in per) + " | |",
              "| first evaluation 0.1 nats below the bigram (step) | " + " | ".join(str(r["leave"]) for r in per) + " | |",
              "| seconds for the pretraining | " + " | ".join(f"{r['pretrain_s']:.0f}" for r in per) + " | |", "",
              f"Section 7, fine-tuning (the notebook's cell: per pretraining seed, fine-tuning seeds {ft_seeds}), accuracy (%) "
              "on the full test and contrast splits:", "",
              "| pretraining seed | fine-tuning seed | pretrained, test | control, test | gain, test | pretrained, contrast "
              "| control, contrast | gain, contrast |", "|---|---|---|---|---|---|---|---|"]
    for r in per:
        for i, fs in enumerate(r["ft_seeds"]):
            lines.append(f"| {r['seed']} | {fs} | {r['pre'][i]:.1f} | {r['ctl'][i]:.1f} | {r['gain'][i]:+.1f} | "
                         f"{r['pre_c'][i]:.1f} | {r['ctl_c'][i]:.1f} | {r['gain_c'][i]:+.1f} |")
    lines += [f"| all | all | {spread(flat('pre'))} | {spread(flat('ctl'))} | {spread(flat('gain'))} | {spread(flat('pre_c'))} "
              f"| {spread(flat('ctl_c'))} | {spread(flat('gain_c'))} |", "",
              "Per pretraining seed, over its fine-tuning seeds (what one notebook run prints), gain on test (points): "
              + "; ".join(f"seed {r['seed']}: {spread(r['gain'])}" for r in per) + ".", "",
              f"Section 8, prompting ({per[0]['n_pairs']} two-way choices of a 20-character continuation; "
              f"{per[0]['n_prompt']} test sentences for the template), %:", "",
              "| pretraining seed | " + " | ".join(map(str, seeds)) + " | over the seeds |", "|---|" + "---|" * (n + 1)]
    for key, name in (("with", "GPT with the prompt picks the true continuation"),
                      ("without", "GPT without the prompt (a line break)"),
                      ("unigram", "unigram frequencies (no seed)"),
                      ("raw", "template, zero-shot, raw"), ("cal", "template, zero-shot, calibrated"),
                      ("positive", "template: share predicted positive (raw)")):
        lines.append(f"| {name} | {col(key)} | {spread([r[key] for r in per])} |")
    lines.append(f"| bits per character of the true continuation after the prompt | {col('bits_prompt', '{:.2f}')} | "
                 f"{spread3([r['bits_prompt'] for r in per])} |")
    n_ft = sum(len(r["gain"]) for r in per)
    claims = {"the GPT ends below the bigram": sum(r["val"] < r["bigram"] for r in per),
              "the train and validation losses end within 0.05 nats of each other (no overfitting)":
              sum(abs(r["train"] - r["val"]) < 0.05 for r in per),
              "the validation loss still falls over the last 50 steps": sum(r["last50"] > 0 for r in per),
              "every control stays at chance (50 ± 5 % on test and contrast, every fine-tuning seed)":
              sum(all(abs(v - 50) <= 5 for v in r["ctl"] + r["ctl_c"]) for r in per),
              "the pretrained model is ahead of its control on test in every fine-tuning seed":
              sum(all(g > 0 for g in r["gain"]) for r in per),
              "the mean gain on test is larger than its sd over the fine-tuning seeds (the notebook's verdict)":
              sum(statistics.mean(r["gain"]) > statistics.stdev(r["gain"]) for r in per if len(r["gain"]) > 1),
              "zero-shot with the template is at chance (raw and calibrated within 50 ± 5 %)":
              sum(abs(r["raw"] - 50) <= 5 and abs(r["cal"] - 50) <= 5 for r in per),
              "with the prompt the model picks the true continuation more than 65 % of the time":
              sum(r["with"] > 65 for r in per),
              "without the prompt it is at chance (within 50 ± 5 %)": sum(abs(r["without"] - 50) <= 5 for r in per)}
    lines += ["", "| claim | pretraining seeds where it held |", "|---|---|"]
    lines += [f"| {claim} | {k} of {n} |" for claim, k in claims.items()]
    lines += ["", f"Fine-tuning pairs where the pretrained model was ahead on test: {sum(g > 0 for g in flat('gain'))} of {n_ft}."]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--only", choices=["01", "02", "03", "04", "06", "07", "07w", "08", "09", "10", "12"],
                        nargs="+", default=["01", "02", "03", "04", "06", "07", "07w", "08", "09", "10", "12"])
    parser.add_argument("--threads", type=int, default=1, help="torch threads (both notebooks set one)")
    parser.add_argument("--small", action="store_true", help="tiny data and a few steps: checks that it runs (tests)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    command = ("COURSE_PROFILE=cpu python benchmarks/bench_seed_spread.py --only {nb} --seeds "
               + " ".join(map(str, args.seeds)) + f" --threads {args.threads}")
    suffix = "" if args.threads == 1 else f"-{args.threads}threads"
    for nb, run, title in (("01", run_01, "Notebook 01: the dates and the length sweep without attention over seeds"),
                           ("02", run_02, "Notebook 02: the length sweep and the dates over seeds"),
                           ("03", run_03, "Notebook 03: the flagged-digit head over seeds"),
                           ("04", run_04, "Notebook 04: one head against two over seeds"),
                           ("06", run_06, "Notebook 06: the negation task with and without positions over seeds"),
                           ("07", run_07, "Notebook 07: the AMAL lab's ladder over seeds"),
                           ("07w", run_07w, "Notebook 07: post-LN, warm-up and pre-LN over seeds"),
                           ("08", run_08, "Notebook 08: equal budgets, longer strings and translation over seeds"),
                           ("09", run_09, "Notebook 09: the MLM's probe and the fine-tuning learning curve over seeds"),
                           ("10", run_10, "Notebook 10: pretraining, fine-tuning against a control and prompting over seeds"),
                           ("12", run_12, "Notebook 12: the ViT and the mixture of experts over seeds")):
        if nb in args.only:
            body = run(args.seeds, args.small)
            body = f"Command: `{command.format(nb=nb)}`\n\n{body}"
            print(body)
            write_result(f"seed-spread-{nb}-cpu{suffix}", title, body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
