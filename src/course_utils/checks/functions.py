"""Functions the tests hand to a student's code, as modules the student's kernel can hold.

A function a test cell defines (a lambda, a ``def``) stays in the trusted checker: the kernel
gets a stand-in that calls it back, so none of the tests' code enters the kernel. A call back
cannot be transformed (``torch.func.jacrev`` of it fails), so a test whose answer may transform
the function it is given (05's ``dependence_matrix``) passes one of these instead: a public
module, sent by value, that runs in the kernel like the student's own code.

Each maps ``x`` of shape ``(T, d)`` to ``(T, d_out)``.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["CumsumThen", "RollThen", "SquaredNorms", "CumsumTimesFlip", "TinyLM"]


class CumsumThen(nn.Module):
    """``y_i = (x_0 + ... + x_i) W`` (``W`` of shape ``(d, d_out)``; None: ``W = I``)."""

    def __init__(self, W: torch.Tensor | None = None) -> None:
        super().__init__()
        self.register_buffer("W", W)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x.cumsum(dim=0)
        return y if self.W is None else y @ self.W


class RollThen(nn.Module):
    """``y_i = x_{i - shift} A`` (cyclic), ``A`` of shape ``(d, d_out)``."""

    def __init__(self, A: torch.Tensor, shift: int = 1) -> None:
        super().__init__()
        self.register_buffer("A", A)
        self.shift = shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.roll(x, self.shift, dims=0) @ self.A


class SquaredNorms(nn.Module):
    """``y_i = |x_i|^2``, repeated ``copies`` times: shape ``(T, copies)``."""

    def __init__(self, copies: int) -> None:
        super().__init__()
        self.copies = copies

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x ** 2).sum(dim=1, keepdim=True).expand(x.size(0), self.copies)


class CumsumTimesFlip(nn.Module):
    """``y = cumsum(x) * flip(x)`` (creates no tensor of its own: a device and dtype probe)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.cumsum(dim=0) * x.flip(0)


class TinyLM(nn.Module):
    """A tiny language model, ids ``(B, T)`` -> logits ``(B, T, V)``: an embedding ``wte``, dropout and a
    linear head. What a training step does is the same for any model; this one holds none of a
    notebook's answers, so its copy runs in the student's kernel while any notebook is graded."""

    def __init__(self, vocab_size: int, d_model: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab_size, d_model)
        self.drop = nn.Dropout(dropout)
        self.lm_head = nn.Linear(d_model, vocab_size)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.drop(self.wte(ids)))
