"""Attention at scale, as notebook 13 builds it: the online softmax, the merge of partial softmax
states, tiled (FlashAttention-style) attention forward and its recomputing backward, and the
memory a KV cache takes.

Conventions (those of :mod:`course_utils.masking` and of ``F.scaled_dot_product_attention``):

- ``q`` has shape ``(..., T_q, d)``, ``k`` ``(..., T_k, d)``, ``v`` ``(..., T_k, d_v)``; the
  leading axes (batch, heads) broadcast as in a matmul. Scores are scaled by ``1 / sqrt(d)``.
- ``causal=True`` lets query ``i`` see keys ``j <= i``, aligned to the **top-left** corner when
  ``T_q != T_k`` (as SDPA's ``is_causal``).
- ``key_padding_mask`` is boolean ``(B, T_k)``, ``True`` at real keys (allowed), for inputs of
  shape ``(B, ..., T, d)``.
- A query that may read no key (every key masked) gets the output ``0`` and ``lse = -inf``:
  never NaN, in the forward pass or in the gradients (SDPA returns the same zeros).

A *softmax state* of a set of scores ``s_j`` with values ``v_j`` is the triple ``(m, l, o)``:
``m = max_j s_j``, ``ell = sum_j exp(s_j - m)`` and ``o = sum_j exp(s_j - m) v_j`` (unnormalised);
the attention output is ``o / l`` and the log-sum-exp ``m + log l``. The empty state is
``(-inf, 0, 0)``. :func:`merge_softmax_states` combines two states of disjoint sets of keys.
"""

from __future__ import annotations

import math
from typing import Any

import torch

__all__ = [
    "online_softmax",
    "softmax_state",
    "merge_softmax_states",
    "naive_attention",
    "tiled_attention",
    "tiled_attention_backward",
    "TiledAttention",
    "causal_tiles",
    "decoder_kv_cache_bytes",
]

SoftmaxState = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def _finite_or_zero(m: torch.Tensor) -> torch.Tensor:
    """``m`` where finite, else 0: the shift of a row whose scores are all ``-inf`` (so that
    ``exp(-inf - shift) = 0`` instead of ``exp(-inf + inf) = NaN``)."""
    return torch.where(torch.isfinite(m), m, torch.zeros_like(m))


def _accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    """float32 for half-precision inputs (sums in float16/bfloat16 lose digits), else the input's."""
    return torch.promote_types(dtype, torch.float32)


def online_softmax(x: torch.Tensor, block: int) -> torch.Tensor:
    """Softmax of ``x`` (any shape) over its last axis, reading the axis in blocks of ``block``
    entries and keeping a running max ``m`` and running sum ``l`` (Milakov & Gimelshein 2018).

    When a block raises the max from ``m`` to ``m'``, the sum so far is rescaled by
    ``exp(m - m')``. A row that is all ``-inf`` gives zeros (not NaN). Same shape and dtype as ``x``.
    """
    if block < 1:
        raise ValueError(f"block must be a positive int, got {block}")
    m = torch.full(x.shape[:-1], float("-inf"), dtype=x.dtype, device=x.device)
    ell = torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
    for start in range(0, x.shape[-1], block):
        chunk = x[..., start:start + block]
        m_new = torch.maximum(m, chunk.amax(dim=-1))
        shift = _finite_or_zero(m_new)
        ell = ell * torch.exp(m - shift) + torch.exp(chunk - shift[..., None]).sum(dim=-1)
        m = m_new
    shift = _finite_or_zero(m)
    safe_ell = torch.where(ell > 0, ell, torch.ones_like(ell))
    return torch.exp(x - shift[..., None]) / safe_ell[..., None]


def softmax_state(scores: torch.Tensor, values: torch.Tensor) -> SoftmaxState:
    """The softmax state ``(m, l, o)`` of ``scores`` ``(..., T_k)`` with ``values`` ``(..., T_k, d_v)``:
    ``m`` and ``l`` of shape ``(...)``, ``o`` of shape ``(..., d_v)``. Rows of ``-inf`` give the
    empty state ``(-inf, 0, 0)``."""
    m = scores.amax(dim=-1)
    p = torch.exp(scores - _finite_or_zero(m)[..., None])
    return m, p.sum(dim=-1), (p[..., None, :] @ values)[..., 0, :]


