"""Choosing the next token from a language model's logits, shared by :mod:`course_utils.gpt`
(notebook 10 builds these) and :mod:`course_utils.llama`.

Shapes: ``logits (..., V)`` for the filters, ``(B, V)`` for drawing; ids come back ``(B, 1)``.

- :func:`apply_temperature`, :func:`top_k_filter`, :func:`top_p_filter` -- reshape the distribution.
- :func:`sample_next` -- draw from probabilities with a generator, on the generator's device.
- :func:`next_token` -- greedy, or the three filters then a draw: one generation step.
"""

from __future__ import annotations

import torch

__all__ = ["apply_temperature", "top_k_filter", "top_p_filter", "sample_next", "next_token"]


def apply_temperature(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """``logits / temperature``: below 1 sharpens the distribution, above 1 flattens it."""
    if temperature <= 0:
        raise ValueError("temperature must be > 0 (use temperature=0 in generate() for greedy decoding)")
    return logits / temperature


def top_k_filter(logits: torch.Tensor, k: int | None) -> torch.Tensor:
    """Keep the ``k`` largest logits of the last axis (ties with the k-th are kept), set the rest to -inf."""
    if k is None or k >= logits.size(-1):
        return logits
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]  # (..., 1) the k-th largest
    return logits.masked_fill(logits < kth, float("-inf"))


def top_p_filter(logits: torch.Tensor, p: float | None) -> torch.Tensor:
    """Nucleus filter: keep the smallest set of most likely tokens whose probabilities add up to
    at least ``p`` (the token that crosses ``p`` is kept). ``p >= 1`` (or None) filters nothing;
    the most likely token is always kept, even for ``p <= 0`` (then only it can be drawn)."""
    if p is None or p >= 1.0:
        return logits
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
    probs = torch.softmax(sorted_logits, dim=-1)
    mass_before = probs.cumsum(dim=-1) - probs  # probability of the tokens ranked above each one
    drop_sorted = mass_before >= p  # already reached p without this token
    drop_sorted[..., 0] = False  # the most likely token stays, even for p <= 0 (else all -inf)
    drop = drop_sorted.scatter(-1, order, drop_sorted)  # back to vocabulary order
    return logits.masked_fill(drop, float("-inf"))


def sample_next(probs: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """``probs (B, V)`` -> ids ``(B, 1)`` drawn with ``generator``, on the probabilities' device.

    A generator made with ``torch.Generator()`` lives on the CPU, and ``torch.multinomial`` refuses
    one of another device: then the draw happens on the CPU, so a seed gives the same text on either."""
    if generator is None or generator.device == probs.device:
        return torch.multinomial(probs, 1, generator=generator)
    return torch.multinomial(probs.to(generator.device), 1, generator=generator).to(probs.device)


def next_token(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
               generator: torch.Generator | None = None) -> torch.Tensor:
    """``logits (B, V)`` -> next ids ``(B, 1)``: greedy when ``temperature == 0``, else drawn after the
    temperature, top-k and top-p filters (in float32, whatever the model's dtype)."""
    logits = logits.float()
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    logits = top_p_filter(top_k_filter(apply_temperature(logits, temperature), top_k), top_p)
    return sample_next(torch.softmax(logits, dim=-1), generator)
