"""The sentence classifiers of the notebook 07 ladder (AMAL lab 9, *Mécanisme d'attention propre*, Sorbonne Université).

One model, :class:`AttentionClassifier`, whose switches climb the ladder:

====  ===============  ===========  =========  =========
rung  residual_ln      positions    pooling    AMAL lab
====  ===============  ===========  =========  =========
Q1    False            False        "mean"     L = 3 self-attention layers, mean pooling
Q2    True             False        "mean"     + residual connections and LayerNorm
Q3    True             True         "mean"     + sinusoidal positional encodings
Q4    True             True         "cls"      + a learned [CLS] vector, read out for the class
====  ===============  ===========  =========  =========

Shapes: B batch, T tokens, d = d_model. ``real`` is the boolean ``(B, T)`` mask of
:func:`course_utils.sentiment_data.encode_texts`, True on real tokens, False on padding.
:func:`train_sentiment_classifier` trains one model on a :func:`~course_utils.sentiment_data.make_sentiment`
dataset and returns its accuracy on every split and the time it took.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from datasets import DatasetDict
from torch import nn

from course_utils.blocks import EncoderBlock, FeedForward, LayerNorm
from course_utils.masking import key_mask
from course_utils.multihead import MultiHeadAttention
from course_utils.positional import SinusoidalPositionalEncoding
from course_utils.progress import LiveCurve, progress
from course_utils.sentiment_data import WordVocab, encode_texts

__all__ = ["masked_mean_pool", "prepend_cls", "PlainAttentionLayer", "AttentionClassifier",
           "LadderResult", "evaluate_accuracy", "train_sentiment_classifier", "RUNGS"]

RUNGS = {
    "Q1 attention, mean": dict(residual_ln=False, positions=False, pooling="mean"),
    "Q2 + residual & LN": dict(residual_ln=True, positions=False, pooling="mean"),
    "Q3 + positions": dict(residual_ln=True, positions=True, pooling="mean"),
    "Q4 + [CLS]": dict(residual_ln=True, positions=True, pooling="cls"),
}


def masked_mean_pool(h: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """Mean of ``h (B, T, d)`` over the real tokens of each sequence -> ``(B, d)``; padding is ignored."""
    weights = real.to(h.dtype).unsqueeze(-1)  # (B, T, 1)
    return (h * weights).sum(dim=1) / weights.sum(dim=1).clamp_min(1.0)


def prepend_cls(h: torch.Tensor, real: torch.Tensor, cls: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Put the vector ``cls (d,)`` in front of every sequence: ``(B, T, d) -> (B, T+1, d)``,
    and extend the mask ``(B, T) -> (B, T+1)`` with True (the [CLS] slot is a real token)."""
    B = h.size(0)
    first = cls.to(h.dtype).expand(B, 1, h.size(-1))
    ones = torch.ones(B, 1, dtype=torch.bool, device=real.device)
    return torch.cat([first, h], dim=1), torch.cat([ones, real], dim=1)