def merge_softmax_states(a: SoftmaxState, b: SoftmaxState) -> SoftmaxState:
    """The state of the union of two disjoint sets of keys, from their states ``a = (m1, l1, o1)``
    and ``b = (m2, l2, o2)``: ``m = max(m1, m2)``, each part rescaled by ``exp(m_i - m)``.

    Associative and commutative; the empty state ``(-inf, 0, 0)`` is its identity (no NaN when
    both are empty). ``m, l``: shape ``(...)``; ``o``: ``(..., d_v)``.
    """
    m1, l1, o1 = a
    m2, l2, o2 = b
    m = torch.maximum(m1, m2)
    shift = _finite_or_zero(m)
    w1, w2 = torch.exp(m1 - shift), torch.exp(m2 - shift)
    return m, w1 * l1 + w2 * l2, w1[..., None] * o1 + w2[..., None] * o2


def _key_mask(key_padding_mask: torch.Tensor | None, q: torch.Tensor) -> torch.Tensor | None:
    """``(B, T_k)`` -> ``(B, 1, ..., 1, T_k)`` with as many axes as ``q``: it broadcasts against
    scores ``(B, ..., T_q, T_k)``."""
    if key_padding_mask is None:
        return None
    return key_padding_mask.reshape(key_padding_mask.shape[0], *([1] * (q.dim() - 2)), key_padding_mask.shape[-1])


def naive_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    block_q: int | None = None,
    block_k: int | None = None,
    causal: bool = False,
    key_padding_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Explicit attention, the whole ``(..., T_q, T_k)`` score matrix at once: ``(out, lse)``,
    ``out`` of shape ``(..., T_q, d_v)``, ``lse`` ``(..., T_q)`` the log-sum-exp of the scaled,
    masked scores. The signature of :func:`tiled_attention` (the blocks are ignored), so that either
    can stand for the other; differentiable, with finite gradients for fully masked rows."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    s = (q @ k.transpose(-2, -1)) * scale
    allowed = None
    if causal:
        T_q, T_k = s.shape[-2], s.shape[-1]
        allowed = torch.ones(T_q, T_k, dtype=torch.bool, device=q.device).tril()
    key = _key_mask(key_padding_mask, q)
    if key is not None:
        allowed = key if allowed is None else allowed & key
    if allowed is not None:
        s = s.masked_fill(~allowed, float("-inf"))
    m = _finite_or_zero(s.amax(dim=-1, keepdim=True).detach())
    p = torch.exp(s - m)
    ell = p.sum(dim=-1, keepdim=True)
    nonempty = ell > 0
    safe_ell = torch.where(nonempty, ell, torch.ones_like(ell))
    out = (p / safe_ell) @ v
    lse = torch.where(nonempty, m + torch.log(safe_ell), torch.full_like(ell, float("-inf")))
    return out, lse[..., 0]


def causal_tiles(T_q: int, T_k: int, block_q: int, block_k: int) -> list[tuple[int, int, str]]:
    """Every ``(i, j, kind)`` tile of the block grid (query block ``i``, key block ``j``) for causal
    attention: ``"full"`` (every pair visible), ``"diagonal"`` (needs the mask), ``"skipped"``
    (every key in the future of every query: never computed). Top-left aligned."""
    tiles = []
    for i, q0 in enumerate(range(0, T_q, block_q)):
        q1 = min(q0 + block_q, T_q)
        for j, k0 in enumerate(range(0, T_k, block_k)):
            k1 = min(k0 + block_k, T_k)
            kind = "skipped" if k0 > q1 - 1 else ("diagonal" if k1 - 1 > q0 else "full")
            tiles.append((i, j, kind))
    return tiles


