"""Curated wrong answers of notebook 14 (after fine-tuning: DPO and GRPO); each must be rejected,
and each alternative right answer accepted."""

from course_grader.authoring.mistakes import Accepted, Mistake

SEQ = "sequence_logprobs"
DPO = "dpo_loss"
PAIRS = "make_preference_pairs"
ADV = "group_advantages"
GRPO = "grpo_loss"

MISTAKES = [
    # ------------------------------------------------------------------ sequence_logprobs
    Mistake(cell=SEQ, name="mask off by one: the prompt's last token scored, the response's last not", kind="boundary",
            rejected_by=("test_sequence_logprobs",),
            replace=(("response_mask[:, 1:]", "response_mask[:, :-1]"),)),
    Mistake(cell=SEQ, name="no shift: logits at t scored against token t", kind="boundary",
            rejected_by=("test_sequence_logprobs",),
            source=('def sequence_logprobs(model, input_ids, response_mask):\n'
                    '    logp = model(input_ids).float().log_softmax(-1).gather(-1, input_ids[..., None]).squeeze(-1)\n'
                    '    return (logp * response_mask.float()).sum(-1)\n')),
    Mistake(cell=SEQ, name="log-probs of the whole sequence (mask ignored)", kind="logic",
            rejected_by=("test_sequence_logprobs",),
            replace=(("(logp * response_mask[:, 1:].to(logp.dtype)).sum(-1)", "logp.sum(-1)"),)),
    Mistake(cell=SEQ, name="mean over the response tokens instead of the sum", kind="statistics",
            rejected_by=("test_sequence_logprobs",),
            replace=(("return (logp * response_mask[:, 1:].to(logp.dtype)).sum(-1)",
                      "m = response_mask[:, 1:].to(logp.dtype)\n    return (logp * m).sum(-1) / m.sum(-1)"),)),
    Mistake(cell=SEQ, name="mask = everything after the first response token (padding on the right counted)", kind="boundary",
            rejected_by=("test_sequence_logprobs",),
            replace=(("(logp * response_mask[:, 1:].to(logp.dtype)).sum(-1)",
                      "(logp * (response_mask.long().cumsum(-1) > 0)[:, 1:].to(logp.dtype)).sum(-1)"),)),
    Mistake(cell=SEQ, name="computed under torch.no_grad() (no gradient for DPO)", kind="autograd",
            rejected_by=("test_sequence_logprobs",),
            replace=(("    logits = model(input_ids)[:, :-1].float()", "    with torch.no_grad():\n        logits = model(input_ids)[:, :-1].float()"),)),
    Mistake(cell=SEQ, name="softmax probabilities summed, not log-probabilities", kind="logic",
            rejected_by=("test_sequence_logprobs",),
            replace=(("logits.log_softmax(-1)", "logits.softmax(-1)"),)),
    Mistake(cell=SEQ, name="reference import", kind="reference",
            rejected_by=("test_sequence_logprobs",),
            source="from course_utils.preference import sequence_logprobs\n"),
    # ------------------------------------------------------------------ dpo_loss
    Mistake(cell=DPO, name="log(sigmoid(x)) overflows for a large negative margin", kind="boundary",
            rejected_by=("test_dpo_loss",),
            replace=(("-F.logsigmoid(beta * (chosen - rejected)).mean()", "-torch.log(torch.sigmoid(beta * (chosen - rejected))).mean()"),)),
    Mistake(cell=DPO, name="rewards not detached", kind="autograd",
            rejected_by=("test_dpo_loss",),
            replace=(("return loss, (beta * chosen).detach(), (beta * rejected).detach()", "return loss, beta * chosen, beta * rejected"),)),
    Mistake(cell=DPO, name="margin's sign flipped (rejected - chosen)", kind="logic",
            rejected_by=("test_dpo_loss",),
            replace=(("beta * (chosen - rejected)", "beta * (rejected - chosen)"),)),
    Mistake(cell=DPO, name="sum over the batch instead of the mean", kind="statistics",
            rejected_by=("test_dpo_loss",),
            replace=(("-F.logsigmoid(beta * (chosen - rejected)).mean()", "-F.logsigmoid(beta * (chosen - rejected)).sum()"),)),
    Mistake(cell=DPO, name="beta outside the sigmoid", kind="logic",
            rejected_by=("test_dpo_loss",),
            replace=(("-F.logsigmoid(beta * (chosen - rejected)).mean()", "-beta * F.logsigmoid(chosen - rejected).mean()"),)),
    Mistake(cell=DPO, name="reference ignored (policy log-probs only)", kind="logic",
            rejected_by=("test_dpo_loss",),
            replace=(("chosen = policy_chosen - ref_chosen", "chosen = policy_chosen"),
                     ("rejected = policy_rejected - ref_rejected", "rejected = policy_rejected"))),
    Mistake(cell=DPO, name="rewards without beta", kind="logic",
            rejected_by=("test_dpo_loss",),
            replace=(("return loss, (beta * chosen).detach(), (beta * rejected).detach()", "return loss, chosen.detach(), rejected.detach()"),)),
    Mistake(cell=DPO, name="reference import", kind="reference",
            rejected_by=("test_dpo_loss",),
            source="from course_utils.preference import dpo_loss\n"),
    # ------------------------------------------------------------------ make_preference_pairs
    Mistake(cell=PAIRS, name="indices within the group, not into rewards", kind="logic",
            rejected_by=("test_make_preference_pairs",),
            replace=(("torch.stack([offset + groups.argmax(dim=1), offset + groups.argmin(dim=1)], dim=1)",
                      "torch.stack([groups.argmax(dim=1), groups.argmin(dim=1)], dim=1)"),)),
    Mistake(cell=PAIRS, name="tied groups kept", kind="logic",
            rejected_by=("test_make_preference_pairs",),
            replace=(("return pairs[keep].long()", "return pairs.long()"),)),
    Mistake(cell=PAIRS, name="last of the tied best, not the first", kind="boundary",
            rejected_by=("test_make_preference_pairs",),
            replace=(("offset + groups.argmax(dim=1)", "offset + group_size - 1 - groups.flip(1).argmax(dim=1)"),)),
    Mistake(cell=PAIRS, name="columns swapped (rejected, chosen)", kind="logic",
            rejected_by=("test_make_preference_pairs",),
            replace=(("[offset + groups.argmax(dim=1), offset + groups.argmin(dim=1)]", "[offset + groups.argmin(dim=1), offset + groups.argmax(dim=1)]"),)),
    Mistake(cell=PAIRS, name="reference import", kind="reference",
            rejected_by=("test_make_preference_pairs",),
            source="from course_utils.preference import make_preference_pairs\n"),
    # ------------------------------------------------------------------ group_advantages
    Mistake(cell=ADV, name="std without eps: NaN for a group of equal rewards", kind="boundary",
            rejected_by=("test_group_advantages",),
            replace=(("(groups.std(dim=1, keepdim=True) + eps)", "groups.std(dim=1, keepdim=True)"),)),
    Mistake(cell=ADV, name="eps under the square root", kind="statistics",
            rejected_by=("test_group_advantages",),
            replace=(("(groups.std(dim=1, keepdim=True) + eps)", "torch.sqrt(groups.var(dim=1, keepdim=True) + eps)"),)),
    Mistake(cell=ADV, name="normalised over the whole batch, not per group", kind="statistics",
            rejected_by=("test_group_advantages",),
            replace=(("centred = groups - groups.mean(dim=1, keepdim=True)\n    return (centred / (groups.std(dim=1, keepdim=True) + eps)).reshape(-1)",
                      "return ((groups - groups.mean()) / (groups.std() + eps)).reshape(-1)"),)),
    Mistake(cell=ADV, name="population std (divisor group_size)", kind="statistics",
            rejected_by=("test_group_advantages",),
            replace=(("groups.std(dim=1, keepdim=True)", "groups.std(dim=1, keepdim=True, unbiased=False)"),)),
    Mistake(cell=ADV, name="groups taken as strided columns (reshape(group_size, -1))", kind="structure",
            rejected_by=("test_group_advantages",),
            source=('def group_advantages(rewards, group_size, eps=1e-4):\n'
                    '    groups = rewards.float().reshape(group_size, -1)\n'
                    '    return ((groups - groups.mean(0)) / (groups.std(0) + eps)).reshape(-1)\n')),
    Mistake(cell=ADV, name="mean only (no division by the std)", kind="statistics",
            rejected_by=("test_group_advantages",),
            replace=(("return (centred / (groups.std(dim=1, keepdim=True) + eps)).reshape(-1)", "return centred.reshape(-1)"),)),
    Mistake(cell=ADV, name="reference import", kind="reference",
            rejected_by=("test_group_advantages",),
            source="from course_utils.preference import group_advantages\n"),
    # ------------------------------------------------------------------ grpo_loss
    Mistake(cell=GRPO, name="KL penalty with the wrong sign", kind="logic",
            rejected_by=("test_grpo_loss",),
            replace=(("(surrogate - kl_coef * kl)", "(surrogate + kl_coef * kl)"),)),
    Mistake(cell=GRPO, name="clip applied to the advantage instead of the ratio", kind="logic",
            rejected_by=("test_grpo_loss",),
            replace=(("ratio.clamp(1 - clip, 1 + clip) * adv", "ratio * adv.clamp(1 - clip, 1 + clip)"),)),
    Mistake(cell=GRPO, name="max instead of min (the optimistic bound)", kind="logic",
            rejected_by=("test_grpo_loss",),
            replace=(("torch.minimum(", "torch.maximum("),)),
    Mistake(cell=GRPO, name="clipped term only (no min)", kind="logic",
            rejected_by=("test_grpo_loss",),
            replace=(("torch.minimum(ratio * adv, ratio.clamp(1 - clip, 1 + clip) * adv)", "ratio.clamp(1 - clip, 1 + clip) * adv"),)),
    Mistake(cell=GRPO, name="mean over all the tokens of the batch, not per sequence", kind="statistics",
            rejected_by=("test_grpo_loss",),
            replace=(("per_sequence = ((surrogate - kl_coef * kl) * mask).sum(-1) / mask.sum(-1).clamp(min=1)\n    return -per_sequence.mean()",
                      "return -((surrogate - kl_coef * kl) * mask).sum() / mask.sum()"),)),
    Mistake(cell=GRPO, name="mean over padding tokens too", kind="statistics",
            rejected_by=("test_grpo_loss",),
            replace=(("* mask).sum(-1) / mask.sum(-1).clamp(min=1)", "* mask).mean(-1)"),)),
    Mistake(cell=GRPO, name="k3 with the log-ratio reversed (logp - ref)", kind="logic",
            rejected_by=("test_grpo_loss",),
            replace=(("log_ratio_ref = ref_logprobs.detach() - logprobs", "log_ratio_ref = logprobs - ref_logprobs.detach()"),)),
    Mistake(cell=GRPO, name="old and reference log-probs not detached", kind="autograd",
            rejected_by=("test_grpo_loss",),
            replace=(("old_logprobs.detach()", "old_logprobs"), ("ref_logprobs.detach()", "ref_logprobs"))),
    Mistake(cell=GRPO, name="objective returned, not the loss (sign)", kind="logic",
            rejected_by=("test_grpo_loss",),
            replace=(("return -per_sequence.mean()", "return per_sequence.mean()"),)),
    Mistake(cell=GRPO, name="reference import", kind="reference",
            rejected_by=("test_grpo_loss",),
            source="from course_utils.preference import grpo_loss\n"),
]

