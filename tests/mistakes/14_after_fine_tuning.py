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


# Written blind from the release alone (issue 38): the wrong answers not already above, and the right answers in other styles.
MISTAKES += [
    Mistake(
        cell='sequence_logprobs',
        name='detaches the logits',
        rejected_by=('test_sequence_logprobs',),
        source="""\
def sequence_logprobs(model, input_ids, response_mask):
    logits = model(input_ids).detach()[:, :-1].float()
    tok = torch.log_softmax(logits, dim=-1).gather(-1, input_ids[:, 1:, None]).squeeze(-1)
    return (tok * response_mask[:, 1:].float()).sum(-1)
""",
        kind='autograd',
    ),
    Mistake(
        cell='sequence_logprobs',
        name="log_softmax in the model's dtype (no .float()), result not float32",
        rejected_by=('test_sequence_logprobs',),
        source="""\
def sequence_logprobs(model, input_ids, response_mask):
    logits = model(input_ids)[:, :-1]
    tok = torch.log_softmax(logits, dim=-1).gather(-1, input_ids[:, 1:, None]).squeeze(-1)
    return (tok * response_mask[:, 1:].to(tok.dtype)).sum(-1)
""",
        kind='dtype',
    ),
    Mistake(
        cell='sequence_logprobs',
        name='final .squeeze() drops the batch axis for B = 1',
        rejected_by=('test_sequence_logprobs',),
        source="""\
def sequence_logprobs(model, input_ids, response_mask):
    logp = torch.log_softmax(model(input_ids)[:, :-1].float(), dim=-1)
    tok = logp.gather(-1, input_ids[:, 1:, None]).squeeze()
    return (tok * response_mask[:, 1:].float()).sum(-1).squeeze()
""",
        kind='boundary',
    ),
    Mistake(
        cell='sequence_logprobs',
        name='masked_fill(~mask): breaks on 0/1 integer masks (bitwise not)',
        rejected_by=('test_sequence_logprobs',),
        source="""\
def sequence_logprobs(model, input_ids, response_mask):
    logp = torch.log_softmax(model(input_ids)[:, :-1].float(), dim=-1)
    tok = logp.gather(-1, input_ids[:, 1:, None]).squeeze(-1)
    return tok.masked_fill(~response_mask[:, 1:], 0.0).sum(-1)
""",
        kind='argument',
    ),
    Mistake(
        cell='sequence_logprobs',
        name='log(softmax(...)) instead of log_softmax (-inf for tiny probabilities)',
        rejected_by=('test_sequence_logprobs',),
        source="""\
def sequence_logprobs(model, input_ids, response_mask):
    probs = torch.softmax(model(input_ids)[:, :-1].float(), dim=-1)
    tok = torch.log(probs.gather(-1, input_ids[:, 1:, None]).squeeze(-1))
    return (tok * response_mask[:, 1:].float()).sum(-1)
""",
        kind='boundary',
    ),
    Mistake(
        cell='sequence_logprobs',
        name='boolean indexing per row in a Python loop with .item() (no graph through the sum)',
        rejected_by=('test_sequence_logprobs',),
        source="""\
def sequence_logprobs(model, input_ids, response_mask):
    logp = torch.log_softmax(model(input_ids)[:, :-1].float(), dim=-1)
    tok = logp.gather(-1, input_ids[:, 1:, None]).squeeze(-1)
    sums = [tok[b][response_mask[b, 1:].bool()].sum().item() for b in range(tok.shape[0])]
    return torch.tensor(sums, dtype=torch.float32)
""",
        kind='autograd',
    ),
    Mistake(
        cell='dpo_loss',
        name='policy and reference swapped in the log-ratios',
        rejected_by=('test_dpo_loss',),
        source="""\
def dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1):
    chosen = beta * (ref_chosen - policy_chosen)
    rejected = beta * (ref_rejected - policy_rejected)
    loss = -F.logsigmoid(chosen - rejected).mean()
    return loss, chosen.detach(), rejected.detach()
""",
        kind='logic',
    ),
    Mistake(
        cell='dpo_loss',
        name='detaches too early: loss built from the detached rewards (no gradient)',
        rejected_by=('test_dpo_loss',),
        source="""\
def dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1):
    chosen = (beta * (policy_chosen - ref_chosen)).detach()
    rejected = (beta * (policy_rejected - ref_rejected)).detach()
    return -F.logsigmoid(chosen - rejected).mean(), chosen, rejected
""",
        kind='autograd',
    ),
    Mistake(
        cell='dpo_loss',
        name='ignores the beta argument (hard-coded 0.1)',
        rejected_by=('test_dpo_loss',),
        source="""\
def dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1):
    chosen = 0.1 * (policy_chosen - ref_chosen)
    rejected = 0.1 * (policy_rejected - ref_rejected)
    return -F.logsigmoid(chosen - rejected).mean(), chosen.detach(), rejected.detach()
""",
        kind='argument',
    ),
    Mistake(
        cell='dpo_loss',
        name='loss keeps a batch axis (mean with keepdim)',
        rejected_by=('test_dpo_loss',),
        source="""\
def dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1):
    chosen = beta * (policy_chosen - ref_chosen)
    rejected = beta * (policy_rejected - ref_rejected)
    return -F.logsigmoid(chosen - rejected).mean(0, keepdim=True), chosen.detach(), rejected.detach()
""",
        kind='structure',
    ),
    Mistake(
        cell='dpo_loss',
        name='beta turned into a CPU float32 tensor (device and dtype rule)',
        rejected_by=('test_dpo_loss',),
        source="""\
def dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1):
    b = torch.tensor([beta], dtype=torch.float32)
    chosen = b * (policy_chosen - ref_chosen)
    rejected = b * (policy_rejected - ref_rejected)
    return -F.logsigmoid(chosen - rejected).mean(), chosen.detach(), rejected.detach()
""",
        kind='device',
    ),
    Mistake(
        cell='dpo_loss',
        name='clamps the margin to avoid overflow (gradient zero outside the clamp)',
        rejected_by=('test_dpo_loss',),
        source="""\
def dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1):
    chosen = beta * (policy_chosen - ref_chosen)
    rejected = beta * (policy_rejected - ref_rejected)
    z = (chosen - rejected).clamp(-50, 50)
    return -torch.log(torch.sigmoid(z)).mean(), chosen.detach(), rejected.detach()
""",
        kind='boundary',
    ),
    Mistake(
        cell='make_preference_pairs',
        name='last sample with the lowest reward (flip)',
        rejected_by=('test_make_preference_pairs',),
        source="""\
def make_preference_pairs(rewards, group_size):
    g = rewards.reshape(-1, group_size)
    keep = g.amax(1) > g.amin(1)
    base = torch.arange(g.shape[0], device=rewards.device) * group_size
    last_lo = group_size - 1 - g.flip(1).argmin(1)
    return torch.stack([base + g.argmax(1), base + last_lo], 1)[keep]
""",
        kind='boundary',
    ),
    Mistake(
        cell='make_preference_pairs',
        name='no pairs: returns shape (0,) instead of (0, 2)',
        rejected_by=('test_make_preference_pairs',),
        source="""\
def make_preference_pairs(rewards, group_size):
    rows = []
    for p in range(rewards.numel() // group_size):
        g = rewards[p * group_size:(p + 1) * group_size]
        if g.max() > g.min():
            rows.append([p * group_size + int(g.argmax()), p * group_size + int(g.argmin())])
    return torch.tensor(rows, dtype=torch.long, device=rewards.device)
""",
        kind='boundary',
    ),
    Mistake(
        cell='make_preference_pairs',
        name='int32 indices',
        rejected_by=('test_make_preference_pairs',),
        source="""\
def make_preference_pairs(rewards, group_size):
    g = rewards.reshape(-1, group_size)
    keep = g.amax(1) > g.amin(1)
    base = torch.arange(g.shape[0], device=rewards.device, dtype=torch.int32) * group_size
    return torch.stack([base + g.argmax(1).int(), base + g.argmin(1).int()], 1)[keep]
""",
        kind='dtype',
    ),
    Mistake(
        cell='make_preference_pairs',
        name='result built on the CPU (torch.tensor without device)',
        rejected_by=('test_make_preference_pairs',),
        source="""\
def make_preference_pairs(rewards, group_size):
    rows = []
    vals = rewards.tolist()
    for p in range(0, len(vals), group_size):
        g = vals[p:p + group_size]
        if max(g) != min(g):
            rows.append((p + g.index(max(g)), p + g.index(min(g))))
    return torch.tensor(rows, dtype=torch.long).view(-1, 2)
""",
        kind='device',
    ),
    Mistake(
        cell='make_preference_pairs',
        name='hard-coded group size 3 (from the visible test)',
        rejected_by=('test_make_preference_pairs',),
        source="""\
def make_preference_pairs(rewards, group_size):
    g = rewards.reshape(-1, 3)
    keep = g.amax(1) > g.amin(1)
    base = torch.arange(g.shape[0], device=rewards.device) * 3
    return torch.stack([base + g.argmax(1), base + g.argmin(1)], 1)[keep]
""",
        kind='argument',
    ),
    Mistake(
        cell='make_preference_pairs',
        name='returns a list of lists',
        rejected_by=('test_make_preference_pairs',),
        source="""\
def make_preference_pairs(rewards, group_size):
    out = []
    for p in range(rewards.numel() // group_size):
        g = rewards[p * group_size:(p + 1) * group_size].tolist()
        if max(g) != min(g):
            out.append([p * group_size + g.index(max(g)), p * group_size + g.index(min(g))])
    return out
""",
        kind='structure',
    ),
    Mistake(
        cell='group_advantages',
        name='integer rewards kept as integers (mean of a long tensor fails)',
        rejected_by=('test_group_advantages',),
        source="""\
def group_advantages(rewards, group_size, eps=1e-4):
    g = rewards.reshape(-1, group_size)
    return ((g - g.mean(1, keepdim=True)) / (g.std(1, keepdim=True) + eps)).reshape(-1)
""",
        kind='dtype',
    ),
    Mistake(
        cell='group_advantages',
        name='always float32 (.float()), float64 rewards come back float32',
        rejected_by=('test_group_advantages',),
        source="""\
def group_advantages(rewards, group_size, eps=1e-4):
    g = rewards.float().reshape(-1, group_size)
    return ((g - g.mean(1, keepdim=True)) / (g.std(1, keepdim=True) + eps)).reshape(-1)
""",
        kind='dtype',
    ),
    Mistake(
        cell='group_advantages',
        name='ignores the eps argument (hard-coded 1e-4)',
        rejected_by=('test_group_advantages',),
        source="""\
def group_advantages(rewards, group_size, eps=1e-4):
    g = rewards.reshape(-1, group_size)
    if not g.is_floating_point():
        g = g.float()
    return ((g - g.mean(1, keepdim=True)) / (g.std(1, keepdim=True) + 1e-4)).reshape(-1)
""",
        kind='argument',
    ),
    Mistake(
        cell='group_advantages',
        name='returns shape (P, group_size)',
        rejected_by=('test_group_advantages',),
        source="""\
def group_advantages(rewards, group_size, eps=1e-4):
    g = rewards.reshape(-1, group_size)
    if not g.is_floating_point():
        g = g.float()
    return (g - g.mean(1, keepdim=True)) / (g.std(1, keepdim=True) + eps)
""",
        kind='structure',
    ),
    Mistake(
        cell='group_advantages',
        name='hard-coded group size 4 (from the visible test)',
        rejected_by=('test_group_advantages',),
        source="""\
def group_advantages(rewards, group_size, eps=1e-4):
    g = rewards.reshape(-1, 4)
    if not g.is_floating_point():
        g = g.float()
    return ((g - g.mean(1, keepdim=True)) / (g.std(1, keepdim=True) + eps)).reshape(-1)
""",
        kind='argument',
    ),
    Mistake(
        cell='grpo_loss',
        name='clips the product ratio*A instead of the ratio',
        rejected_by=('test_grpo_loss',),
        source='def grpo_loss(logprobs: torch.Tensor, old_logprobs: torch.Tensor, ref_logprobs: torch.Tensor, advantages: torch.Tensor,\n              response_mask: torch.Tensor, clip: float = 0.2, kl_coef: float = 0.04) -> torch.Tensor:\n    """GRPO\'s clipped objective with the k3 KL penalty, per token; mean per sequence, then over the batch; negated."""\n    old = old_logprobs.detach()\n    ref = ref_logprobs.detach()\n    adv = advantages.detach().unsqueeze(-1)\n    mask = response_mask.to(logprobs.dtype)\n    ratio = torch.exp(logprobs - old)\n    surrogate = torch.minimum(ratio * adv, torch.clamp(ratio * adv, 1 - clip, 1 + clip))\n    log_r = ref - logprobs\n    k3 = torch.exp(log_r) - log_r - 1\n    per_token = surrogate - kl_coef * k3\n    per_seq = (per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1)\n    return -per_seq.mean()\n',
        kind='logic',
    ),
    Mistake(
        cell='grpo_loss',
        name='ratio as logprobs / old_logprobs',
        rejected_by=('test_grpo_loss',),
        source='def grpo_loss(logprobs: torch.Tensor, old_logprobs: torch.Tensor, ref_logprobs: torch.Tensor, advantages: torch.Tensor,\n              response_mask: torch.Tensor, clip: float = 0.2, kl_coef: float = 0.04) -> torch.Tensor:\n    """GRPO\'s clipped objective with the k3 KL penalty, per token; mean per sequence, then over the batch; negated."""\n    old = old_logprobs.detach()\n    ref = ref_logprobs.detach()\n    adv = advantages.detach().unsqueeze(-1)\n    mask = response_mask.to(logprobs.dtype)\n    ratio = logprobs / old\n    surrogate = torch.minimum(ratio * adv, torch.clamp(ratio, 1 - clip, 1 + clip) * adv)\n    log_r = ref - logprobs\n    k3 = torch.exp(log_r) - log_r - 1\n    per_token = surrogate - kl_coef * k3\n    per_seq = (per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1)\n    return -per_seq.mean()\n',
        kind='logic',
    ),
    Mistake(
        cell='grpo_loss',
        name='ignores the clip argument (hard-coded 0.2)',
        rejected_by=('test_grpo_loss',),
        source='def grpo_loss(logprobs: torch.Tensor, old_logprobs: torch.Tensor, ref_logprobs: torch.Tensor, advantages: torch.Tensor,\n              response_mask: torch.Tensor, clip: float = 0.2, kl_coef: float = 0.04) -> torch.Tensor:\n    """GRPO\'s clipped objective with the k3 KL penalty, per token; mean per sequence, then over the batch; negated."""\n    old = old_logprobs.detach()\n    ref = ref_logprobs.detach()\n    adv = advantages.detach().unsqueeze(-1)\n    mask = response_mask.to(logprobs.dtype)\n    ratio = torch.exp(logprobs - old)\n    surrogate = torch.minimum(ratio * adv, torch.clamp(ratio, 0.8, 1.2) * adv)\n    log_r = ref - logprobs\n    k3 = torch.exp(log_r) - log_r - 1\n    per_token = surrogate - kl_coef * k3\n    per_seq = (per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1)\n    return -per_seq.mean()\n',
        kind='argument',
    ),
    Mistake(
        cell='grpo_loss',
        name='mask.float(): half-precision inputs give a float32 loss',
        rejected_by=('test_grpo_loss',),
        source='def grpo_loss(logprobs: torch.Tensor, old_logprobs: torch.Tensor, ref_logprobs: torch.Tensor, advantages: torch.Tensor,\n              response_mask: torch.Tensor, clip: float = 0.2, kl_coef: float = 0.04) -> torch.Tensor:\n    """GRPO\'s clipped objective with the k3 KL penalty, per token; mean per sequence, then over the batch; negated."""\n    old = old_logprobs.detach()\n    ref = ref_logprobs.detach()\n    adv = advantages.detach().unsqueeze(-1)\n    mask = response_mask.float()\n    ratio = torch.exp(logprobs - old)\n    surrogate = torch.minimum(ratio * adv, torch.clamp(ratio, 1 - clip, 1 + clip) * adv)\n    log_r = ref - logprobs\n    k3 = torch.exp(log_r) - log_r - 1\n    per_token = surrogate - kl_coef * k3\n    per_seq = (per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1)\n    return -per_seq.mean()\n',
        kind='dtype',
    ),
    Mistake(
        cell='grpo_loss',
        name='detaches logprobs too (no gradient at all)',
        rejected_by=('test_grpo_loss',),
        source='def grpo_loss(logprobs: torch.Tensor, old_logprobs: torch.Tensor, ref_logprobs: torch.Tensor, advantages: torch.Tensor,\n              response_mask: torch.Tensor, clip: float = 0.2, kl_coef: float = 0.04) -> torch.Tensor:\n    """GRPO\'s clipped objective with the k3 KL penalty, per token; mean per sequence, then over the batch; negated."""\n    old = old_logprobs.detach()\n    ref = ref_logprobs.detach()\n    adv = advantages.detach().unsqueeze(-1)\n    mask = response_mask.to(logprobs.dtype)\n    logprobs = logprobs.detach()\n    ratio = torch.exp(logprobs - old)\n    surrogate = torch.minimum(ratio * adv, torch.clamp(ratio, 1 - clip, 1 + clip) * adv)\n    log_r = ref - logprobs\n    k3 = torch.exp(log_r) - log_r - 1\n    per_token = surrogate - kl_coef * k3\n    per_seq = (per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1)\n    return -per_seq.mean()\n',
        kind='autograd',
    ),
    Mistake(
        cell='grpo_loss',
        name='k1 estimator (logprobs - ref) instead of k3',
        rejected_by=('test_grpo_loss',),
        source='def grpo_loss(logprobs: torch.Tensor, old_logprobs: torch.Tensor, ref_logprobs: torch.Tensor, advantages: torch.Tensor,\n              response_mask: torch.Tensor, clip: float = 0.2, kl_coef: float = 0.04) -> torch.Tensor:\n    """GRPO\'s clipped objective with the k3 KL penalty, per token; mean per sequence, then over the batch; negated."""\n    old = old_logprobs.detach()\n    ref = ref_logprobs.detach()\n    adv = advantages.detach().unsqueeze(-1)\n    mask = response_mask.to(logprobs.dtype)\n    ratio = torch.exp(logprobs - old)\n    surrogate = torch.minimum(ratio * adv, torch.clamp(ratio, 1 - clip, 1 + clip) * adv)\n    log_r = ref - logprobs\n    k3 = -log_r\n    per_token = surrogate - kl_coef * k3\n    per_seq = (per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1)\n    return -per_seq.mean()\n',
        kind='logic',
    ),
]