def tiled_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    block_q: int = 64,
    block_k: int = 64,
    causal: bool = False,
    key_padding_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """FlashAttention's forward pass (Dao et al. 2022, Algorithm 1, in FlashAttention-2's loop
    order: query blocks outside, key blocks inside): ``(out, lse)`` as :func:`naive_attention`,
    without ever holding more than one ``(block_q, block_k)`` tile of scores per batch and head.

    Each query block keeps a softmax state ``(m, l, o)`` merged with one key block at a time;
    with ``causal=True`` key blocks entirely in the future of the query block are skipped, not
    masked. Sums run in float32 for half-precision inputs; ``out`` has ``q``'s dtype, ``lse`` the
    accumulation dtype. Shapes: ``q`` ``(..., T_q, d)``, ``k`` ``(..., T_k, d)``, ``v``
    ``(..., T_k, d_v)`` -> ``out`` ``(..., T_q, d_v)``, ``lse`` ``(..., T_q)``.
    """
    acc = _accumulation_dtype(q.dtype)
    scale = 1.0 / math.sqrt(q.shape[-1])
    T_q, T_k = q.shape[-2], k.shape[-2]
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    key = _key_mask(key_padding_mask, q)
    outs, lses = [], []
    for q0 in range(0, T_q, block_q):
        q1 = min(q0 + block_q, T_q)
        q_blk = q[..., q0:q1, :].to(acc) * scale
        m = torch.full((*lead, q1 - q0), float("-inf"), dtype=acc, device=q.device)
        ell = torch.zeros((*lead, q1 - q0), dtype=acc, device=q.device)
        o = torch.zeros((*lead, q1 - q0, v.shape[-1]), dtype=acc, device=q.device)
        k_end = min(T_k, q1) if causal else T_k  # key blocks past the last query are in its future
        for k0 in range(0, k_end, block_k):
            k1 = min(k0 + block_k, T_k)
            s = q_blk @ k[..., k0:k1, :].to(acc).transpose(-2, -1)
            if causal and k1 - 1 > q0:  # the tile crosses the diagonal
                rows = torch.arange(q0, q1, device=q.device)[:, None]
                cols = torch.arange(k0, k1, device=q.device)[None, :]
                s = s.masked_fill(cols > rows, float("-inf"))
            if key is not None:
                s = s.masked_fill(~key[..., k0:k1], float("-inf"))
            m_new = torch.maximum(m, s.amax(dim=-1))
            shift = _finite_or_zero(m_new)
            alpha = torch.exp(m - shift)
            p = torch.exp(s - shift[..., None])
            ell = alpha * ell + p.sum(dim=-1)
            o = alpha[..., None] * o + p @ v[..., k0:k1, :].to(acc)
            m = m_new
        nonempty = ell > 0
        safe_ell = torch.where(nonempty, ell, torch.ones_like(ell))
        outs.append((o / safe_ell[..., None]).to(q.dtype))
        lses.append(torch.where(nonempty, _finite_or_zero(m) + torch.log(safe_ell), torch.full_like(ell, float("-inf"))))
    if not outs:  # T_q == 0
        return q.new_zeros((*lead, 0, v.shape[-1])), torch.zeros((*lead, 0), dtype=acc, device=q.device)
    return torch.cat(outs, dim=-2), torch.cat(lses, dim=-1)


def tiled_attention_backward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    d_out: torch.Tensor,
    d_lse: torch.Tensor | None,
    block_q: int = 64,
    block_k: int = 64,
    causal: bool = False,
    key_padding_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients ``(dq, dk, dv)`` of attention from what the forward pass kept (``q, k, v, out,
    lse``), recomputing each tile's probabilities ``P = exp(S - lse)`` (FlashAttention's backward,
    Dao et al. 2022, Algorithm 4; FlashAttention-2's loop order: key blocks outside).

    With ``D_i = sum_c dO_ic O_ic``: ``dV = P^T dO``, ``dP = dO V^T``, ``dS = P * (dP - D + dlse)``,
    ``dQ = dS K / sqrt(d)``, ``dK = dS^T Q / sqrt(d)``. Shapes as the inputs (``q``'s leading axes:
    broadcast inputs get gradients summed back to their own shape).
    """
    acc = _accumulation_dtype(q.dtype)
    scale = 1.0 / math.sqrt(q.shape[-1])
    T_q, T_k = q.shape[-2], k.shape[-2]
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    key = _key_mask(key_padding_mask, q)
    qa, ka, va = (t.to(acc).expand(*lead, *t.shape[-2:]) for t in (q, k, v))
    d_out_a = d_out.to(acc)
    lse_safe = _finite_or_zero(lse.to(acc))
    D = (d_out_a * out.to(acc)).sum(dim=-1)
    if d_lse is not None:
        D = D - d_lse.to(acc)
    dq = torch.zeros_like(qa)
    dk = torch.zeros_like(ka)
    dv = torch.zeros_like(va)
    for k0 in range(0, T_k, block_k):
        k1 = min(k0 + block_k, T_k)
        k_blk, v_blk = ka[..., k0:k1, :], va[..., k0:k1, :]
        q_start = k0 if causal else 0  # query blocks entirely before this key block see none of it
        for q0 in range((q_start // block_q) * block_q, T_q, block_q):
            q1 = min(q0 + block_q, T_q)
            s = (qa[..., q0:q1, :] @ k_blk.transpose(-2, -1)) * scale
            if causal and k1 - 1 > q0:
                rows = torch.arange(q0, q1, device=q.device)[:, None]
                cols = torch.arange(k0, k1, device=q.device)[None, :]
                s = s.masked_fill(cols > rows, float("-inf"))
            if key is not None:
                s = s.masked_fill(~key[..., k0:k1], float("-inf"))
            p = torch.exp(s - lse_safe[..., q0:q1, None])
            do_blk = d_out_a[..., q0:q1, :]
            dv[..., k0:k1, :] += p.transpose(-2, -1) @ do_blk
            dp = do_blk @ v_blk.transpose(-2, -1)
            ds = p * (dp - D[..., q0:q1, None])
            dq[..., q0:q1, :] += (ds @ k_blk) * scale
            dk[..., k0:k1, :] += (ds.transpose(-2, -1) @ qa[..., q0:q1, :]) * scale
    return (_sum_to(dq, q), _sum_to(dk, k), _sum_to(dv, v))


def _sum_to(grad: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``grad`` summed over the axes ``like`` was broadcast along, in ``like``'s dtype."""
    return grad.sum_to_size(like.shape).to(like.dtype)


