"""Plausible wrong answers to notebook 00; each must lose points in the tests named."""

from course_utils.tooling.mistakes import Mistake

MISTAKES = [
    Mistake(cell="count_parameters", name="counts parameter tensors, not numbers",
            rejected_by=("test_count_parameters",), replace=(("sum(p.numel() for p", "sum(1 for p"),)),
    Mistake(cell="count_parameters", name="counts frozen parameters too",
            rejected_by=("test_count_parameters",), replace=((" if p.requires_grad", ""),)),
]
