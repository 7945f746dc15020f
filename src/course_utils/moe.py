"""A mixture-of-experts feed-forward layer as notebook 12 builds it, and GPTs that use it.

Shapes: N tokens (all positions of a batch, flattened), E experts, k experts per token,
d = d_model, d_ff one expert's hidden width.

- :func:`top_k_gating` -- router probabilities ``softmax(logits)`` over the E experts, the k
  largest per token, optionally renormalised to sum to one (Mixtral; with k = 1 that would make
  every weight 1, so Switch keeps the raw probability).
- :func:`load_balancing_loss` -- Switch Transformer's auxiliary loss ``E * sum_i f_i P_i``: ``f_i``
  the fraction of the N k assignments sent to expert i, ``P_i`` its mean router probability.
  It is 1 when routing is uniform and E when every token goes to one expert with certainty.
- :func:`expert_capacity`, :func:`capacity_keep` -- at most ``ceil(capacity_factor * N k / E)``
  assignments per expert; first choices are served before second choices, then in token order
  (GShard); the others are *dropped* (the residual connection carries those tokens on).
- :class:`MoEFeedForward` -- router + E :class:`course_utils.blocks.FeedForward` experts; a drop-in
  replacement of a GPT block's ``ffn`` ``(B, T, d) -> (B, T, d)``. It adds ``aux_weight *`` its
  balancing loss to the gradient of whatever loss is back-propagated (:class:`AddAuxiliaryLoss`),
  so notebook 10's unchanged :func:`course_utils.gpt.train_lm` trains it.
- :func:`swap_ffn`, :func:`moe_gpt`, :func:`dense_gpt` -- a :class:`course_utils.gpt.GPT` whose FFNs
  are replaced; :func:`expert_load`, :func:`ffn_parameters` -- what the measurements read.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from course_utils.blocks import FeedForward
from course_utils.gpt import GPT, GPTConfig, gpt2_init_

__all__ = ["top_k_gating", "load_balancing_loss", "expert_capacity", "capacity_keep", "AddAuxiliaryLoss",
           "MoEFeedForward", "swap_ffn", "moe_gpt", "dense_gpt", "moe_layers", "expert_load", "ffn_parameters"]


# --------------------------------------------------------------------------- routing
def top_k_gating(logits: torch.Tensor, k: int, normalize: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Router logits ``(N, E)`` -> ``weights (N, k)``, ``experts (N, k)`` (long), largest first.

    ``weights`` are the softmax probabilities (over the E experts) of the k chosen experts,
    divided by their sum when ``normalize`` (then each row sums to one).
    """
    probs = torch.softmax(logits, dim=-1)  # (N, E)
    weights, experts = torch.topk(probs, k, dim=-1)  # (N, k) each
    if normalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights, experts


def load_balancing_loss(probs: torch.Tensor, experts: torch.Tensor) -> torch.Tensor:
    """Switch Transformer's auxiliary loss ``E * sum_i f_i * P_i`` (a scalar).

    ``probs (N, E)``: router probabilities of every token; ``experts (N, k)``: the experts each
    token was sent to. ``f_i`` = share of the N k assignments that went to expert i (counts, not
    differentiable), ``P_i`` = mean of ``probs[:, i]`` (differentiable: the gradient reaches the router).
    """
    N, E = probs.shape
    counts = F.one_hot(experts.reshape(-1), E).to(probs.dtype).sum(dim=0)  # (E,)
    f = counts / experts.numel()  # (E,) sums to 1
    P = probs.mean(dim=0)  # (E,) sums to 1
    return E * (f * P).sum()


def expert_capacity(n_tokens: int, n_experts: int, k: int = 1, capacity_factor: float = 1.0) -> int:
    """How many assignments one expert takes: ``ceil(capacity_factor * n_tokens * k / n_experts)``."""
    return math.ceil(capacity_factor * n_tokens * k / n_experts)


def capacity_keep(experts: torch.Tensor, n_experts: int, capacity: int) -> torch.Tensor:
    """``experts (N, k)`` -> ``keep (N, k)`` bool: the assignments each expert has room for.

    Every expert serves at most ``capacity`` assignments: all first choices (in token order), then
    all second choices, and so on; the rest are dropped.
    """
    N, k = experts.shape
    queue = experts.T.reshape(-1)  # (k N,) choice-major: first choices of every token, then second...
    onehot = F.one_hot(queue, n_experts)  # (k N, E)
    position = (onehot.cumsum(dim=0) * onehot).sum(dim=-1) - 1  # (k N,) place in its expert's queue
    return (position < capacity).reshape(k, N).T


