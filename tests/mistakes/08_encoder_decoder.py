"""Plausible wrong answers to notebook 08; each must lose points in the tests named."""

from course_utils.tooling.mistakes import Mistake

MISTAKES = [
    Mistake(cell="decoder_self_mask", name="causal mask transposed (upper triangle)",
            rejected_by=("test_decoder_self_mask",), replace=(("torch.tril(", "torch.triu("),)),
    Mistake(cell="decoder_self_mask", name="padding masks queries instead of keys",
            rejected_by=("test_decoder_self_mask",), replace=(("[:, None, :]", "[:, :, None]"),)),
    Mistake(cell="teacher_forced_logits", name="targets not shifted right",
            rejected_by=("test_teacher_forced_logits",),
            replace=(("tgt_in = shift_right(tgt, model.bos_id)", "tgt_in = tgt"),)),
    Mistake(cell="teacher_forced_logits", name="no mask in the decoder self-attention",
            rejected_by=("test_teacher_forced_logits",),
            replace=(("decoder_self_mask(tgt_in, model.pad_id), memory_mask", "None, memory_mask"),)),
    Mistake(cell="label_smoothed_loss", name="padding counted in the mean",
            rejected_by=("test_label_smoothed_loss",),
            replace=(("return (loss * keep).sum() / keep.sum()", "return loss.mean()"),)),
    Mistake(cell="label_smoothed_loss", name="smoothing weights swapped",
            rejected_by=("test_label_smoothed_loss",),
            replace=(("(1 - smoothing) * nll + smoothing * uniform", "smoothing * nll + (1 - smoothing) * uniform"),)),
    Mistake(cell="warmup_lr", name="max instead of min",
            rejected_by=("test_warmup_lr",), replace=(("min(", "max("),)),
    Mistake(cell="beam_step", name="forgets the hypotheses' scores",
            rejected_by=("test_beam_step",),
            replace=(("(scores.unsqueeze(-1) + log_probs)", "log_probs"),)),
]