ACCEPTED += [
    Accepted(
        cell='sequence_logprobs',
        name="right: -cross_entropy(reduction='none') and torch.where on the bool mask",
        source="""\
def sequence_logprobs(model, input_ids, response_mask):
    logits = model(input_ids).float()
    B, T, V = logits.shape
    nll = F.cross_entropy(logits[:, :-1].reshape(-1, V), input_ids[:, 1:].reshape(-1), reduction="none").view(B, T - 1)
    keep = response_mask[:, 1:].bool()
    return torch.where(keep, -nll, torch.zeros_like(nll)).sum(-1)
""",
        checked_by=('test_sequence_logprobs',),
    ),
    Accepted(
        cell='sequence_logprobs',
        name="right: no slicing, roll targets by -1 (last position's target is position 0, never a response)",
        source="""\
def sequence_logprobs(model, input_ids, response_mask):
    logp = model(input_ids).float().log_softmax(-1)
    targets = input_ids.roll(-1, dims=1)
    mask = response_mask.roll(-1, dims=1).bool()
    tok = logp.gather(2, targets[..., None])[..., 0]
    return tok.masked_fill(~mask, 0.0).sum(1)
""",
        checked_by=('test_sequence_logprobs',),
    ),
    Accepted(
        cell='make_preference_pairs',
        name='right: first index via (g == max).int().argmax (no reliance on argmax tie order)',
        source="""\
def make_preference_pairs(rewards, group_size):
    g = rewards.view(-1, group_size)
    hi = g.max(1, keepdim=True).values
    lo = g.min(1, keepdim=True).values
    first_hi = (g == hi).int().argmax(1)
    first_lo = (g == lo).int().argmax(1)
    base = torch.arange(0, rewards.numel(), group_size, device=rewards.device)
    keep = (hi != lo).squeeze(1)
    return torch.stack((base + first_hi, base + first_lo), -1)[keep].to(torch.long)
""",
        checked_by=('test_make_preference_pairs',),
    ),
    Accepted(
        cell='group_advantages',
        name='right: unflatten, explicit Bessel variance sum/(n-1), sqrt',
        source="""\
def group_advantages(rewards, group_size, eps=1e-4):
    r = rewards.to(torch.get_default_dtype()) if not torch.is_floating_point(rewards) else rewards
    g = r.unflatten(0, (-1, group_size))
    mu = g.sum(1, keepdim=True) / group_size
    sd = (((g - mu) ** 2).sum(1, keepdim=True) / (group_size - 1)).sqrt()
    return ((g - mu) / (sd + eps)).flatten()
""",
        checked_by=('test_group_advantages',),
    ),
    Accepted(
        cell='grpo_loss',
        name='right: per-sequence boolean indexing in a loop, torch.min, stack',
        source="""\
def grpo_loss(logprobs, old_logprobs, ref_logprobs, advantages, response_mask, clip=0.2, kl_coef=0.04):
    ratio = (logprobs - old_logprobs.detach()).exp()
    A = advantages.detach()[:, None]
    unclipped = ratio * A
    clipped = ratio.clamp(1.0 - clip, 1.0 + clip) * A
    d = ref_logprobs.detach() - logprobs
    obj = torch.min(unclipped, clipped) - kl_coef * (d.exp() - d - 1.0)
    m = response_mask.bool()
    per_seq = [obj[b][m[b]].mean() for b in range(obj.shape[0])]
    return -torch.stack(per_seq).mean()
""",
        checked_by=('test_grpo_loss',),
    ),
]
