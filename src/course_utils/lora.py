"""LoRA (Hu et al. 2021), low-rank adaptation, as notebook 11 builds it.

A frozen ``nn.Linear`` with weight ``W (out, in)`` gets a trainable low-rank update:
``y = x W^T + (alpha / r) * x A^T B^T`` with ``A (r, in)`` and ``B (out, r)``, ``r << min(in, out)``.
``B`` starts at zero, so a freshly adapted model computes exactly what the base model did;
``A`` starts random (Kaiming-uniform, as PEFT), so the gradient of ``B`` is not zero.
Only ``r (in + out)`` numbers per adapted matrix are trained instead of ``in * out``; after training
:func:`merge_lora` folds ``(alpha / r) B A`` into ``W``, leaving a plain model at no extra cost.

- :class:`LoRALinear` -- the layer.
- :func:`add_lora` -- freeze a model and wrap its projections named in ``target_names``.
- :func:`lora_parameters` -- the trainable LoRA tensors (give them to the optimiser).
- :func:`merge_lora` -- fold every :class:`LoRALinear` back into an ``nn.Linear``.
"""

from __future__ import annotations

import math
from typing import Iterable

import torch
from torch import nn

__all__ = ["LoRALinear", "add_lora", "lora_parameters", "merge_lora", "count_parameters"]


class LoRALinear(nn.Module):
    """``base(x) + scaling * dropout(x) A^T B^T``: (..., in) -> (..., out), with ``base`` frozen.

    ``lora_A (rank, in)``, ``lora_B (out, rank)`` (zero at the start), ``scaling = alpha / rank``
    (so changing the rank does not change the size of the update at a given learning rate).
    Both are created on ``base.weight``'s device and dtype.
    """

    def __init__(self, base: nn.Linear, rank: int = 8, alpha: float = 16.0, dropout: float = 0.0) -> None:
        super().__init__()
        if rank <= 0:
            raise ValueError(f"rank must be positive, got {rank}")
        self.base = base
        for p in base.parameters():
            p.requires_grad_(False)
        self.rank, self.alpha = rank, alpha
        self.scaling = alpha / rank
        w = base.weight
        self.lora_A = nn.Parameter(torch.empty(rank, base.in_features, device=w.device, dtype=w.dtype))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank, device=w.device, dtype=w.dtype))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))  # as nn.Linear's own weights (and PEFT)
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()

    @property
    def in_features(self) -> int:
        return self.base.in_features

    @property
    def out_features(self) -> int:
        return self.base.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        update = (self.dropout(x) @ self.lora_A.T) @ self.lora_B.T  # (..., r) then (..., out): never (out, in)
        return self.base(x) + self.scaling * update

    def delta_weight(self) -> torch.Tensor:
        """The update of the weight, ``scaling * B A``: (out, in)."""
        return self.scaling * (self.lora_B @ self.lora_A)

    @torch.no_grad()
    def merged(self) -> nn.Linear:
        """A plain ``nn.Linear`` (a new module) with weight ``W + scaling * B A`` and the same bias."""
        base = self.base
        linear = nn.Linear(base.in_features, base.out_features, bias=base.bias is not None,
                           device=base.weight.device, dtype=base.weight.dtype)
        linear.weight.copy_(base.weight + self.delta_weight())
        if base.bias is not None:
            linear.bias.copy_(base.bias)
        return linear

    def extra_repr(self) -> str:
        return f"rank={self.rank}, alpha={self.alpha:g}, scaling={self.scaling:g}"


def count_parameters(model: nn.Module, trainable_only: bool = True) -> int:
    """Number of (trainable) parameters, a shared tensor counted once."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


def add_lora(model: nn.Module, target_names: Iterable[str] = ("q_proj", "v_proj"), rank: int = 8,
             alpha: float = 16.0, dropout: float = 0.0) -> int:
    """Freeze every parameter of ``model``, then replace, in place, each ``nn.Linear`` whose attribute
    name is in ``target_names`` (e.g. ``blocks.3.attn.q_proj``) by a :class:`LoRALinear`.

    Returns the number of trainable parameters (the LoRA ones). Raises ValueError when no module
    matches (a typo in a name would otherwise train nothing).
    """
    targets = set(target_names)
    for p in model.parameters():
        p.requires_grad_(False)
    found = [(parent, name, child) for parent in model.modules() for name, child in parent.named_children()
             if name in targets and isinstance(child, nn.Linear)]
    if not found:
        raise ValueError(f"no nn.Linear named one of {sorted(targets)} in the model")
    for parent, name, child in found:
        setattr(parent, name, LoRALinear(child, rank=rank, alpha=alpha, dropout=dropout))
    return count_parameters(model)


def lora_parameters(model: nn.Module) -> list[nn.Parameter]:
    """The ``lora_A`` and ``lora_B`` parameters of every :class:`LoRALinear` in ``model``."""
    return [p for m in model.modules() if isinstance(m, LoRALinear) for p in (m.lora_A, m.lora_B)]


def merge_lora(model: nn.Module) -> nn.Module:
    """Replace, in place, every :class:`LoRALinear` by an ``nn.Linear`` holding ``W + scaling * B A``;
    the outputs are unchanged (up to rounding), the extra matmuls are gone. Returns ``model``.
    The merged weights stay frozen (``requires_grad=False``) like the rest of the base model."""
    found = [(parent, name, child) for parent in model.modules() for name, child in parent.named_children()
             if isinstance(child, LoRALinear)]
    for parent, name, child in found:
        linear = child.merged()
        linear.requires_grad_(False)
        setattr(parent, name, linear)
    return model
