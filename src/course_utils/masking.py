"""Attention masks as notebook 05 builds them; later notebooks import them from here.

Convention of the course (the same as :mod:`course_utils.attention` and as the boolean
``attn_mask`` of ``torch.nn.functional.scaled_dot_product_attention``): a mask is a
boolean tensor, ``True`` where attention is **allowed**. Scores have shape
``(..., T_q, T_k)``: row i is query i, column j is key j.

``torch.nn.MultiheadAttention`` uses the *opposite* convention for ``key_padding_mask``
and for a boolean ``attn_mask`` (``True`` = ignore this key); :func:`to_torch_key_padding_mask`
and :func:`from_torch_key_padding_mask` convert.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch

__all__ = [
    "causal_mask",
    "padding_mask",
    "key_mask",
    "combine",
    "batch_mask",
    "to_additive",
    "to_torch_key_padding_mask",
    "from_torch_key_padding_mask",
    "fully_masked_rows",
    "masked_softmax",
    "masked_attention",
]


def causal_mask(T_q: int, T_k: int | None = None, device: torch.device | str | None = None) -> torch.Tensor:
    """Boolean ``(T_q, T_k)`` mask, True where key j is not in the future of query i (j <= i).

    With ``T_k > T_q`` the queries are taken to be the *last* ``T_q`` positions (as when a
    KV cache holds ``T_k - T_q`` earlier keys): query i may see keys ``j <= i + T_k - T_q``.
    """
    T_k = T_q if T_k is None else T_k
    ones = torch.ones(T_q, T_k, dtype=torch.bool, device=device)
    return torch.tril(ones, diagonal=T_k - T_q)


def padding_mask(
    lengths: Sequence[int] | torch.Tensor, T: int | None = None, device: torch.device | str | None = None
) -> torch.Tensor:
    """Boolean ``(B, T)`` mask, True at real tokens (position t < lengths[b]), False at padding.

    ``T`` defaults to the longest length.
    """
    lengths = torch.as_tensor(lengths, device=device).long()
    if lengths.dim() != 1:
        raise ValueError(f"lengths must be 1-d (one length per sequence), got shape {tuple(lengths.shape)}")
    T = int(lengths.max()) if T is None else T
    if bool((lengths > T).any()) or bool((lengths < 0).any()):
        raise ValueError(f"lengths must lie in [0, T={T}], got {lengths.tolist()}")
    positions = torch.arange(T, device=lengths.device)
    return positions[None, :] < lengths[:, None]


def key_mask(pad: torch.Tensor, n_heads: bool = False) -> torch.Tensor:
    """Turn a ``(B, T_k)`` padding mask into one that broadcasts over scores.

    Returns ``(B, 1, T_k)`` (scores ``(B, T_q, T_k)``) or, with ``n_heads=True``,
    ``(B, 1, 1, T_k)`` (scores ``(B, h, T_q, T_k)``). Padding hides *keys*: every query
    may still be computed, it just may not read padded positions.
    """
    return pad[:, None, None, :] if n_heads else pad[:, None, :]


def combine(*masks: torch.Tensor | None) -> torch.Tensor | None:
    """Logical AND of broadcastable boolean masks; ``None`` entries are skipped."""
    result = None
    for mask in masks:
        if mask is None:
            continue
        if mask.dtype != torch.bool:
            raise TypeError(f"masks must be boolean (True = allowed), got {mask.dtype}")
        result = mask if result is None else result & mask
    return result


def batch_mask(
    lengths: Sequence[int] | torch.Tensor,
    T: int | None = None,
    causal: bool = True,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """``(B, T, T)`` mask for self-attention over a padded batch: key padding AND (optionally) causal."""
    pad = padding_mask(lengths, T, device=device)
    T = pad.size(1)
    return combine(key_mask(pad), causal_mask(T, device=pad.device) if causal else None)


def to_additive(mask: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The additive form of the INF721 lecture: 0 where allowed, ``-inf`` where masked."""
    zeros = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    return zeros.masked_fill(~mask, float("-inf"))


def to_torch_key_padding_mask(pad: torch.Tensor) -> torch.Tensor:
    """Course padding mask (True = real token) -> ``nn.MultiheadAttention`` key_padding_mask (True = ignore)."""
    return ~pad


def from_torch_key_padding_mask(key_padding_mask: torch.Tensor, n_heads: bool = True) -> torch.Tensor:
    """``nn.MultiheadAttention``'s ``key_padding_mask`` (B, T_k), True = ignore ->
    a boolean ``attn_mask`` for ``F.scaled_dot_product_attention`` (True = allowed),
    shape ``(B, 1, 1, T_k)`` (or ``(B, 1, T_k)`` with ``n_heads=False``)."""
    return key_mask(~key_padding_mask.bool(), n_heads=n_heads)


def fully_masked_rows(mask: torch.Tensor) -> torch.Tensor:
    """Boolean ``(..., T_q)``: True for queries that may attend to no key at all."""
    return ~mask.any(dim=-1)


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None = None, dim: int = -1) -> torch.Tensor:
    """Softmax over ``dim`` that ignores masked positions and never returns NaN.

    A row whose every position is masked gets all-zero weights (its query reads nothing),
    which is also what ``F.scaled_dot_product_attention`` returns in recent PyTorch. The
    masked scores are replaced *before* the exponential, so the gradient is finite too.
    """
    if mask is None:
        return torch.softmax(scores, dim=dim)
    mask = mask.expand_as(scores) if mask.shape != scores.shape else mask
    any_allowed = mask.any(dim=dim, keepdim=True)
    filled = scores.masked_fill(~mask, float("-inf"))
    # Rows with nothing allowed: softmax of zeros (finite), then zeroed by the mask below.
    filled = torch.where(any_allowed, filled, torch.zeros_like(scores))
    weights = torch.softmax(filled, dim=dim)
    return weights * mask.to(weights.dtype)


def masked_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``softmax(q k^T / sqrt(d)) v`` with :func:`masked_softmax` (no NaN on fully masked rows).

    q: (..., T_q, d), k: (..., T_k, d), v: (..., T_k, d_v); mask broadcastable to (..., T_q, T_k).
    Returns (output (..., T_q, d_v), weights (..., T_q, T_k)).
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    weights = masked_softmax(scores, mask)
    return weights @ v, weights