class AddAuxiliaryLoss(torch.autograd.Function):
    """``y = AddAuxiliaryLoss.apply(x, aux)`` returns ``x`` unchanged; in backward, ``aux`` receives
    gradient 1, so ``aux`` is added to whatever loss is back-propagated through ``y``."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, aux: torch.Tensor) -> torch.Tensor:  # noqa: D102
        ctx.aux_dtype, ctx.aux_device = aux.dtype, aux.device
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):  # noqa: D102
        return grad, torch.ones((), dtype=ctx.aux_dtype, device=ctx.aux_device)


# --------------------------------------------------------------------------- the layer
class MoEFeedForward(nn.Module):
    """Top-k routed experts in place of one FFN: ``(B, T, d) -> (B, T, d)``.

    ``capacity_factor=None`` keeps every assignment. After each forward: ``probs (N, E)``,
    ``experts (N, k)``, ``keep (N, k)``, ``aux_loss`` (scalar), ``load (E,)`` (share of the
    assignments per expert, before dropping) and ``dropped`` (share of the assignments dropped);
    in training mode ``load`` is also appended to ``load_history``.
    """

    def __init__(self, d_model: int, d_ff: int, n_experts: int = 4, k: int = 2,
                 capacity_factor: float | None = 1.25, aux_weight: float = 0.01, normalize: bool | None = None,
                 dropout: float = 0.0, activation: str = "gelu") -> None:
        super().__init__()
        if not 1 <= k <= n_experts:
            raise ValueError(f"k={k} must be between 1 and n_experts={n_experts}")
        self.n_experts, self.k = n_experts, k
        self.capacity_factor, self.aux_weight = capacity_factor, aux_weight
        self.normalize = k > 1 if normalize is None else normalize  # Switch (k = 1) keeps the raw probability
        self.router = nn.Linear(d_model, n_experts, bias=False)
        self.experts = nn.ModuleList(FeedForward(d_model, d_ff, dropout, activation) for _ in range(n_experts))
        self.load_history: list[torch.Tensor] = []
        self.probs = self.experts_chosen = self.keep = self.aux_loss = self.load = None
        self.dropped = 0.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, d = x.shape
        tokens = x.reshape(-1, d)  # (N, d)
        logits = self.router(tokens)  # (N, E)
        probs = torch.softmax(logits, dim=-1)
        weights, experts = top_k_gating(logits, self.k, self.normalize)  # (N, k) each
        if self.capacity_factor is None:
            keep = torch.ones_like(experts, dtype=torch.bool)
        else:
            capacity = expert_capacity(tokens.size(0), self.n_experts, self.k, self.capacity_factor)
            keep = capacity_keep(experts, self.n_experts, capacity)  # (N, k)
        out = torch.zeros_like(tokens)
        for e, expert in enumerate(self.experts):
            rows, slot = torch.nonzero((experts == e) & keep, as_tuple=True)  # tokens served by expert e
            if rows.numel():
                out = out.index_add(0, rows, weights[rows, slot, None] * expert(tokens[rows]))
        aux = load_balancing_loss(probs, experts)
        with torch.no_grad():
            self.probs, self.experts_chosen, self.keep, self.aux_loss = probs.detach(), experts, keep, aux.detach()
            self.load = F.one_hot(experts.reshape(-1), self.n_experts).float().mean(dim=0).cpu()  # (E,)
            self.dropped = 1.0 - keep.float().mean().item()
        if self.training:
            self.load_history.append(self.load)
            if self.aux_weight and torch.is_grad_enabled():
                out = AddAuxiliaryLoss.apply(out, self.aux_weight * aux)
        return out.reshape(B, T, d)


# --------------------------------------------------------------------------- GPTs with other FFNs
def swap_ffn(model: GPT, make_ffn: Callable[[], nn.Module]) -> GPT:
    """Replace every block's ``ffn`` by ``make_ffn()``, re-apply GPT-2's initialisation (the last
    Linear of every FFN counts as a residual projection) and keep the weight tying. In place."""
    for block in model.blocks:
        block.ffn = make_ffn()
        for module in block.ffn.modules():
            if isinstance(module, FeedForward):
                module.fc2.residual_projection = True
    gpt2_init_(model, model.config.n_layer)  # lm_head.weight is still wte.weight: tying survives
    return model


def moe_gpt(config: GPTConfig, n_experts: int = 4, k: int = 2, d_ff: int | None = None,
            capacity_factor: float | None = 1.25, aux_weight: float = 0.01, normalize: bool | None = None) -> GPT:
    """A :class:`GPT` whose FFNs are :class:`MoEFeedForward` (``d_ff`` per expert, default ``4 d / k``:
    the active FFN width of the dense GPT)."""
    d = config.d_model
    d_ff = 4 * d // k if d_ff is None else d_ff
    return swap_ffn(GPT(config), lambda: MoEFeedForward(d, d_ff, n_experts, k, capacity_factor, aux_weight, normalize,
                                                        config.dropout))


def dense_gpt(config: GPTConfig, d_ff: int) -> GPT:
    """A :class:`GPT` whose FFNs have width ``d_ff`` (the default GPT has ``4 d``)."""
    return swap_ffn(GPT(config), lambda: FeedForward(config.d_model, d_ff, config.dropout, activation="gelu"))


def moe_layers(model: nn.Module) -> list[MoEFeedForward]:
    """The :class:`MoEFeedForward` layers of a model, in order."""
    return [m for m in model.modules() if isinstance(m, MoEFeedForward)]


def expert_load(model: nn.Module) -> torch.Tensor:
    """Share of assignments per expert in the last forward: ``(n_moe_layers, E)``."""
    return torch.stack([layer.load for layer in moe_layers(model)])


def ffn_parameters(model: GPT) -> dict:
    """FFN parameters of a GPT: ``total`` (all experts and routers) and ``active`` (used per token:
    k experts + the router for an MoE layer, everything for a dense FFN)."""
    total = active = 0
    for block in model.blocks:
        ffn = block.ffn
        n = sum(p.numel() for p in ffn.parameters())
        total += n
        if isinstance(ffn, MoEFeedForward):
            per_expert = sum(p.numel() for p in ffn.experts[0].parameters())
            active += n - (ffn.n_experts - ffn.k) * per_expert
        else:
            active += n
    return {"total": total, "active": active}