ACCEPTED = [
    Accepted(cell=SEQ, name="cross_entropy with ignore_index on masked labels",
             source=('def sequence_logprobs(model, input_ids, response_mask):\n'
                     '    logits = model(input_ids).float()\n'
                     '    labels = input_ids.masked_fill(~response_mask.bool(), -100)[:, 1:]\n'
                     '    nll = F.cross_entropy(logits[:, :-1].transpose(1, 2), labels, ignore_index=-100, reduction="none")\n'
                     '    return -nll.sum(-1)\n')),
    Accepted(cell=SEQ, name="logsumexp and a boolean where",
             source=('def sequence_logprobs(model, input_ids, response_mask):\n'
                     '    logits = model(input_ids).float()[:, :-1]\n'
                     '    picked = torch.gather(logits, 2, input_ids[:, 1:].unsqueeze(2)).squeeze(2) - torch.logsumexp(logits, dim=2)\n'
                     '    return torch.where(response_mask[:, 1:].bool(), picked, torch.zeros_like(picked)).sum(dim=1)\n')),
    Accepted(cell=DPO, name="softplus of minus the margin",
             source=('def dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1):\n'
                     '    chosen_rewards = beta * (policy_chosen - ref_chosen)\n'
                     '    rejected_rewards = beta * (policy_rejected - ref_rejected)\n'
                     '    loss = F.softplus(rejected_rewards - chosen_rewards).mean()\n'
                     '    return loss, chosen_rewards.detach(), rejected_rewards.detach()\n')),
    Accepted(cell=DPO, name="log-ratios regrouped (policy difference minus reference difference)",
             source=('def dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1):\n'
                     '    logits = (policy_chosen - policy_rejected) - (ref_chosen - ref_rejected)\n'
                     '    losses = -F.logsigmoid(beta * logits)\n'
                     '    with torch.no_grad():\n'
                     '        rc, rr = beta * (policy_chosen - ref_chosen), beta * (policy_rejected - ref_rejected)\n'
                     '    return losses.mean(), rc, rr\n')),
    Accepted(cell=PAIRS, name="a Python loop over the groups",
             source=('def make_preference_pairs(rewards, group_size):\n'
                     '    rows = []\n'
                     '    values = rewards.tolist()\n'
                     '    for start in range(0, len(values), group_size):\n'
                     '        group = values[start:start + group_size]\n'
                     '        if max(group) > min(group):\n'
                     '            rows.append([start + group.index(max(group)), start + group.index(min(group))])\n'
                     '    return torch.tensor(rows, dtype=torch.long, device=rewards.device).reshape(-1, 2)\n')),
    Accepted(cell=ADV, name="view, mean and std with keepdim, epsilon as a named constant",
             source=('def group_advantages(rewards, group_size, eps=1e-4):\n'
                     '    r = rewards.view(-1, group_size)\n'
                     '    r = r.float() if not torch.is_floating_point(r) else r\n'
                     '    mu = r.mean(-1, keepdim=True)\n'
                     '    sigma = r.std(-1, keepdim=True)\n'
                     '    return ((r - mu) / (sigma + eps)).flatten()\n')),
    Accepted(cell=GRPO, name="written as in TRL (per_token_loss, clamp of coef_2)",
             source=('def grpo_loss(logprobs, old_logprobs, ref_logprobs, advantages, response_mask, clip=0.2, kl_coef=0.04):\n'
                     '    old, ref = old_logprobs.detach(), ref_logprobs.detach()\n'
                     '    coef_1 = torch.exp(logprobs - old)\n'
                     '    coef_2 = torch.clamp(coef_1, 1 - clip, 1 + clip)\n'
                     '    a = advantages.detach().unsqueeze(1)\n'
                     '    per_token_loss = -torch.min(coef_1 * a, coef_2 * a)\n'
                     '    per_token_kl = torch.exp(ref - logprobs) - (ref - logprobs) - 1\n'
                     '    per_token_loss = per_token_loss + kl_coef * per_token_kl\n'
                     '    m = response_mask.to(logprobs.dtype)\n'
                     '    return ((per_token_loss * m).sum(dim=1) / m.sum(dim=1).clamp(min=1.0)).mean()\n')),
]