class TiledAttention(torch.autograd.Function):
    """Tiled attention with a recomputing backward: ``TiledAttention.apply(q, k, v, block_q,
    block_k, causal, key_padding_mask)`` returns ``(out, lse)`` like :func:`tiled_attention`; the
    forward saves only ``q, k, v, out, lse`` (no ``T_q x T_k`` tensor) and the backward rebuilds
    each tile (:func:`tiled_attention_backward`). Gradients flow to ``q, k, v`` through both
    outputs (``d lse_i / d s_ij = P_ij``)."""

    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_q: int = 64, block_k: int = 64,
                causal: bool = False, key_padding_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        out, lse = tiled_attention(q, k, v, block_q, block_k, causal, key_padding_mask)
        ctx.save_for_backward(q, k, v, out, lse, key_padding_mask)
        ctx.blocks = (block_q, block_k, causal)
        return out, lse

    @staticmethod
    def backward(ctx: Any, d_out: torch.Tensor, d_lse: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        q, k, v, out, lse, key_padding_mask = ctx.saved_tensors
        block_q, block_k, causal = ctx.blocks
        dq, dk, dv = tiled_attention_backward(q, k, v, out, lse, d_out, d_lse, block_q, block_k, causal, key_padding_mask)
        return dq, dk, dv, None, None, None, None


def _config_value(config: Any, *names: str) -> Any:
    for name in names:
        value = config.get(name) if isinstance(config, dict) else getattr(config, name, None)
        if value is not None:
            return value
    return None


def decoder_kv_cache_bytes(config: Any, T: int, batch: int = 1, dtype: torch.dtype = torch.float32) -> int:
    """Bytes of a decoder's KV cache holding ``T`` positions for ``batch`` sequences in ``dtype``:
    ``2 (K and V) x layers x batch x kv_heads x T x head_dim x bytes per element``.

    ``config`` is notebook 10's ``GPTConfig`` (``n_layer``, ``n_head``, ``d_model``: multi-head,
    one K/V head per query head), notebook 11's ``LlamaConfig`` (``n_layers``, ``n_heads``,
    ``n_kv_heads``, ``d_model``: grouped-query), or any object or dict with those names;
    ``head_dim`` is ``d_model // n_heads`` unless the config gives it.
    """
    n_layers = _config_value(config, "n_layers", "n_layer")
    n_heads = _config_value(config, "n_heads", "n_head")
    n_kv_heads = _config_value(config, "n_kv_heads") or n_heads
    head_dim = _config_value(config, "head_dim") or _config_value(config, "d_model") // n_heads
    itemsize = torch.empty((), dtype=dtype).element_size()
    return int(2 * n_layers * batch * n_kv_heads * T * head_dim * itemsize)
