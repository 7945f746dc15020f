"""Positional information for attention, as notebook 06 builds it; later notebooks import it.

Conventions (the ones of Vaswani et al. 2017 and of the course seeds 003/004):

* positions are counted from 0: the first token has ``pos = 0``;
* the layout is *interleaved*: dimensions ``2i`` and ``2i + 1`` form the pair ``i``
  (``i = 0 .. d/2 - 1``), which turns at the angular frequency
  ``omega_i = base ** (-2i / d)`` with ``base = 10000``;
* sinusoidal encoding: ``PE[pos, 2i] = sin(pos * omega_i)``, ``PE[pos, 2i + 1] = cos(pos * omega_i)``;
* RoPE (Su et al. 2021) rotates the same pairs by the angle ``pos * omega_i``, counter-clockwise:
  ``(x0, x1) -> (x0 cos - x1 sin, x0 sin + x1 cos)``.

Shapes use B (batch), T (sequence length) and d (feature size, which must be even).
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = [
    "DEFAULT_BASE",
    "frequencies",
    "sinusoidal_encoding",
    "SinusoidalPositionalEncoding",
    "LearnedPositionalEmbedding",
    "offset_matrix",
    "apply_rope",
    "RotaryEmbedding",
]

DEFAULT_BASE = 10000.0


def _check_even(d: int) -> None:
    if d <= 0 or d % 2:
        raise ValueError(f"the feature size d must be a positive even number (pairs of dimensions), got {d}")


def frequencies(d: int, base: float = DEFAULT_BASE, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The d/2 angular frequencies ``omega_i = base ** (-2i / d)``, from 1 down to about 1/base."""
    _check_even(d)
    two_i = torch.arange(0, d, 2, dtype=torch.float64)
    return (base ** (-two_i / d)).to(dtype)


def sinusoidal_encoding(
    T: int,
    d: int,
    base: float = DEFAULT_BASE,
    *,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """The (T, d) table of sinusoidal position encodings, rows ``pos = 0 .. T-1``.

    ``PE[pos, 2i] = sin(pos / base^(2i/d))`` and ``PE[pos, 2i+1] = cos(pos / base^(2i/d))``.
    Computed in float64, then cast to ``dtype``.
    """
    _check_even(d)
    positions = torch.arange(T, dtype=torch.float64)[:, None]  # (T, 1)
    angles = positions * frequencies(d, base)[None, :]  # (T, d/2)
    pe = torch.empty(T, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe.to(dtype=dtype, device=device)


class SinusoidalPositionalEncoding(nn.Module):
    """Adds the sinusoidal table to a batch of sequences: (B, T, d) -> (B, T, d).

    The table is precomputed for ``max_len`` positions (a buffer that follows ``.to(device)``
    but is not saved in the state dict: it is a formula, not a parameter). ``offset`` shifts
    the positions, e.g. when decoding one token at a time.
    """

    def __init__(self, d_model: int, max_len: int = 5000, base: float = DEFAULT_BASE, dropout: float = 0.0) -> None:
        super().__init__()
        self.d_model, self.max_len, self.base = d_model, max_len, base
        self.register_buffer("pe", sinusoidal_encoding(max_len, d_model, base), persistent=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        T = x.size(-2)
        if offset + T > self.max_len:
            raise ValueError(f"sequence of length {T} at offset {offset} is longer than max_len={self.max_len}")
        return self.dropout(x + self.pe[offset : offset + T].to(x.dtype))

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, max_len={self.max_len}, base={self.base:g}"


class LearnedPositionalEmbedding(nn.Module):
    """Adds a learned vector per position (BERT, GPT-2): (B, T, d) -> (B, T, d).

    One trainable row per position ``0 .. max_len-1``; longer sequences raise ValueError,
    because no vector was ever learned for those positions.
    """

    def __init__(self, max_len: int, d_model: int, init_std: float = 0.02) -> None:
        super().__init__()
        self.max_len, self.d_model = max_len, d_model
        self.embedding = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.embedding.weight, std=init_std)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        T = x.size(-2)
        if offset + T > self.max_len:
            raise ValueError(f"sequence of length {T} at offset {offset} is longer than max_len={self.max_len}")
        positions = torch.arange(offset, offset + T, device=x.device)
        return x + self.embedding(positions).to(x.dtype)

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, d_model={self.d_model}"


def offset_matrix(k: float, d: int, base: float = DEFAULT_BASE, *, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The (d, d) matrix ``M_k`` with ``PE[pos + k] = M_k @ PE[pos]`` for every ``pos``.

    Block diagonal; the block of pair i acts on ``(sin, cos)`` of frequency ``omega_i``:
    ``[[cos(k w), sin(k w)], [-sin(k w), cos(k w)]]`` (angle-addition formulas). It does not
    depend on ``pos``, is orthogonal, and ``M_a @ M_b = M_(a+b)``.
    """
    angles = k * frequencies(d, base)  # (d/2,)
    c, s = torch.cos(angles), torch.sin(angles)
    m = torch.zeros(d, d, dtype=torch.float64)
    idx = torch.arange(0, d, 2)
    m[idx, idx] = c
    m[idx, idx + 1] = s
    m[idx + 1, idx] = -s
    m[idx + 1, idx + 1] = c
    return m.to(dtype)


def apply_rope(x: torch.Tensor, positions: torch.Tensor | None = None, base: float = DEFAULT_BASE) -> torch.Tensor:
    """Rotary position embedding: rotate each pair ``(x[..., 2i], x[..., 2i+1])`` of the token
    at position ``m`` by the angle ``m * omega_i``.

    x: (..., T, d); positions: (T,) (or broadcastable to x's leading dims + (T,)), default
    ``0 .. T-1``. Returns a tensor like x. After rotating queries and keys this way,
    ``rope(q, m) . rope(k, n)`` depends on the positions only through ``m - n``.
    """
    d, T = x.size(-1), x.size(-2)
    if positions is None:
        positions = torch.arange(T, device=x.device)
    positions = torch.as_tensor(positions, device=x.device)
    angles = positions.to(torch.float64)[..., None] * frequencies(d, base).to(x.device)  # (..., T, d/2)
    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1)  # (..., T, d/2, 2)
    return out.flatten(-2)


class RotaryEmbedding(nn.Module):
    """RoPE as a module with precomputed cos/sin tables: rotates (..., T, d) queries or keys.

    ``rope(x)`` rotates positions ``offset .. offset+T-1`` (``offset`` is for generation with
    a KV cache, where a new token sits after the cached ones). No parameters.
    """

    def __init__(self, dim: int, max_len: int = 4096, base: float = DEFAULT_BASE) -> None:
        super().__init__()
        _check_even(dim)
        self.dim, self.max_len, self.base = dim, max_len, base
        angles = torch.arange(max_len, dtype=torch.float64)[:, None] * frequencies(dim, base)[None, :]
        self.register_buffer("cos", torch.cos(angles).float(), persistent=False)
        self.register_buffer("sin", torch.sin(angles).float(), persistent=False)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        T = x.size(-2)
        if x.size(-1) != self.dim:
            raise ValueError(f"RotaryEmbedding(dim={self.dim}) got vectors of size {x.size(-1)}")
        if offset + T > self.max_len:
            raise ValueError(f"sequence of length {T} at offset {offset} is longer than max_len={self.max_len}")
        cos = self.cos[offset : offset + T].to(x.dtype)
        sin = self.sin[offset : offset + T].to(x.dtype)
        x0, x1 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, max_len={self.max_len}, base={self.base:g}"
