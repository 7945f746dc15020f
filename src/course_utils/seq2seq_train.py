"""Train and evaluate the encoder-decoders of :mod:`course_utils.rnn_seq2seq`.

- :func:`train_seq2seq` -- teacher-forced cross-entropy with Adam and gradient clipping.
- :func:`translate` -- greedy decoding of a list of strings.
- :func:`char_accuracy`, :func:`accuracy_by_bucket` -- exact match and per-character accuracy
  grouped by input-length bucket; :func:`evaluate_by_length` ties them together.
- :func:`plot_accuracy_by_length` -- one line per model, accuracy against input length.
"""

from __future__ import annotations

import itertools
import time
from typing import Any, Callable, Mapping, Sequence

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from datasets import Dataset
from matplotlib.axes import Axes
from torch import nn

from course_utils.progress import progress
from course_utils.rnn_seq2seq import Seq2Seq, greedy_decode
from course_utils.seq2seq_data import CharVocab, encode_dataset, make_loader, pad_sequences

__all__ = [
    "train_seq2seq",
    "decode_strings",
    "translate",
    "char_accuracy",
    "bucket_label",
    "accuracy_by_bucket",
    "evaluate_by_length",
    "format_buckets",
    "plot_accuracy_by_length",
]


def train_seq2seq(
    model: Seq2Seq,
    train: Dataset,
    vocab: CharVocab,
    *,
    steps: int,
    batch_size: int = 64,
    lr: float = 3e-3,
    clip: float = 1.0,
    seed: int = 0,
    device: torch.device | str = "cpu",
    log_every: int = 0,
    time_budget: float | None = None,
    stats: dict | None = None,
) -> list[float]:
    """Train ``model`` for ``steps`` batches of ``train`` (``source``/``target`` columns).

    Returns the loss of every step. ``log_every > 0`` prints a line every that many steps.
    ``time_budget`` (seconds) stops training once it is spent; ``stats`` (a dict) receives
    ``steps``, ``seconds``, ``tokens`` (target tokens seen) and ``tokens_per_s``.
    """
    torch.manual_seed(seed)
    encoded = train if "src_ids" in train.column_names else encode_dataset(train, vocab)
    loader = make_loader(encoded, batch_size, shuffle=True, seed=seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    model.to(device).train()
    losses: list[float] = []
    tokens = 0
    started = time.perf_counter()
    batches = itertools.islice(itertools.chain.from_iterable(itertools.repeat(loader)), steps)  # epoch after epoch
    for batch in progress(batches, total=steps, desc="training"):
        src, src_len, tgt = batch["src"].to(device), batch["src_len"], batch["tgt"].to(device)
        logits, _ = model(src, src_len, tgt)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt.reshape(-1), ignore_index=vocab.pad_id)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        losses.append(loss.item())
        if log_every and len(losses) % log_every == 0:
            print(f"step {len(losses):5d}  loss {sum(losses[-log_every:]) / log_every:.4f}  ({time.perf_counter() - started:.0f} s)")
        tokens += int((tgt != vocab.pad_id).sum())
        if time_budget is not None and time.perf_counter() - started >= time_budget:
            break  # the budget is spent: stop here
    model.eval()
    if stats is not None:  # what the run did: steps, seconds, target tokens, tokens per second
        seconds = time.perf_counter() - started
        stats.update(steps=len(losses), seconds=seconds, tokens=tokens, tokens_per_s=tokens / max(seconds, 1e-9))
    return losses


# decode(src (B, S), src_len (B,), limit) -> (ids (B, T_out), weights (B, T_out, S) or None)
Decoder = Callable[[torch.Tensor, torch.Tensor, int], tuple]


@torch.no_grad()
def decode_strings(
    decode: Decoder,
    sources: Sequence[str],
    vocab: CharVocab,
    *,
    max_len: int | None = None,
    batch_size: int = 256,
    device: torch.device | str = "cpu",
    return_attention: bool = False,
):
    """Decode ``sources`` in padded batches with ``decode(src (B, S), src_len (B,), limit) -> (ids, weights)``.

    Returns the output strings; with ``return_attention`` also one ``(T_out, S)`` weight matrix per
    input (``None`` where ``decode`` gives no weights). Shared by the RNN and transformer models.
    """
    outputs: list[str] = []
    attention: list = []
    for start in progress(range(0, len(sources), batch_size), desc="decoding"):
        chunk = list(sources[start : start + batch_size])
        src, src_len = pad_sequences([vocab.encode(s) for s in chunk], vocab.pad_id)
        limit = max_len or int(src_len.max()) + 12
        ids, weights = decode(src.to(device), src_len, limit)
        for row in range(len(chunk)):
            text = vocab.decode(ids[row])
            outputs.append(text)
            if return_attention:
                if weights is None:
                    attention.append(None)
                else:
                    n_out = min(len(text) + 1, ids.size(1))  # the characters and the <eos>
                    attention.append(weights[row, :n_out, : int(src_len[row])].cpu())
    return (outputs, attention) if return_attention else outputs


