"""Plausible wrong answers to notebook 08; each must lose points in the tests named."""

from course_grader.authoring.mistakes import Accepted, Mistake

MISTAKES = [
    Mistake(cell="decoder_self_mask", name="causal mask transposed (upper triangle)", kind="logic",
            rejected_by=("test_decoder_self_mask",), replace=(("torch.tril(", "torch.triu("),)),
    Mistake(cell="decoder_self_mask", name="padding masks queries instead of keys", kind="logic",
            rejected_by=("test_decoder_self_mask",), replace=(("[:, None, :]", "[:, :, None]"),)),
    Mistake(cell="teacher_forced_logits", name="targets not shifted right", kind="logic",
            rejected_by=("test_teacher_forced_logits",),
            replace=(("tgt_in = shift_right(tgt, model.bos_id)", "tgt_in = tgt"),)),
    Mistake(cell="teacher_forced_logits", name="no mask in the decoder self-attention", kind="logic",
            rejected_by=("test_teacher_forced_logits",),
            replace=(("decoder_self_mask(tgt_in, model.pad_id), memory_mask", "None, memory_mask"),)),
    Mistake(cell="teacher_forced_logits", name="causal mask only, no key padding in the decoder self-attention", kind="logic",
            rejected_by=("test_teacher_forced_logits",),
            replace=(("decoder_self_mask(tgt_in, model.pad_id), memory_mask",
                      "causal_mask(tgt_in.size(1), device=tgt_in.device), memory_mask"),)),
    Mistake(cell="label_smoothed_loss", name="padding counted in the mean", kind="logic",
            rejected_by=("test_label_smoothed_loss",),
            replace=(("return (loss * keep).sum() / keep.sum()", "return loss.mean()"),)),
    Mistake(cell="label_smoothed_loss", name="smoothing weights swapped", kind="logic",
            rejected_by=("test_label_smoothed_loss",),
            replace=(("(1 - smoothing) * nll + smoothing * uniform", "smoothing * nll + (1 - smoothing) * uniform"),)),
    Mistake(cell="label_smoothed_loss", name="fairseq convention: eps / (V - 1) over the wrong tokens only", kind="logic",
            rejected_by=("test_label_smoothed_loss",),
            replace=(("loss = (1 - smoothing) * nll + smoothing * uniform",
                      "V = logp.size(-1)\n    loss = (1 - smoothing - smoothing / (V - 1)) * nll + smoothing / (V - 1) * V * uniform"),)),
    Mistake(cell="warmup_lr", name="max instead of min", kind="logic",
            rejected_by=("test_warmup_lr",), replace=(("min(", "max("),)),
    Mistake(cell="beam_step", name="true division for the hypothesis index (floats)", kind="dtype",
            rejected_by=("test_beam_step",), replace=(("flat // V", "flat / V"),)),
    Mistake(cell="beam_step", name="forgets the hypotheses' scores", kind="logic",
            rejected_by=("test_beam_step",),
            replace=(("(scores.unsqueeze(-1) + log_probs)", "log_probs"),)),
]

