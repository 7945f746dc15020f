"""Unit tests of course_utils.preference (notebook 14: DPO and GRPO) on tiny random Llama models
and hand-computed numbers; the DPO loss against TRL's where ``trl`` is installed (dev-only)."""

from __future__ import annotations

import math
from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch

from course_utils.device import cpu_threads
from course_utils.llama import Llama, LlamaConfig
from course_utils.preference import (date_reward, dpo_loss, format_reward, generate_groups, group_advantages, grpo_loss,
                                     make_preference_pairs, sample_group, sequence_logprobs, token_logprobs)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    with cpu_threads(1):  # tiny models: as fast, and far faster on shared cores
        yield


def tiny(seed: int = 0) -> Llama:
    torch.manual_seed(seed)
    return Llama(LlamaConfig.tiny()).eval()


def _by_hand(model: Llama, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Loop over rows and positions: log softmax of the logits at t - 1, at token t, where mask[t]."""
    with torch.no_grad():
        logp = torch.log_softmax(model(ids).double(), dim=-1)
    out = torch.zeros(ids.size(0), dtype=torch.float64)
    for b in range(ids.size(0)):
        for t in range(1, ids.size(1)):
            if mask[b, t]:
                out[b] += logp[b, t - 1, ids[b, t]]
    return out


# ----------------------------------------------------------------------------- log-probs
def test_sequence_logprobs_matches_a_loop_with_padding_on_either_side():
    model = tiny()
    torch.manual_seed(1)
    ids = torch.randint(0, 256, (3, 9))
    mask = torch.zeros(3, 9, dtype=torch.bool)
    mask[0, 5:] = True          # right-aligned response, no padding
    mask[1, 4:7] = True         # right padding after position 6
    mask[2, 8] = True           # left padding before, a response of one token
    with torch.no_grad():
        got = sequence_logprobs(model, ids, mask)
    assert got.shape == (3,) and got.dtype == torch.float32
    torch.testing.assert_close(got.double(), _by_hand(model, ids, mask), atol=1e-5, rtol=0)


def test_sequence_logprobs_is_the_masked_sum_of_token_logprobs_and_backpropagates():
    model = tiny(2)
    ids = torch.randint(0, 256, (2, 6))
    mask = torch.tensor([[0, 0, 1, 1, 1, 0], [0, 1, 1, 1, 1, 1]])
    per_token = token_logprobs(model, ids)
    assert per_token.shape == (2, 5) and bool((per_token <= 0).all())
    torch.testing.assert_close(sequence_logprobs(model, ids, mask), (per_token * mask[:, 1:]).sum(-1))
    sequence_logprobs(model, ids, mask).sum().backward()
    assert model.embed.weight.grad is not None and float(model.embed.weight.grad.abs().sum()) > 0


# ----------------------------------------------------------------------------- DPO
def test_dpo_loss_is_ln2_when_the_policy_is_the_reference():
    pi_c, pi_r = torch.tensor([-3.0, -7.5]), torch.tensor([-2.0, -9.0])
    loss, chosen, rejected = dpo_loss(pi_c, pi_r, pi_c.clone(), pi_r.clone(), beta=0.1)
    assert loss.shape == () and abs(float(loss) - math.log(2)) < 1e-6
    assert torch.equal(chosen, torch.zeros(2)) and torch.equal(rejected, torch.zeros(2))


def test_dpo_loss_worked_example_and_rewards():
    loss, chosen, rejected = dpo_loss(torch.tensor([-1.0]), torch.tensor([-2.0]), torch.tensor([-1.5]),
                                      torch.tensor([-1.5]), beta=0.1)
    assert round(float(loss), 4) == 0.6444  # -log sigmoid(0.1 * (0.5 - (-0.5)))
    torch.testing.assert_close(chosen, torch.tensor([0.05]))
    torch.testing.assert_close(rejected, torch.tensor([-0.05]))


def test_dpo_loss_gradient_signs_and_detached_rewards():
    pi_c = torch.tensor([-4.0, -1.0], requires_grad=True)
    pi_r = torch.tensor([-3.0, -6.0], requires_grad=True)
    loss, chosen, rejected = dpo_loss(pi_c, pi_r, torch.tensor([-4.0, -2.0]), torch.tensor([-3.5, -5.0]), beta=0.5)
    assert not chosen.requires_grad and not rejected.requires_grad
    loss.backward()
    assert bool((pi_c.grad < 0).all()) and bool((pi_r.grad > 0).all())


def test_dpo_loss_does_not_overflow():
    big = torch.tensor([-2000.0])
    loss, _, _ = dpo_loss(big, torch.tensor([0.0]), torch.tensor([0.0]), torch.tensor([0.0]), beta=1.0)
    assert math.isfinite(float(loss)) and abs(float(loss) - 2000.0) < 1e-3


def _trl_loss(pi_c, pi_r, ref_c, ref_r, beta):
    """TRL's DPOTrainer._compute_loss (loss_type sigmoid) on per-token log-probs that sum to ours, run on a
    stand-in trainer (no model, no accelerator: only the attributes the loss reads)."""
    trl_dpo = pytest.importorskip("trl.trainer.dpo_trainer")
    B = pi_c.size(0)
    T = 4
    per_token = torch.zeros(2 * B, T - 1)
    per_token[:B, -1], per_token[B:, -1] = pi_c, pi_r  # one completion token each; a sum is a sum
    completion = torch.zeros(2 * B, T, dtype=torch.long)
    completion[:, -1] = 1
    outputs = SimpleNamespace(log_probs=per_token, entropy=torch.zeros(2 * B, T - 1),
                              mean_logits=torch.zeros(2 * B, T - 1), is_top1=torch.zeros(2 * B, T - 1, dtype=torch.bool))
    metrics: dict = {"train": defaultdict(list), "eval": defaultdict(list)}
    accelerator = SimpleNamespace(device=torch.device("cpu"), gather=lambda t: t, gather_for_metrics=lambda t: t)
    stub = SimpleNamespace(model=SimpleNamespace(training=True), accelerator=accelerator, aux_loss_enabled=False,
                           ld_alpha=None, precompute_ref_logps=True, f_divergence_type="reverse_kl",
                           loss_types=["sigmoid"], loss_weights=[1.0], beta=beta, use_weighting=False,
                           _metrics=metrics, _total_train_tokens=0, _tp_size=1)
    inputs = {"input_ids": torch.zeros(2 * B, T, dtype=torch.long), "attention_mask": torch.ones(2 * B, T, dtype=torch.long),
              "completion_mask": completion, "ref_chosen_logps": ref_c, "ref_rejected_logps": ref_r}
    return trl_dpo.DPOTrainer._compute_loss(stub, lambda **kwargs: outputs, inputs, False)


def test_dpo_loss_equals_trl():
    torch.manual_seed(3)
    pi_c, pi_r, ref_c, ref_r = (-20 * torch.rand(6) for _ in range(4))
    for beta in (0.05, 0.1, 0.5):
        expected = _trl_loss(pi_c, pi_r, ref_c, ref_r, beta)
        got, _, _ = dpo_loss(pi_c, pi_r, ref_c, ref_r, beta=beta)
        assert abs(float(got) - float(expected)) < 1e-6, (beta, float(got), float(expected))


# ----------------------------------------------------------------------------- pairs
def test_make_preference_pairs_first_best_first_worst_and_drops_ties():
    rewards = torch.tensor([0.0, 1.0, 1.0, 0.0,     # chosen 1, rejected 0
                            1.0, 1.0, 1.0, 1.0,     # dropped: no preference
                            0.5, 0.0, 1.0, 0.0])    # chosen 10, rejected 9
    pairs = make_preference_pairs(rewards, 4)
    assert pairs.dtype == torch.long and pairs.tolist() == [[1, 0], [10, 9]]
    assert make_preference_pairs(torch.zeros(6), 3).shape == (0, 2)


# ----------------------------------------------------------------------------- GRPO
def test_group_advantages_per_group_and_zero_for_equal_rewards():
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    adv = group_advantages(rewards, 4)
    std = torch.tensor([1.0, 0.0, 0.0, 1.0]).std()  # Bessel-corrected, as torch's default
    torch.testing.assert_close(adv[:4], (torch.tensor([1.0, 0.0, 0.0, 1.0]) - 0.5) / (std + 1e-4))
    assert torch.equal(adv[4:], torch.zeros(4)) and not bool(adv.isnan().any())
    torch.testing.assert_close(group_advantages(torch.tensor([2.0, 0.0]), 2, eps=1.0),
                               torch.tensor([1.0, -1.0]) / (math.sqrt(2.0) + 1.0))


def test_grpo_loss_first_step_is_minus_the_mean_advantage_weighted_logprob_gradient():
    torch.manual_seed(4)
    logp = -torch.rand(3, 5) - 0.1
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 1, 1, 0, 0]])
    adv = torch.tensor([1.0, -0.5, 2.0])
    x = logp.clone().requires_grad_(True)
    loss = grpo_loss(x, logp, logp, adv, mask, clip=0.2, kl_coef=0.04)  # policy = old = reference
    expected = -(adv * 1.0).mean()  # ratio 1 everywhere, k3 = 0
    assert abs(float(loss.detach()) - float(expected)) < 1e-6
    loss.backward()
    expected_grad = -(adv[:, None] * mask) / mask.sum(-1, keepdim=True) / 3  # per sequence, then over the batch
    torch.testing.assert_close(x.grad, expected_grad)


def test_grpo_loss_clips_the_ratio_and_adds_the_k3_penalty():
    logp = torch.tensor([[math.log(2.0)]])          # ratio 2 to old = 0
    old = torch.zeros(1, 1)
    ref = torch.zeros(1, 1)
    mask = torch.ones(1, 1)
    k3 = math.exp(-math.log(2.0)) + math.log(2.0) - 1  # exp(ref - logp) - (ref - logp) - 1
    assert k3 > 0
    loss_pos = grpo_loss(logp, old, ref, torch.tensor([1.0]), mask, clip=0.2, kl_coef=0.1)
    assert abs(float(loss_pos) - (-1.2 + 0.1 * k3)) < 1e-6  # min(2, 1.2) * 1
    loss_neg = grpo_loss(logp, old, ref, torch.tensor([-1.0]), mask, clip=0.2, kl_coef=0.0)
    assert abs(float(loss_neg) - 2.0) < 1e-6  # min(-2, -1.2) = -2: the pessimistic bound
    x = logp.clone().requires_grad_(True)
    o = old.clone().requires_grad_(True)
    r = ref.clone().requires_grad_(True)
    grpo_loss(x, o, r, torch.tensor([1.0]), mask, kl_coef=0.1).backward()
    assert o.grad is None and r.grad is None and x.grad is not None


def test_grpo_loss_ignores_padding():
    logp, mask = -torch.rand(2, 4), torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]])
    a = grpo_loss(logp, logp - 0.1, logp + 0.2, torch.tensor([0.5, -1.0]), mask)
    garbage = logp.clone()
    garbage[0, 2:] = -50.0
    b = grpo_loss(garbage, logp - 0.1, logp + 0.2, torch.tensor([0.5, -1.0]), mask)
    assert abs(float(a) - float(b)) < 1e-6


# ----------------------------------------------------------------------------- verifiers, sampling
def test_verifiers():
    assert date_reward(" 2019-12-19 ", "2019-12-19") == 1.0 and date_reward("2019-12-18", "2019-12-19") == 0.0
    assert format_reward("1999-01-01", "2019-12-19") == 1.0 and format_reward("19 December 2019") == 0.0


def test_sample_group_cuts_each_response_after_its_stop_token():
    model = tiny(5)
    gen = torch.Generator().manual_seed(0)
    out = sample_group(model, [1, 2, 3], 4, 6, stop_id=7, generator=gen)
    assert len(out) == 4
    for row in out:
        assert 1 <= len(row) <= 6 and (7 not in row[:-1])
    again = sample_group(model, [1, 2, 3], 4, 6, stop_id=7, generator=torch.Generator().manual_seed(0))
    assert again == out


def test_generate_groups_greedy_equals_one_prompt_at_a_time_across_lengths():
    model = tiny(6)
    prompts = [[1, 2, 3], [4, 5], [6, 7, 8], [9, 10, 11, 12], [2, 2]]
    got = generate_groups(model, prompts, 2, 6, stop_id=7, temperature=0.0)
    assert len(got) == 2 * len(prompts)
    for p, prompt in enumerate(prompts):
        ids = torch.tensor([prompt])
        row = model.generate(ids, 6, stop_ids=(7,))[0, len(prompt):].tolist()
        expected = row[: row.index(7) + 1] if 7 in row else row
        assert got[2 * p] == expected and got[2 * p + 1] == expected, (p, got[2 * p: 2 * p + 2], expected)


def test_generate_groups_samples_each_prompt_n_times_in_prompt_order():
    model = tiny(7)
    prompts = [[1, 2, 3], [4, 5], [6, 7, 8]]
    gen = torch.Generator().manual_seed(0)
    got = generate_groups(model, prompts, 3, 5, stop_id=7, generator=gen)
    assert len(got) == 9 and all(1 <= len(r) <= 5 and 7 not in r[:-1] for r in got)
    assert got == generate_groups(model, prompts, 3, 5, stop_id=7, generator=torch.Generator().manual_seed(0))
    model.train()
    generate_groups(model, prompts[:1], 2, 3, stop_id=7)
    assert model.training  # the mode is restored
