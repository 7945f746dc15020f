"""Self-attention as notebook 03 builds it; later notebooks import it from here.

Shapes use B (batch), T (sequence length; T_q queries and T_k keys may differ), and
d (feature size). A mask is boolean and ``True`` where attention is *allowed*, the same
convention as ``torch.nn.functional.scaled_dot_product_attention``'s boolean ``attn_mask``.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["softmax", "scaled_dot_product_attention", "SelfAttentionHead"]


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along ``dim``: subtract the max before ``exp``.

    Rows that are entirely ``-inf`` (every position masked) come out as NaN, as in
    ``torch.softmax``; notebook 05 shows how to avoid building such rows.
    """
    shifted = x - x.amax(dim=dim, keepdim=True)
    exps = shifted.exp()
    return exps / exps.sum(dim=dim, keepdim=True)


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``softmax(q k^T / sqrt(d)) v`` over the last two dimensions.

    q: (..., T_q, d), k: (..., T_k, d), v: (..., T_k, d_v);
    mask: bool, broadcastable to (..., T_q, T_k), True where query i may attend to key j.
    Returns (output (..., T_q, d_v), weights (..., T_q, T_k)); each row of weights sums to 1.

    ``(q / sqrt(d)) k^T`` equals ``q k^T / sqrt(d)``; scaling the ``T_q x d`` queries costs less
    than scaling the ``T_q x T_k`` scores (and its backward), so the queries are scaled first.
    """
    d = q.size(-1)
    scores = (q * d**-0.5) @ k.transpose(-2, -1)  # (..., T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = softmax(scores, dim=-1)
    return weights @ v, weights


class SelfAttentionHead(nn.Module):
    """One head of self-attention: project x to queries, keys and values, then attend.

    x: (B, T, d_model) -> output (B, T, d_head), weights (B, T, T).
    """

    def __init__(self, d_model: int, d_head: int | None = None, bias: bool = False) -> None:
        super().__init__()
        d_head = d_head or d_model
        self.query = nn.Linear(d_model, d_head, bias=bias)  # W_Q
        self.key = nn.Linear(d_model, d_head, bias=bias)  # W_K
        self.value = nn.Linear(d_model, d_head, bias=bias)  # W_V

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        q, k, v = self.query(x), self.key(x), self.value(x)  # each (B, T, d_head)
        return scaled_dot_product_attention(q, k, v, mask)