class PlainAttentionLayer(nn.Module):
    """Rung Q1 of the AMAL lab: ``x <- g(SelfAttention(x))`` with ``g`` a position-wise FFN; no residual, no norm."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int) -> None:
        super().__init__()
        self.attn = MultiHeadAttention(d_model, n_heads)
        self.ffn = FeedForward(d_model, d_ff)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        out, _ = self.attn(x, x, x, mask=mask)
        return self.ffn(out)


class AttentionClassifier(nn.Module):
    """Embeddings -> (positions) -> ``n_layers`` attention layers -> pooling -> linear head (2 classes).

    ``residual_ln=True`` uses :class:`~course_utils.blocks.EncoderBlock` s: pre-LN with a final
    LayerNorm (the AMAL lab's ``x + f(LN(x))``, the default) or post-LN (``norm_first=False``);
    ``residual_ln=False`` uses :class:`PlainAttentionLayer`.
    ``pooling="cls"`` prepends a learned vector ``self.cls`` and classifies from its output
    (position 0); ``"mean"`` averages the outputs over the real tokens.
    forward(ids (B, T), real (B, T)) -> logits (B, 2).
    """

    def __init__(self, vocab_size: int, d_model: int = 64, n_layers: int = 3, n_heads: int = 4, *,
                 d_ff: int | None = None, residual_ln: bool = True, positions: bool = True,
                 pooling: str = "mean", norm_first: bool = True, max_len: int = 256, n_classes: int = 2) -> None:
        super().__init__()
        if pooling not in ("mean", "cls"):
            raise ValueError(f"pooling must be 'mean' or 'cls', got {pooling!r}")
        d_ff = 2 * d_model if d_ff is None else d_ff
        self.residual_ln, self.positions, self.pooling = residual_ln, positions, pooling
        self.embed = nn.Embedding(vocab_size, d_model, padding_idx=0)
        self.pos = SinusoidalPositionalEncoding(d_model, max_len) if positions else None
        self.cls = nn.Parameter(0.02 * torch.randn(d_model)) if pooling == "cls" else None
        if residual_ln:
            self.layers = nn.ModuleList(EncoderBlock(d_model, n_heads, d_ff, norm_first=norm_first) for _ in range(n_layers))
            # pre-LN leaves the residual stream un-normalised: one LayerNorm at the end (as GPT-2);
            # post-LN blocks already end with one
            self.final_norm: nn.Module = LayerNorm(d_model) if norm_first else nn.Identity()
        else:
            self.layers = nn.ModuleList(PlainAttentionLayer(d_model, n_heads, d_ff) for _ in range(n_layers))
            self.final_norm = nn.Identity()
        self.head = nn.Linear(d_model, n_classes)

    def forward(self, ids: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
        h = self.embed(ids)  # (B, T, d)
        if self.cls is not None:
            h, real = prepend_cls(h, real, self.cls)  # [CLS] takes position 0
        if self.pos is not None:
            h = self.pos(h)
        mask = key_mask(real)  # (B, 1, T): no query may read a padded key
        for layer in self.layers:
            h = layer(h, mask)
        h = self.final_norm(h)
        pooled = h[:, 0] if self.cls is not None else masked_mean_pool(h, real)
        return self.head(pooled)


@dataclass
class LadderResult:
    """What :func:`train_sentiment_classifier` measured: accuracy per split, training losses, seconds."""

    accuracy: dict[str, float]
    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0
    n_parameters: int = 0


@torch.no_grad()
def evaluate_accuracy(model: nn.Module, ds, vocab: WordVocab, *, batch_size: int = 512,
                      device: torch.device | str = "cpu") -> float:
    """Fraction of ``ds`` (columns text, label) that ``model`` classifies correctly."""
    was_training = model.training
    model.eval()
    ids, real, y = _encode_split(ds, vocab, device)
    correct = 0
    for start in range(0, len(y), batch_size):
        batch = slice(start, start + batch_size)
        correct += int((model(*_trim(ids[batch], real[batch])).argmax(-1) == y[batch]).sum())
    model.train(was_training)
    return correct / len(y)


def _encode_split(ds, vocab: WordVocab, device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    ids, real = encode_texts(list(ds["text"]), vocab)
    return ids.to(device), real.to(device), torch.tensor(list(ds["label"]), dtype=torch.long, device=device)


def _trim(ids: torch.Tensor, real: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Drop the columns that are padding in every row of the batch."""
    T = max(int(real.sum(dim=1).max()), 1)
    return ids[:, :T], real[:, :T]


def train_sentiment_classifier(model: nn.Module, data: DatasetDict, vocab: WordVocab, *, epochs: int = 10,
                     batch_size: int = 64, lr: float = 1e-3, warmup_steps: int = 0, seed: int = 0,
                     device: torch.device | str = "cpu", live: LiveCurve | None = None,
                     live_name: str = "training") -> LadderResult:
    """Adam on cross-entropy over ``data["train"]`` for ``epochs`` passes; accuracy on every split.

    ``live`` (a :class:`~course_utils.progress.LiveCurve`) receives every batch's loss as series
    ``live_name``, so several runs can share one live figure.

    ``warmup_steps > 0`` raises the learning rate linearly from ``lr / warmup_steps`` to ``lr``
    over the first ``warmup_steps`` updates, then keeps it constant.

    Deterministic for a given ``seed`` on CPU (the batch order is drawn from a generator seeded with ``seed``).
    """
    model.to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: min(1.0, (step + 1) / max(1, warmup_steps)))
    losses: list[float] = []
    start = time.perf_counter()
    all_ids, all_real, all_y = _encode_split(data["train"], vocab, device)
    gen = torch.Generator().manual_seed(seed)
    for _ in progress(range(epochs), desc="training (epochs)"):
        order = torch.randperm(len(all_y), generator=gen).to(all_y.device)
        for start_ in range(0, len(order), batch_size):
            idx = order[start_ : start_ + batch_size]
            ids, real = _trim(all_ids[idx], all_real[idx])
            loss = F.cross_entropy(model(ids, real), all_y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            schedule.step()
            losses.append(loss.item())
            if live is not None:
                live.add(live_name, len(losses), losses[-1])
    seconds = time.perf_counter() - start
    accuracy = {split: evaluate_accuracy(model, data[split], vocab, device=device) for split in data}
    n_parameters = sum(p.numel() for p in model.parameters())
    return LadderResult(accuracy, losses, seconds, n_parameters)