def translate(
    model: Seq2Seq,
    sources: Sequence[str],
    vocab: CharVocab,
    *,
    max_len: int | None = None,
    batch_size: int = 256,
    device: torch.device | str = "cpu",
    return_attention: bool = False,
):
    """Greedy outputs (strings) for ``sources``; with ``return_attention`` also a list of
    ``(T_out, S)`` weight matrices (``None`` for a model without attention)."""
    model.eval()
    decode = lambda src, src_len, limit: greedy_decode(model, src, src_len, limit)  # noqa: E731
    return decode_strings(decode, sources, vocab, max_len=max_len, batch_size=batch_size, device=device,
                          return_attention=return_attention)


def char_accuracy(prediction: str, target: str) -> float:
    """Fraction of the target's characters that the prediction has at the same position."""
    if not target:
        return float(prediction == target)
    return sum(p == t for p, t in zip(prediction, target)) / len(target)


def bucket_label(lo: int, hi: int) -> str:
    return f"{lo}-{hi}" if lo != hi else str(lo)


def accuracy_by_bucket(
    predictions: Sequence[str],
    targets: Sequence[str],
    lengths: Sequence[int],
    edges: Sequence[int],
) -> list[dict]:
    """Exact match and per-character accuracy for each input-length bucket.

    ``edges`` e_0 < e_1 < ... < e_k define buckets ``[e_0, e_1), [e_1, e_2), ...``; inputs
    outside ``[e_0, e_k)`` are ignored. Returns one dict per non-empty bucket:
    ``{"bucket": "lo-hi", "lo", "hi", "n", "exact", "char"}`` (``hi`` inclusive).
    """
    rows = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        idx = [i for i, n in enumerate(lengths) if lo <= n < hi]
        if not idx:
            continue
        exact = sum(predictions[i] == targets[i] for i in idx) / len(idx)
        char = sum(char_accuracy(predictions[i], targets[i]) for i in idx) / len(idx)
        rows.append({"bucket": bucket_label(lo, hi - 1), "lo": lo, "hi": hi - 1, "n": len(idx), "exact": exact, "char": char})
    return rows


def evaluate_by_length(
    model: nn.Module,
    test: Dataset,
    vocab: CharVocab,
    edges: Sequence[int],
    *,
    device: torch.device | str = "cpu",
    translate_with: Callable[..., list[str]] | None = None,
    **options: Any,
) -> tuple[list[dict], list[str]]:
    """Decode ``test`` and score it by source-length bucket. Returns (rows, predictions).

    ``translate_with``: how ``model`` translates, :func:`translate` (greedy, the RNN models') by
    default; a Transformer's is ``transformer_seq2seq.translate_transformer``, with ``options``
    such as ``beam_size=4``.
    """
    predictions = (translate_with or translate)(model, test["source"], vocab, device=device, **options)
    lengths = test["length"] if "length" in test.column_names else [len(s) for s in test["source"]]
    return accuracy_by_bucket(predictions, test["target"], lengths, edges), predictions


def format_buckets(results: Mapping[str, Sequence[dict]]) -> str:
    """A text table: one row per bucket, exact/char accuracy (%) per model."""
    names = list(results)
    buckets = [row["bucket"] for row in next(iter(results.values()))]
    head = f"{'input length':>12} {'n':>5} " + " ".join(f"{name[:22]:>24}" for name in names)
    lines = [head, f"{'':>12} {'':>5} " + " ".join(f"{'exact %   char %':>24}" for _ in names)]
    for i, bucket in enumerate(buckets):
        cells = []
        for name in names:
            row = results[name][i]
            cells.append(f"{100 * row['exact']:>14.1f} {100 * row['char']:>9.1f}")
        lines.append(f"{bucket:>12} {results[names[0]][i]['n']:>5} " + " ".join(cells))
    return "\n".join(lines)


def plot_accuracy_by_length(
    results: Mapping[str, Sequence[dict]],
    *,
    metric: str = "exact",
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Accuracy (percent) against the middle of each input-length bucket, one line per model."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.8))
    for name, rows in results.items():
        xs = [(row["lo"] + row["hi"]) / 2 for row in rows]
        ax.plot(xs, [100 * row[metric] for row in rows], marker="o", label=name)
    ax.set_xlabel("input length (characters)")
    ax.set_ylabel({"exact": "exact match (%)", "char": "per-character accuracy (%)"}.get(metric, metric))
    ax.set_ylim(-3, 103)
    ax.grid(alpha=0.3)
    if title:
        ax.set_title(title)
    ax.legend()
    return ax
