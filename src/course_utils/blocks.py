"""Transformer building blocks as notebook 07 builds them; notebooks 08-10 import them.

Shapes: B batch, T (or T_q / T_k) sequence length, d = d_model, d_ff the FFN width.
Masks follow :mod:`course_utils.masking`: boolean, True where attention is *allowed*.

- :func:`layer_norm` -- the formula ``gamma * (x - mean) / sqrt(var + eps) + beta`` over the last
  axis (biased variance, like ``torch.nn.LayerNorm``), written out as notebook 07 asks.
- :class:`LayerNorm` -- the same normalisation as a module; it calls PyTorch's fused kernel
  ``F.layer_norm`` (one pass instead of the formula's seven operations, and as fast as
  ``nn.LayerNorm``); tests/course_utils/test_blocks.py checks that it equals :func:`layer_norm`.
- :class:`FeedForward` -- the position-wise FFN ``max(0, x W1 + b1) W2 + b2`` (or GELU).
- :class:`EncoderBlock` -- self-attention + FFN, each wrapped in a residual connection and a
  LayerNorm, either *post-LN* ``LN(x + Sublayer(x))`` (Vaswani et al. 2017, Gustave Cortal's lecture) or
  *pre-LN* ``x + Sublayer(LN(x))`` (GPT-2, Xiong et al. 2020). ``residual=False`` / ``norm=False``
  remove the skip connections / the LayerNorms (notebook 07's depth sweep: why residuals).
- :class:`DecoderBlock` -- masked self-attention, cross-attention over the encoder output
  ("memory"), FFN; same two norm placements.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from course_utils.multihead import MultiHeadAttention

__all__ = ["layer_norm", "LayerNorm", "FeedForward", "EncoderBlock", "DecoderBlock"]


def layer_norm(x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """Normalise ``x (..., d)`` over its last axis, then scale by ``gamma (d,)`` and shift by ``beta (d,)``."""
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True, unbiased=False)
    return gamma * (x - mean) / torch.sqrt(var + eps) + beta


class LayerNorm(nn.Module):
    """Layer normalisation over the last axis, with learned ``weight`` (gamma) and ``bias`` (beta).

    Same parameter names and initialisation (ones, zeros) as ``torch.nn.LayerNorm``, so a
    ``state_dict`` moves between the two. Computes :func:`layer_norm`'s formula with the fused
    ``F.layer_norm`` (the formula is for reading; the kernel is what the models run).
    """

    def __init__(self, d_model: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (..., d) -> (..., d)
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, self.eps)


_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {"relu": F.relu, "gelu": F.gelu}


class FeedForward(nn.Module):
    """Position-wise FFN: ``act(x W1 + b1) W2 + b2``, applied to every position alone.

    ``(B, T, d) -> (B, T, d)``; ``fc1`` is ``d -> d_ff``, ``fc2`` is ``d_ff -> d``.
    ``activation`` is ``"relu"`` (Vaswani et al., Cortal's lecture) or ``"gelu"`` (BERT, GPT-2).
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu") -> None:
        super().__init__()
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}")
        self.activation = activation
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.dropout(_ACTIVATIONS[self.activation](self.fc1(x))))


class EncoderBlock(nn.Module):
    """Self-attention + FFN with residuals and LayerNorm. ``(B, T, d) -> (B, T, d)``.

    ``norm_first=False`` (post-LN): ``x = LN1(x + SA(x)); x = LN2(x + FFN(x))``.
    ``norm_first=True`` (pre-LN):   ``x = x + SA(LN1(x)); x = x + FFN(LN2(x))``.
    ``residual=False`` drops the ``x +`` of both sub-layers (``x = LN1(SA(x))``, ...) and ``norm=False``
    replaces both LayerNorms by the identity; the defaults are the transformer block.
    After each forward, ``self.attn_weights`` holds the attention weights ``(B, h, T, T)``.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        activation: str = "relu",
        residual: bool = True,
        norm: bool = True,
    ) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.residual = residual
        self.attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout, activation)
        self.norm1: nn.Module = LayerNorm(d_model) if norm else nn.Identity()
        self.norm2: nn.Module = LayerNorm(d_model) if norm else nn.Identity()
        self.dropout = nn.Dropout(dropout)
        self.attn_weights: torch.Tensor | None = None

    def _self_attention(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        out, self.attn_weights = self.attn(x, x, x, mask=mask)
        return self.dropout(out)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if not self.residual:  # the sub-layers alone, no skip connection
            if self.norm_first:
                x = self._self_attention(self.norm1(x), mask)
                return self.dropout(self.ffn(self.norm2(x)))
            x = self.norm1(self._self_attention(x, mask))
            return self.norm2(self.dropout(self.ffn(x)))
        if self.norm_first:
            x = x + self._self_attention(self.norm1(x), mask)
            return x + self.dropout(self.ffn(self.norm2(x)))
        x = self.norm1(x + self._self_attention(x, mask))
        return self.norm2(x + self.dropout(self.ffn(x)))


class DecoderBlock(nn.Module):
    """Masked self-attention, cross-attention, FFN; residuals and LayerNorm around each.

    forward(x (B, T, d), memory (B, S, d), self_mask (.., T, T), memory_mask (.., T, S)) -> (B, T, d).
    Queries of the cross-attention come from the decoder, keys and values from ``memory``.
    After each forward, ``self_weights`` (B, h, T, T) and ``cross_weights`` (B, h, T, S) hold
    the attention weights.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm_first: bool = False,
        activation: str = "relu",
    ) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.ffn = FeedForward(d_model, d_ff, dropout, activation)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.norm3 = LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.self_weights: torch.Tensor | None = None
        self.cross_weights: torch.Tensor | None = None

    def _self(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        out, self.self_weights = self.self_attn(x, x, x, mask=mask)
        return self.dropout(out)

    def _cross(self, x: torch.Tensor, memory: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        out, self.cross_weights = self.cross_attn(x, memory, memory, mask=mask)
        return self.dropout(out)

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        self_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if self.norm_first:
            x = x + self._self(self.norm1(x), self_mask)
            x = x + self._cross(self.norm2(x), memory, memory_mask)
            return x + self.dropout(self.ffn(self.norm3(x)))
        x = self.norm1(x + self._self(x, self_mask))
        x = self.norm2(x + self._cross(x, memory, memory_mask))
        return self.norm3(x + self.dropout(self.ffn(x)))
