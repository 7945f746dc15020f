"""Notebook 14: after fine-tuning -- preference tuning (DPO) and RL from a verifiable reward (GRPO).

The course's reference answers of notebook 14's exercises, and the few helpers the notebook runs
around them:

- :func:`sequence_logprobs` -- the summed log-probability of the response tokens of each sequence;
- :func:`dpo_loss` -- Rafailov et al. 2023, eq. 7, with the implicit rewards ``beta * (pi - ref)``;
- :func:`make_preference_pairs` -- (chosen, rejected) sample indices from the rewards of groups of samples;
- :func:`group_advantages` -- GRPO's group-normalised advantages (Shao et al. 2024);
- :func:`grpo_loss` -- the clipped policy-gradient objective per token with the k3 KL penalty;
- :func:`token_logprobs` -- the per-token log-probabilities GRPO needs;
- :func:`date_reward`, :func:`format_reward` -- two verifiers of notebook 11's date task (the
  exact ISO date; only its shape, the one a policy can game);
- :func:`generate_groups` -- ``n`` answers to each of several prompts, batched with the KV cache
  (prompts of one length decode together, each prompt's prefill done once for its ``n`` copies);
- :func:`sample_group` -- ``n`` samples of one prompt in one batch (no padding needed).

Conventions (the ones the notebook grades): a response's log-probability is the **sum** over its
tokens (the DPO paper's code and TRL; Raschka's *LLMs-from-scratch* averages instead); GRPO's loss
is averaged over each sequence's response tokens, then over the batch.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from course_utils.sampling import next_token

__all__ = [
    "token_logprobs",
    "sequence_logprobs",
    "dpo_loss",
    "make_preference_pairs",
    "group_advantages",
    "grpo_loss",
    "date_reward",
    "format_reward",
    "generate_groups",
    "sample_group",
]

_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def token_logprobs(model: nn.Module, input_ids: torch.Tensor) -> torch.Tensor:
    """``log p(input_ids[:, t] | input_ids[:, :t])`` for t = 1..T-1: ``(B, T) -> (B, T - 1)``, float32.

    Position ``t - 1`` of the result scores token ``t`` (the logits at ``t - 1`` predict it).
    """
    logits = model(input_ids)[:, :-1].float()  # (B, T-1, V)
    targets = input_ids[:, 1:]  # (B, T-1)
    return logits.log_softmax(-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def sequence_logprobs(model: nn.Module, input_ids: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """Summed log-probability of the response tokens: ``input_ids (B, T)``, ``response_mask (B, T)``
    (true/1 on the response's tokens, false/0 on the prompt and on padding) ``-> (B,)`` float32.

    Token ``t`` is scored by the logits at ``t - 1``; position 0 (nothing predicts it) is never a
    response token.
    """
    per_token = token_logprobs(model, input_ids)  # (B, T-1)
    mask = response_mask[:, 1:].to(per_token.dtype)  # (B, T-1)
    return (per_token * mask).sum(-1)


def dpo_loss(policy_chosen: torch.Tensor, policy_rejected: torch.Tensor, ref_chosen: torch.Tensor,
             ref_rejected: torch.Tensor, beta: float = 0.1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """DPO (Rafailov et al. 2023, eq. 7) on summed log-probs, each ``(B,)``:
    ``-log sigmoid(beta * ((pi_c - ref_c) - (pi_r - ref_r)))`` averaged over the batch.

    Returns ``(loss ()``, ``chosen_rewards (B,)``, ``rejected_rewards (B,))``, the implicit rewards
    ``beta * (pi - ref)`` detached (they are measurements, not part of the graph).
    """
    chosen = policy_chosen - ref_chosen  # (B,)
    rejected = policy_rejected - ref_rejected  # (B,)
    loss = -F.logsigmoid(beta * (chosen - rejected)).mean()
    return loss, (beta * chosen).detach(), (beta * rejected).detach()


def make_preference_pairs(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """Pairs from groups of samples: ``rewards (P * group_size,)``, the samples of prompt ``p`` at
    ``p * group_size .. (p + 1) * group_size - 1`` ``-> (K, 2)`` long, rows ``[chosen, rejected]``
    (indices into ``rewards``), in the order of the prompts.

    Chosen: the first sample with the group's highest reward; rejected: the first with its lowest.
    A group whose rewards are all equal has no preference and gives no row (``K <= P``).
    """
    groups = rewards.reshape(-1, group_size)  # (P, G)
    best = groups.argmax(dim=1)  # torch returns the first maximal index
    worst = groups.argmin(dim=1)
    keep = groups.max(dim=1).values > groups.min(dim=1).values  # (P,)
    offset = torch.arange(groups.size(0), device=rewards.device) * group_size
    pairs = torch.stack([offset + best, offset + worst], dim=1)  # (P, 2)
    return pairs[keep].long()


def group_advantages(rewards: torch.Tensor, group_size: int, eps: float = 1e-4) -> torch.Tensor:
    """GRPO's advantages (Shao et al. 2024): ``(r - mean) / (std + eps)`` within each group of
    ``group_size`` consecutive samples (one prompt), ``std`` the sample standard deviation (divisor
    ``group_size - 1``, torch's default): ``rewards (P * group_size,) -> (P * group_size,)``, in the
    rewards' float dtype (float32 for integer rewards).
    A group of equal rewards gives zeros."""
    groups = rewards.reshape(-1, group_size)  # (P, G)
    if not groups.is_floating_point():
        groups = groups.float()
    mean = groups.mean(dim=1, keepdim=True)
    std = groups.std(dim=1, keepdim=True)
    return ((groups - mean) / (std + eps)).reshape(-1)


def grpo_loss(logprobs: torch.Tensor, old_logprobs: torch.Tensor, ref_logprobs: torch.Tensor,
              advantages: torch.Tensor, response_mask: torch.Tensor, clip: float = 0.2,
              kl_coef: float = 0.04) -> torch.Tensor:
    """GRPO's loss (Shao et al. 2024, eq. 3), per token ``t`` of a response:

    ``-(min(rho A, clip(rho, 1 - clip, 1 + clip) A) - kl_coef * k3)`` with ``rho = exp(logp - old)``
    and ``k3 = exp(ref - logp) - (ref - logp) - 1``; averaged over each sequence's response tokens,
    then over the batch. ``logprobs``, ``old_logprobs``, ``ref_logprobs``, ``response_mask`` are
    ``(B, T)`` (per-token), ``advantages (B,)``; ``old_logprobs`` and ``ref_logprobs`` are
    constants (no gradient flows into them). Returns a scalar.
    """
    old = old_logprobs.detach()
    ref = ref_logprobs.detach()
    adv = advantages.detach().to(logprobs.dtype)[:, None]  # (B, 1)
    ratio = torch.exp(logprobs - old)  # (B, T)
    surrogate = torch.minimum(ratio * adv, ratio.clamp(1 - clip, 1 + clip) * adv)
    log_ratio_ref = ref - logprobs
    kl = torch.exp(log_ratio_ref) - log_ratio_ref - 1  # k3 >= 0
    per_token = -(surrogate - kl_coef * kl)  # (B, T)
    mask = response_mask.to(logprobs.dtype)
    per_sequence = (per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1)  # (B,)
    return per_sequence.mean()


def date_reward(answer: str, target: str) -> float:
    """The verifier of the date task: 1.0 when the answer (stripped) is exactly the ISO date, else 0.0."""
    return float(answer.strip() == target)


def format_reward(answer: str, target: str = "") -> float:
    """A weaker verifier: 1.0 for any answer shaped like ``YYYY-MM-DD``, whatever the date (gameable)."""
    return float(bool(_ISO.match(answer.strip())))


@torch.no_grad()
def generate_groups(model: nn.Module, prompts: Sequence[Sequence[int]], n: int, max_new_tokens: int, *, stop_id: int,
                    temperature: float = 1.0, generator: torch.Generator | None = None) -> list[list[int]]:
    """``n`` responses to each prompt, returned prompt by prompt (those of prompt ``p`` at
    ``p * n .. (p + 1) * n - 1``), each cut after its first ``stop_id`` (kept) or at ``max_new_tokens``;
    ``temperature=0`` is greedy.

    Batched without padding (``model`` is a :class:`course_utils.llama.Llama`, whose attention has no
    padding mask): the prompts of one token length form one batch; each prompt is run through the
    model once (prefill) and its KV cache copied to its ``n`` rows, which then decode together one
    position per step until every row has stopped. Batches run in the order of their first prompt.
    """
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    by_length: dict[int, list[int]] = defaultdict(list)
    for p, prompt in enumerate(prompts):
        by_length[len(prompt)].append(p)
    responses: list[list[int]] = [[] for _ in range(len(prompts) * n)]
    for length, members in by_length.items():
        ids = torch.tensor([list(prompts[p]) for p in members], device=device)  # (U, T0)
        steps = min(max_new_tokens, model.config.max_seq_len - length)
        prefill = model.new_cache(len(members), length)
        logits = model(ids, prefill)[:, -1].float().repeat_interleave(n, dim=0)  # (U * n, V)
        cache = model.new_cache(len(members) * n, length + steps)
        for layer in range(len(cache.keys)):  # each prompt's keys and values, copied to its n rows
            cache.keys[layer][:, :, :length] = prefill.keys[layer].repeat_interleave(n, dim=0)
            cache.values[layer][:, :, :length] = prefill.values[layer].repeat_interleave(n, dim=0)
            cache.lengths[layer] = length
        done = torch.zeros(len(members) * n, dtype=torch.bool, device=device)
        new: list[torch.Tensor] = []
        for step in range(steps):
            nxt = next_token(logits, temperature, None, None, generator)  # (U * n, 1)
            nxt = torch.where(done[:, None], torch.full_like(nxt, stop_id), nxt)
            done = done | (nxt[:, 0] == stop_id)
            new.append(nxt)
            if bool(done.all()) or step == steps - 1:
                break
            logits = model(nxt, cache)[:, -1].float()
        rows = torch.cat(new, dim=1).tolist() if new else [[] for _ in range(len(members) * n)]
        for k, row in enumerate(rows):
            p, i = members[k // n], k % n
            responses[p * n + i] = row[: row.index(stop_id) + 1] if stop_id in row else row
    model.train(was_training)
    return responses


@torch.no_grad()
def sample_group(model: nn.Module, prompt_ids: Sequence[int], n: int, max_new_tokens: int, *, stop_id: int,
                 temperature: float = 1.0, generator: torch.Generator | None = None) -> list[list[int]]:
    """``n`` sampled responses to one prompt, generated as one batch of ``n`` copies of the prompt
    (same length: no padding, one prefill), each cut after its first ``stop_id`` (kept) or at
    ``max_new_tokens``: :func:`generate_groups` of one prompt."""
    return generate_groups(model, [prompt_ids], n, max_new_tokens, stop_id=stop_id, temperature=temperature,
                           generator=generator)