# Red-team pass (issue 12): wrong answers written blind from the release notebook that kept full marks
# before the hidden tests were strengthened.
MISTAKES += [
    Mistake(cell="decoder_self_mask", name='tril of torch.ones without device', kind="device",
            rejected_by=("test_decoder_self_mask",), source='''def decoder_self_mask(tgt_in: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    """tgt_in (B, T) -> bool (B, T, T)."""

    T = tgt_in.shape[1]
    causal = torch.tril(torch.ones(T, T)).bool()
    return causal[None] & (tgt_in != pad_id)[:, None, :]
'''),
    Mistake(cell="decoder_self_mask", name='arange without device', kind="device",
            rejected_by=("test_decoder_self_mask",), source='''def decoder_self_mask(tgt_in: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    """tgt_in (B, T) -> bool (B, T, T)."""

    T = tgt_in.shape[1]
    i = torch.arange(T)
    return (i[None, :] <= i[:, None])[None] & (tgt_in != pad_id).unsqueeze(1)
'''),
    Mistake(cell="decoder_self_mask", name='uses ts.decoder_mask', kind="reference",
            rejected_by=("test_decoder_self_mask",), source='''def decoder_self_mask(tgt_in: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    """tgt_in (B, T) -> bool (B, T, T)."""

    return ts.decoder_mask(tgt_in, pad_id)
'''),
    Mistake(cell="teacher_forced_logits", name='manual shift with torch.full (no device)', kind="device",
            rejected_by=("test_teacher_forced_logits",), source='''def teacher_forced_logits(model: TransformerSeq2Seq, src: torch.Tensor, src_len: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    """src (B, S), src_len (B,), tgt (B, T) -> logits (B, T, V)."""

    bos = torch.full((tgt.size(0), 1), model.bos_id)
    tgt_in = torch.cat([bos, tgt[:, :-1]], dim=1)
    memory, memory_mask = model.encode(src, src_len)
    return model.decode(tgt_in, memory, decoder_self_mask(tgt_in, model.pad_id), memory_mask)
'''),
    Mistake(cell="teacher_forced_logits", name='bos id hard-coded 1', kind="argument",
            rejected_by=("test_teacher_forced_logits",), source='''def teacher_forced_logits(model: TransformerSeq2Seq, src: torch.Tensor, src_len: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    """src (B, S), src_len (B,), tgt (B, T) -> logits (B, T, V)."""

    memory, memory_mask = model.encode(src, src_len)
    tgt_in = shift_right(tgt, 1)
    return model.decode(tgt_in, memory, decoder_self_mask(tgt_in, model.pad_id), memory_mask)
'''),
    Mistake(cell="teacher_forced_logits", name='pad id hard-coded 0', kind="argument",
            rejected_by=("test_teacher_forced_logits",), source='''def teacher_forced_logits(model: TransformerSeq2Seq, src: torch.Tensor, src_len: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    """src (B, S), src_len (B,), tgt (B, T) -> logits (B, T, V)."""

    memory, memory_mask = model.encode(src, src_len)
    tgt_in = shift_right(tgt, model.bos_id)
    return model.decode(tgt_in, memory, decoder_self_mask(tgt_in), memory_mask)
'''),
    Mistake(cell="teacher_forced_logits", name='torch.no_grad inside (nothing to train)', kind="autograd",
            rejected_by=("test_teacher_forced_logits",), source='''def teacher_forced_logits(model: TransformerSeq2Seq, src: torch.Tensor, src_len: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    """src (B, S), src_len (B,), tgt (B, T) -> logits (B, T, V)."""

    with torch.no_grad():
        memory, memory_mask = model.encode(src, src_len)
    tgt_in = shift_right(tgt, model.bos_id)
    return model.decode(tgt_in, memory, decoder_self_mask(tgt_in, model.pad_id), memory_mask)
'''),
    Mistake(cell="teacher_forced_logits", name="returns the model's own forward", kind="reference",
            rejected_by=("test_teacher_forced_logits",), source='''def teacher_forced_logits(model: TransformerSeq2Seq, src: torch.Tensor, src_len: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    """src (B, S), src_len (B,), tgt (B, T) -> logits (B, T, V)."""

    return model(src, src_len, tgt)[0]
'''),
    Mistake(cell="label_smoothed_loss", name='q from torch.full (no device)', kind="device",
            rejected_by=("test_label_smoothed_loss",), source='''def label_smoothed_loss(logits: torch.Tensor, target: torch.Tensor, smoothing: float = 0.1, pad_id: int = 0) -> torch.Tensor:
    """Mean over non-pad positions of -sum_v q_v log p_v."""

    V = logits.size(-1)
    logp = torch.log_softmax(logits, -1)
    q = torch.full(logits.shape, smoothing / V)
    q.scatter_(-1, target.unsqueeze(-1).cpu(), 1 - smoothing + smoothing / V)
    keep = target != pad_id
    return (-(q.to(logp.device) * logp).sum(-1))[keep].mean()
'''),
    Mistake(cell="label_smoothed_loss", name='pad id hard-coded 0 in the loss', kind="argument",
            rejected_by=("test_label_smoothed_loss",), source='''def label_smoothed_loss(logits: torch.Tensor, target: torch.Tensor, smoothing: float = 0.1, pad_id: int = 0) -> torch.Tensor:
    """Mean over non-pad positions of -sum_v q_v log p_v."""

    logp = torch.log_softmax(logits, dim=-1)
    nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    loss = (1 - smoothing) * nll - smoothing * logp.mean(-1)
    return loss[target != 0].mean()
'''),
    Mistake(cell="label_smoothed_loss", name='log of softmax (underflows for large logits)', kind="boundary",
            rejected_by=("test_label_smoothed_loss",), source='''def label_smoothed_loss(logits: torch.Tensor, target: torch.Tensor, smoothing: float = 0.1, pad_id: int = 0) -> torch.Tensor:
    """Mean over non-pad positions of -sum_v q_v log p_v."""

    logp = torch.softmax(logits, dim=-1).log()
    nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    loss = (1 - smoothing) * nll - smoothing * logp.mean(-1)
    return loss[target != pad_id].mean()
'''),
    Mistake(cell="label_smoothed_loss", name='neg_ on log_softmax output (breaks backward)', kind="autograd",
            rejected_by=("test_label_smoothed_loss",), source='''def label_smoothed_loss(logits: torch.Tensor, target: torch.Tensor, smoothing: float = 0.1, pad_id: int = 0) -> torch.Tensor:
    """Mean over non-pad positions of -sum_v q_v log p_v."""

    nlogp = torch.log_softmax(logits, dim=-1).neg_()
    nll = nlogp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    loss = (1 - smoothing) * nll + smoothing * nlogp.mean(-1)
    return loss[target != pad_id].mean()
'''),
    Mistake(cell="label_smoothed_loss", name='cross_entropy imported by name (ban evaded)', kind="ban",
            rejected_by=("test_label_smoothed_loss",), source='''from torch.nn.functional import cross_entropy

def label_smoothed_loss(logits: torch.Tensor, target: torch.Tensor, smoothing: float = 0.1, pad_id: int = 0) -> torch.Tensor:
    """Mean over non-pad positions of -sum_v q_v log p_v."""

    V = logits.size(-1)
    return cross_entropy(logits.reshape(-1, V), target.reshape(-1), ignore_index=pad_id, label_smoothing=smoothing)
'''),
    Mistake(cell="label_smoothed_loss", name='uses ts.label_smoothed_cross_entropy', kind="reference",
            rejected_by=("test_label_smoothed_loss",), source='''def label_smoothed_loss(logits: torch.Tensor, target: torch.Tensor, smoothing: float = 0.1, pad_id: int = 0) -> torch.Tensor:
    """Mean over non-pad positions of -sum_v q_v log p_v."""

    return ts.label_smoothed_cross_entropy(logits, target, smoothing, pad_id)
'''),
    Mistake(cell="warmup_lr", name='uses ts.noam_lr', kind="reference",
            rejected_by=("test_warmup_lr",), source='''def warmup_lr(step: int, d_model: int, warmup: int) -> float:
    """d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)."""

    return ts.noam_lr(step, d_model, warmup)
'''),
    Mistake(cell="beam_step", name='indices rebuilt with torch.tensor (no device)', kind="device",
            rejected_by=("test_beam_step",), source='''def beam_step(scores: torch.Tensor, log_probs: torch.Tensor, beam_size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """scores (B, K), log_probs (B, K, V) -> (new_scores, beam_index, token), each (B, beam_size)."""

    B, K, V = log_probs.shape
    cand = (scores.unsqueeze(-1) + log_probs).reshape(B, K * V)
    values, idx = cand.topk(beam_size, dim=-1)
    beam = torch.tensor([[i // V for i in row] for row in idx.tolist()])
    token = torch.tensor([[i % V for i in row] for row in idx.tolist()])
    return values, beam, token
'''),
    Mistake(cell="beam_step", name='uses ts.beam_step', kind="reference",
            rejected_by=("test_beam_step",), source='''def beam_step(scores: torch.Tensor, log_probs: torch.Tensor, beam_size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """scores (B, K), log_probs (B, K, V) -> (new_scores, beam_index, token), each (B, beam_size)."""

    return ts.beam_step(scores, log_probs, beam_size)
'''),
    # Red-team pass 3 (blind, from the release): escapes closed by hidden tests on padding anywhere, B = T = 1,
    # beam_size > V, and arguments / train-eval mode left untouched (leaves_unchanged).
    Mistake(cell="decoder_self_mask", name="key mask rebuilt from lengths (right padding only)", kind="logic",
            rejected_by=("test_decoder_self_mask",),
            replace=(("keys = (tgt_in != pad_id)[:, None, :]",
                      "lengths = (tgt_in != pad_id).sum(1)\n"
                      "    keys = (torch.arange(T, device=tgt_in.device)[None, :] < lengths[:, None])[:, None, :]"),)),
    Mistake(cell="decoder_self_mask", name="key mask via cumprod (stops at the first pad)", kind="logic",
            rejected_by=("test_decoder_self_mask",),
            replace=(("keys = (tgt_in != pad_id)[:, None, :]",
                      "keys = (tgt_in != pad_id).long().cumprod(1).bool()[:, None, :]"),)),
    Mistake(cell="decoder_self_mask", name="ne_ in place (overwrites the caller's ids)", kind="structure",
            rejected_by=("test_decoder_self_mask",),
            replace=(("keys = (tgt_in != pad_id)[:, None, :]", "keys = tgt_in.ne_(pad_id).bool()[:, None, :]"),)),
    Mistake(cell="teacher_forced_logits", name="model.eval() inside (changes the caller's mode)", kind="argument",
            rejected_by=("test_teacher_forced_logits",),
            replace=(("    memory, memory_mask = model.encode(", "    model.eval()\n    memory, memory_mask = model.encode("),)),
    Mistake(cell="teacher_forced_logits", name="model.train() inside (dropout on at evaluation)", kind="argument",
            rejected_by=("test_teacher_forced_logits",),
            replace=(("    memory, memory_mask = model.encode(", "    model.train()\n    memory, memory_mask = model.encode("),)),
    Mistake(cell="teacher_forced_logits", name="squeeze() on the logits (B = 1 or T = 1)", kind="boundary",
            rejected_by=("test_teacher_forced_logits",),
            replace=(("memory_mask)\n", "memory_mask).squeeze()\n"),)),
    Mistake(cell="label_smoothed_loss", name="masked_fill_ on the caller's target", kind="structure",
            rejected_by=("test_label_smoothed_loss",),
            replace=(("    logp = torch.log_softmax(logits, dim=-1)",
                      "    target.masked_fill_(target == pad_id, 0)\n    logp = torch.log_softmax(logits, dim=-1)"),
                     ("keep = target != pad_id", "keep = target != 0"))),
    Mistake(cell="label_smoothed_loss", name="logits.data clamped in place to +-30", kind="boundary",
            rejected_by=("test_label_smoothed_loss",),
            replace=(("    logp = torch.log_softmax(logits, dim=-1)",
                      "    logits.data.clamp_(-30, 30)\n    logp = torch.log_softmax(logits, dim=-1)"),)),
    Mistake(cell="beam_step", name="topk(min(beam_size, V)) (beam_size > V)", kind="boundary",
            rejected_by=("test_beam_step",), replace=(("topk(beam_size,", "topk(min(beam_size, V),"),)),
]

