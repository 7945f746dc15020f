"""Plausible wrong answers to notebook 03; each must lose points in the tests named."""

from course_utils.tooling.mistakes import Mistake

MISTAKES = [
    Mistake(cell="scaled_scores", name="divides by d instead of sqrt(d)",
            rejected_by=("test_scaled_scores",), replace=(("math.sqrt(d)", "d"),)),
    Mistake(cell="scaled_scores", name="K.T instead of transposing the last two dims",
            rejected_by=("test_scaled_scores",), replace=(("K.transpose(-2, -1)", "K.T"),)),
    Mistake(cell="scaled_scores", name="keys times queries: K Q^T",
            rejected_by=("test_scaled_scores",), replace=(("Q @ K.transpose(-2, -1)", "K @ Q.transpose(-2, -1)"),)),
    Mistake(cell="dot_product_variance", name="uniform instead of normal samples",
            rejected_by=("test_dot_product_variance",), replace=(("torch.randn", "torch.rand"),)),
    Mistake(cell="dot_product_variance", name="scales by d instead of sqrt(d)",
            rejected_by=("test_dot_product_variance",), replace=(("math.sqrt(d)", "d"),)),
    Mistake(cell="stable_softmax", name="no max subtraction",
            rejected_by=("test_stable_softmax",), replace=(("x - x.amax(dim=dim, keepdim=True)", "x"),)),
    Mistake(cell="stable_softmax", name="subtracts one global max, not per row",
            rejected_by=("test_stable_softmax",), replace=(("x.amax(dim=dim, keepdim=True)", "x.max()"),)),
    Mistake(cell="stable_softmax", name="ignores dim, always the last axis",
            rejected_by=("test_stable_softmax",), replace=(("dim=dim", "dim=-1"),)),
    Mistake(cell="attention", name="softmax over the queries axis",
            rejected_by=("test_attention",), replace=(("stable_softmax(scores, dim=-1)", "stable_softmax(scores, dim=-2)"),)),
    Mistake(cell="attention", name="unnormalised scores as weights",
            rejected_by=("test_attention",), replace=(("weights = stable_softmax(scores, dim=-1)", "weights = scores"),)),
    Mistake(cell="self_attention_module", name="values taken from x, not projected",
            rejected_by=("test_self_attention_module",), replace=(("V = self.value(x)", "V = x[..., : self.value.out_features]"),)),
    Mistake(cell="self_attention_module", name="keys from the query projection",
            rejected_by=("test_self_attention_module",), replace=(("K = self.key(x)", "K = self.query(x)"),)),
    Mistake(cell="equivariance_gap", name="output not permuted",
            rejected_by=("test_equivariance_gap",), replace=(("module(x)[0][:, perm]", "module(x)[0]"),)),
    Mistake(cell="equivariance_gap", name="output permuted with the inverse permutation",
            rejected_by=("test_equivariance_gap",), replace=(("module(x)[0][:, perm]", "module(x)[0][:, torch.argsort(perm)]"),)),
]
