"""Curated wrong answers of notebook 05 (masking); each must be rejected."""

from course_utils.tooling.mistakes import Mistake

MISTAKES = [
    Mistake(
        cell="causal_mask",
        name="upper triangle (mask transposed)",
        rejected_by=("test_causal_mask",),
        replace=(("torch.tril(", "torch.triu("),),
    ),
    Mistake(
        cell="causal_mask",
        name="excludes the diagonal",
        rejected_by=("test_causal_mask",),
        replace=(("dtype=torch.bool))", "dtype=torch.bool), diagonal=-1)"),),
    ),
    Mistake(
        cell="additive_mask",
        name="-inf where allowed (inverted)",
        rejected_by=("test_additive_mask",),
        replace=(("masked_fill(~mask,", "masked_fill(mask,"),),
    ),
    Mistake(
        cell="padding_mask",
        name="off by one (t <= length)",
        rejected_by=("test_padding_mask",),
        replace=(("torch.arange(T)[None, :] < lengths", "torch.arange(T)[None, :] <= lengths"),),
    ),
    Mistake(
        cell="combined_mask",
        name="padding on the query axis",
        rejected_by=("test_combined_mask",),
        replace=(("padding_mask(lengths, T)[:, None, :]", "padding_mask(lengths, T)[:, :, None]"),),
    ),
    Mistake(
        cell="dependence_matrix",
        name="transposed (input rows, output columns)",
        rejected_by=("test_dependence_matrix",),
        replace=(("return jac.abs().sum(dim=(1, 3))", "return jac.abs().sum(dim=(1, 3)).T"),),
    ),
    Mistake(
        cell="dependence_matrix",
        name="sums signed derivatives (no abs)",
        rejected_by=("test_dependence_matrix",),
        replace=(("return jac.abs().sum(dim=(1, 3))", "return jac.sum(dim=(1, 3))"),),
    ),
    Mistake(
        cell="safe_masked_softmax",
        name="naive masked_fill(-inf) then softmax",
        rejected_by=("test_safe_masked_softmax",),
        source=(
            "def safe_masked_softmax(scores, mask):\n"
            "    return torch.softmax(scores.masked_fill(~mask, float('-inf')), dim=-1)\n"
        ),
    ),
    Mistake(
        cell="safe_masked_softmax",
        name="fills with -1e9 (empty rows become uniform)",
        rejected_by=("test_safe_masked_softmax",),
        source=(
            "def safe_masked_softmax(scores, mask):\n"
            "    return torch.softmax(scores.masked_fill(~mask, -1e9), dim=-1)\n"
        ),
    ),
    Mistake(
        cell="key_padding_to_sdpa_mask",
        name="forgets to invert the convention",
        rejected_by=("test_key_padding_to_sdpa_mask",),
        replace=(("return (~key_padding_mask)[:, None, None, :]", "return key_padding_mask[:, None, None, :]"),),
    ),
]