# Right answers in other styles than the solution: each must pass every test (issue 12).
ACCEPTED = [
    Accepted(cell="decoder_self_mask", name='tril & key mask', source='''def decoder_self_mask(tgt_in: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    """tgt_in (B, T) -> bool (B, T, T)."""

    T = tgt_in.size(1)
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool, device=tgt_in.device))
    return causal & (tgt_in != pad_id)[:, None, :]
'''),
    Accepted(cell="decoder_self_mask", name='arange comparison', source='''def decoder_self_mask(tgt_in: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    """tgt_in (B, T) -> bool (B, T, T)."""

    idx = torch.arange(tgt_in.shape[-1], device=tgt_in.device)
    causal = idx.unsqueeze(0) <= idx.unsqueeze(1)          # [i, j]: j <= i
    keys = tgt_in.ne(pad_id).unsqueeze(1)
    return causal.unsqueeze(0) & keys
'''),
    Accepted(cell="decoder_self_mask", name='notebook 05 helpers', source='''def decoder_self_mask(tgt_in: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    """tgt_in (B, T) -> bool (B, T, T)."""

    T = tgt_in.size(1)
    return (causal_mask(T, device=tgt_in.device) & key_mask(tgt_in != pad_id)).expand(tgt_in.size(0), T, T)
'''),
    Accepted(cell="teacher_forced_logits", name='as the prose says', source='''def teacher_forced_logits(model: TransformerSeq2Seq, src: torch.Tensor, src_len: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    """src (B, S), src_len (B,), tgt (B, T) -> logits (B, T, V)."""

    memory, memory_mask = model.encode(src, src_len)
    tgt_in = shift_right(tgt, model.bos_id)
    return model.decode(tgt_in, memory, decoder_self_mask(tgt_in, model.pad_id), memory_mask)
'''),
    Accepted(cell="teacher_forced_logits", name='manual shift with full on device', source='''def teacher_forced_logits(model: TransformerSeq2Seq, src: torch.Tensor, src_len: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    """src (B, S), src_len (B,), tgt (B, T) -> logits (B, T, V)."""

    B = tgt.size(0)
    bos = torch.full((B, 1), model.bos_id, dtype=tgt.dtype, device=tgt.device)
    tgt_in = torch.cat([bos, tgt[:, :-1]], dim=1)
    memory, memory_mask = model.encode(src, src_len)
    self_mask = decoder_self_mask(tgt_in, pad_id=model.pad_id)
    return model.decode(tgt_in, memory, self_mask=self_mask, memory_mask=memory_mask)
'''),
    Accepted(cell="label_smoothed_loss", name='nll + uniform term, masked mean', source='''def label_smoothed_loss(logits: torch.Tensor, target: torch.Tensor, smoothing: float = 0.1, pad_id: int = 0) -> torch.Tensor:
    """Mean over non-pad positions of -sum_v q_v log p_v."""

    logp = torch.log_softmax(logits, dim=-1)
    nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    uniform = -logp.mean(dim=-1)
    loss = (1 - smoothing) * nll + smoothing * uniform
    keep = target != pad_id
    return loss[keep].mean()
'''),
    Accepted(cell="label_smoothed_loss", name='explicit q with scatter', source='''def label_smoothed_loss(logits: torch.Tensor, target: torch.Tensor, smoothing: float = 0.1, pad_id: int = 0) -> torch.Tensor:
    """Mean over non-pad positions of -sum_v q_v log p_v."""

    V = logits.size(-1)
    logp = logits.log_softmax(-1)
    q = torch.full_like(logp, smoothing / V)
    q = q.scatter_add(-1, target.unsqueeze(-1), torch.full_like(logp[..., :1], 1 - smoothing))
    per_position = -(q * logp).sum(-1)
    keep = (target != pad_id).to(logp.dtype)
    return (per_position * keep).sum() / keep.sum()
'''),
    Accepted(cell="label_smoothed_loss", name='one_hot q, flattened', source='''def label_smoothed_loss(logits: torch.Tensor, target: torch.Tensor, smoothing: float = 0.1, pad_id: int = 0) -> torch.Tensor:
    """Mean over non-pad positions of -sum_v q_v log p_v."""

    V = logits.shape[-1]
    flat_logits, flat_target = logits.reshape(-1, V), target.reshape(-1)
    keep = flat_target != pad_id
    logp = torch.log_softmax(flat_logits[keep], dim=-1)
    q = (1 - smoothing) * F.one_hot(flat_target[keep], V).to(logp.dtype) + smoothing / V
    return -(q * logp).sum(-1).mean()
'''),
    Accepted(cell="warmup_lr", name='one-liner', source='''def warmup_lr(step: int, d_model: int, warmup: int) -> float:
    """d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)."""

    return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)
'''),
    Accepted(cell="warmup_lr", name='branches with math.sqrt', source='''def warmup_lr(step: int, d_model: int, warmup: int) -> float:
    """d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)."""

    if step < warmup:
        rate = step / (warmup * math.sqrt(warmup))
    else:
        rate = 1.0 / math.sqrt(step)
    return float(rate / math.sqrt(d_model))
'''),
    Accepted(cell="warmup_lr", name='math.pow', source='''def warmup_lr(step: int, d_model: int, warmup: int) -> float:
    """d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)."""

    assert step >= 1
    return math.pow(d_model, -0.5) * min(math.pow(step, -0.5), step * math.pow(warmup, -1.5))
'''),
    Accepted(cell="beam_step", name='flatten + topk', source='''def beam_step(scores: torch.Tensor, log_probs: torch.Tensor, beam_size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """scores (B, K), log_probs (B, K, V) -> (new_scores, beam_index, token), each (B, beam_size)."""

    B, K, V = log_probs.shape
    candidates = (scores.unsqueeze(-1) + log_probs).reshape(B, K * V)
    new_scores, flat = candidates.topk(beam_size, dim=-1)
    return new_scores, flat // V, flat % V
'''),
    Accepted(cell="beam_step", name='torch.div floor + remainder', source='''def beam_step(scores: torch.Tensor, log_probs: torch.Tensor, beam_size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """scores (B, K), log_probs (B, K, V) -> (new_scores, beam_index, token), each (B, beam_size)."""

    V = log_probs.size(-1)
    total = scores[..., None] + log_probs
    values, indices = torch.topk(total.flatten(start_dim=1), k=beam_size, dim=1, largest=True, sorted=True)
    return values, torch.div(indices, V, rounding_mode="floor"), torch.remainder(indices, V)
'''),
    Accepted(cell="beam_step", name='per-hypothesis top-k then global', source='''def beam_step(scores: torch.Tensor, log_probs: torch.Tensor, beam_size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """scores (B, K), log_probs (B, K, V) -> (new_scores, beam_index, token), each (B, beam_size)."""

    B, K, V = log_probs.shape
    k = min(beam_size, V)
    lp, tok = log_probs.topk(k, dim=-1)                      # (B, K, k)
    cand = (scores.unsqueeze(-1) + lp).reshape(B, K * k)
    new_scores, idx = cand.topk(beam_size, dim=-1)
    beam = idx // k
    token = tok.reshape(B, K * k).gather(1, idx)
    return new_scores, beam, token
'''),
    Accepted(cell="beam_step", name='sort + unravel', source='''def beam_step(scores: torch.Tensor, log_probs: torch.Tensor, beam_size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """scores (B, K), log_probs (B, K, V) -> (new_scores, beam_index, token), each (B, beam_size)."""

    B, K, V = log_probs.shape
    flat = (scores.view(B, K, 1) + log_probs).view(B, -1)
    order = flat.argsort(dim=-1, descending=True)[:, :beam_size]
    new_scores = flat.gather(1, order)
    return new_scores, order // V, order - (order // V) * V
'''),
    # from the third blind red-team pass
    Accepted(cell="decoder_self_mask", name="(tgt_in - pad_id).bool() key mask, expand without clone", source='''\
def decoder_self_mask(tgt_in: torch.Tensor, pad_id: int = 0) -> torch.Tensor:
    """tgt_in (B, T) -> bool (B, T, T)."""
    B, T = tgt_in.shape
    keys = (tgt_in - pad_id).bool()[:, None, :].expand(B, T, T)
    return keys.tril()
'''),
    Accepted(cell="teacher_forced_logits", name="F.pad shift, keyword arguments", source='''\
import torch.nn.functional as F
def teacher_forced_logits(model: TransformerSeq2Seq, src: torch.Tensor, src_len: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    """src (B, S), src_len (B,), tgt (B, T) -> logits (B, T, V)."""
    memory, memory_mask = model.encode(src, src_len)
    tgt_in = F.pad(tgt[:, :-1], (1, 0), value=model.bos_id)
    mask = decoder_self_mask(tgt_in, pad_id=model.pad_id)
    return model.decode(tgt_in, memory, mask, memory_mask)
'''),
    Accepted(cell="label_smoothed_loss", name="F.nll_loss for both terms (logits and target untouched)", source='''\
import torch.nn.functional as F
def label_smoothed_loss(logits: torch.Tensor, target: torch.Tensor, smoothing: float = 0.1, pad_id: int = 0) -> torch.Tensor:
    """Mean over non-pad positions of -sum_v q_v log p_v."""
    logp = torch.log_softmax(logits, dim=-1).flatten(0, 1)
    y = target.flatten()
    nll = F.nll_loss(logp, y, ignore_index=pad_id)
    keep = y != pad_id
    uniform = -logp.mean(-1)[keep].mean()
    return (1 - smoothing) * nll + smoothing * uniform
'''),
    Accepted(cell="beam_step", name="flatten + topk + unravel_index", source='''\
def beam_step(scores: torch.Tensor, log_probs: torch.Tensor, beam_size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """scores (B, K), log_probs (B, K, V) -> (new_scores, beam_index, token), each (B, beam_size)."""
    K, V = log_probs.shape[1:]
    best, flat = (scores[..., None] + log_probs).flatten(1).topk(beam_size, dim=-1)
    beam, token = torch.unravel_index(flat, (K, V))
    return best, beam, token
'''),
    Accepted(cell="beam_step", name="view + repeat_interleave (log_probs arrive contiguous)", source='''\
def beam_step(scores: torch.Tensor, log_probs: torch.Tensor, beam_size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """scores (B, K), log_probs (B, K, V) -> (new_scores, beam_index, token), each (B, beam_size)."""
    B, K, V = log_probs.shape
    cand = log_probs.view(B, K * V) + scores.repeat_interleave(V, dim=1)
    values, idx = cand.topk(beam_size, dim=-1)
    return values, idx // V, idx % V
'''),
]
