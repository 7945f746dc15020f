"""Multi-head attention as notebook 04 builds it; later notebooks import it from here.

Shapes: B batch, T_q / T_k query / key lengths, d = d_model, h = n_heads, d_k = d / h.
Masks follow the course convention (:mod:`course_utils.masking`): boolean, True where
attention is *allowed*, broadcastable to the scores ``(B, h, T_q, T_k)``. A 2-d mask
``(T_q, T_k)`` applies to every sequence and head, a 3-d one ``(B, T_q, T_k)`` to every
head, a 4-d one ``(B or 1, h or 1, T_q, T_k)`` as it is.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from course_utils.masking import causal_mask, masked_softmax

__all__ = ["split_heads", "merge_heads", "MultiHeadAttention", "from_torch", "mha_parameter_count"]


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """``(B, T, d)`` -> ``(B, h, T, d/h)``: head i gets features ``[i*d_k, (i+1)*d_k)``.

    One ``view`` (cut the last axis into h blocks of d_k) and one ``transpose`` (bring the
    head axis before time); no data is copied.
    """
    B, T, d = x.shape
    if d % n_heads:
        raise ValueError(f"d_model={d} is not divisible by n_heads={n_heads}")
    return x.view(B, T, n_heads, d // n_heads).transpose(1, 2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """``(B, h, T, d_k)`` -> ``(B, T, h*d_k)``, the inverse of :func:`split_heads`
    (the concatenation ``head_1 ⊕ ... ⊕ head_h`` along features)."""
    B, h, T, d_k = x.shape
    return x.transpose(1, 2).reshape(B, T, h * d_k)


def _as_4d(mask: torch.Tensor | None) -> torch.Tensor | None:
    if mask is None:
        return None
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be boolean (True = allowed), got {mask.dtype}")
    if mask.dim() == 2:
        return mask  # (T_q, T_k) broadcasts over batch and heads
    if mask.dim() == 3:
        return mask.unsqueeze(1)  # (B, T_q, T_k) -> (B, 1, T_q, T_k)
    if mask.dim() == 4:
        return mask
    raise ValueError(f"mask must have 2, 3 or 4 dimensions, got shape {tuple(mask.shape)}")


class MultiHeadAttention(nn.Module):
    """``MultiHead(Q, K, V) = (head_1 ⊕ ... ⊕ head_h) W^O``, ``head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)``.

    The h per-head projections ``W_i^Q`` (d x d_k) are stored side by side as one
    ``nn.Linear(d, d)`` per role (``q_proj``, ``k_proj``, ``v_proj``); ``out_proj`` is ``W^O``.
    Parameters: ``4 d^2`` weights (+ ``4 d`` biases), whatever h is.

    forward(query (B, T_q, d), key (B, T_k, d), value (B, T_k, d), mask=None)
    -> output (B, T_q, d), weights (B, h, T_q, T_k) (``None`` when ``fused=True``).

    ``fused=True`` calls ``torch.nn.functional.scaled_dot_product_attention`` (which may use a
    flash / memory-efficient kernel and never builds the weights), for benchmarks.
    Fully masked query rows give zero output in both paths (no NaN). ``is_causal=True`` adds
    :func:`course_utils.masking.causal_mask` (bottom-right aligned: with ``T_q < T_k`` the queries
    are the last positions, as with a KV cache; SDPA's own ``is_causal`` aligns top-left).
    """

    def __init__(
        self, d_model: int, n_heads: int, bias: bool = True, dropout: float = 0.0, fused: bool = False
    ) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.d_model, self.n_heads, self.d_k = d_model, n_heads, d_model // n_heads
        self.dropout, self.fused = dropout, fused
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)  # W^Q = [W_1^Q ... W_h^Q]
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)  # W^K
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)  # W^V
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)  # W^O
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Same initialisation as ``nn.MultiheadAttention``: Xavier-uniform, zero biases."""
        for layer in (self.q_proj, self.k_proj, self.v_proj):
            nn.init.xavier_uniform_(layer.weight)
        nn.init.xavier_uniform_(self.out_proj.weight)
        for layer in (self.q_proj, self.k_proj, self.v_proj, self.out_proj):
            if layer.bias is not None:
                nn.init.zeros_(layer.bias)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
        is_causal: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        q = split_heads(self.q_proj(query), self.n_heads)  # (B, h, T_q, d_k)
        k = split_heads(self.k_proj(key), self.n_heads)  # (B, h, T_k, d_k)
        v = split_heads(self.v_proj(value), self.n_heads)  # (B, h, T_k, d_k)
        mask = _as_4d(mask)
        if is_causal:  # bottom-right aligned, as masking.causal_mask: right for a KV cache (T_q < T_k)
            causal = causal_mask(q.size(-2), k.size(-2), device=q.device)
            mask = causal if mask is None else mask & causal
        p = self.dropout if self.training else 0.0
        if self.fused:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
            weights = None
        else:
            # scale the (T_q, d_k) queries, not the (T_q, T_k) scores: same result, less work
            scores = (q * self.d_k**-0.5) @ k.transpose(-2, -1)  # (B, h, T_q, T_k)
            weights = masked_softmax(scores, None if mask is None else mask.expand_as(scores))
            out = F.dropout(weights, p) @ v if p > 0 else weights @ v
        return self.out_proj(merge_heads(out)), weights

    @torch.no_grad()
    def load_from_torch(self, source: nn.MultiheadAttention) -> "MultiHeadAttention":
        """Copy the weights of a ``torch.nn.MultiheadAttention`` (same d_model and heads) into self.

        ``nn.MultiheadAttention`` stacks W^Q, W^K, W^V as rows of ``in_proj_weight`` (3d x d),
        in that order. Returns self.
        """
        if source.embed_dim != self.d_model or source.num_heads != self.n_heads:
            raise ValueError(
                f"shape mismatch: torch module has d_model={source.embed_dim}, heads={source.num_heads}; "
                f"this one d_model={self.d_model}, heads={self.n_heads}"
            )
        if not source._qkv_same_embed_dim:
            raise ValueError("only nn.MultiheadAttention with kdim = vdim = embed_dim is supported")
        if (source.in_proj_bias is not None) != (self.q_proj.bias is not None) or source.bias_k is not None:
            raise ValueError("bias settings differ (or add_bias_kv=True, which is not supported)")
        for layer, weight in zip((self.q_proj, self.k_proj, self.v_proj), source.in_proj_weight.chunk(3, dim=0)):
            layer.weight.copy_(weight)
        if source.in_proj_bias is not None:
            for layer, bias in zip((self.q_proj, self.k_proj, self.v_proj), source.in_proj_bias.chunk(3)):
                layer.bias.copy_(bias)
        self.out_proj.weight.copy_(source.out_proj.weight)
        if self.out_proj.bias is not None:
            self.out_proj.bias.copy_(source.out_proj.bias)
        self.dropout = source.dropout
        return self


def from_torch(source: nn.MultiheadAttention, fused: bool = False) -> MultiHeadAttention:
    """A new :class:`MultiHeadAttention` holding a copy of ``source``'s weights."""
    bias = source.in_proj_bias is not None
    module = MultiHeadAttention(source.embed_dim, source.num_heads, bias=bias, dropout=source.dropout, fused=fused)
    module = module.to(device=source.in_proj_weight.device, dtype=source.in_proj_weight.dtype)
    return module.load_from_torch(source)


def mha_parameter_count(d_model: int, n_heads: int, bias: bool = True) -> int:
    """Parameters of multi-head attention: ``4 d^2 (+ 4 d)``; n_heads does not change it."""
    if d_model % n_heads:
        raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
    return 4 * d_model * d_model + (4 * d_model if bias else 0)
