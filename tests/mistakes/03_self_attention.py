"""Plausible wrong answers to notebook 03; each must lose points in the tests named."""

from course_grader.authoring.mistakes import Accepted, Mistake

MISTAKES = [
    Mistake(cell="scaled_scores", name="divides by d instead of sqrt(d)", kind="logic",
            rejected_by=("test_scaled_scores",), replace=(("math.sqrt(d)", "d"),)),
    Mistake(cell="scaled_scores", name="K.T instead of transposing the last two dims", kind="logic",
            rejected_by=("test_scaled_scores",), replace=(("K.transpose(-2, -1)", "K.T"),)),
    Mistake(cell="scaled_scores", name="keys times queries: K Q^T", kind="logic",
            rejected_by=("test_scaled_scores",), replace=(("Q @ K.transpose(-2, -1)", "K @ Q.transpose(-2, -1)"),)),
    # Transposes the caller's K in place; with X as both Q and K in the test, the notebook's global X stays
    # transposed, which re-running the cells cannot undo: the harness gives the next candidate a fresh kernel.
    Mistake(cell="scaled_scores", name="K.transpose_ in place (the caller's X transposed)", kind="structure",
            rejected_by=("test_scaled_scores",), replace=(("K.transpose(-2, -1)", "K.transpose_(-2, -1)"),)),
    Mistake(cell="dot_product_variance", name="uniform instead of normal samples", kind="statistics",
            rejected_by=("test_dot_product_variance",), replace=(("torch.randn", "torch.rand"),)),
    Mistake(cell="dot_product_variance", name="scales by d instead of sqrt(d)", kind="logic",
            rejected_by=("test_dot_product_variance",), replace=(("math.sqrt(d)", "d"),)),
    Mistake(cell="stable_softmax", name="no max subtraction", kind="boundary",
            rejected_by=("test_stable_softmax",), replace=(("x - x.amax(dim=dim, keepdim=True)", "x"),)),
    Mistake(cell="stable_softmax", name="subtracts one global max, not per row", kind="boundary",
            rejected_by=("test_stable_softmax",), replace=(("x.amax(dim=dim, keepdim=True)", "x.max()"),)),
    Mistake(cell="stable_softmax", name="ignores dim, always the last axis", kind="argument",
            rejected_by=("test_stable_softmax",), replace=(("dim=dim", "dim=-1"),)),
    Mistake(cell="stable_softmax", name="calls torch.softmax instead of building it", kind="ban",
            rejected_by=("test_stable_softmax",),
            source="def stable_softmax(x, dim=-1):\n    return torch.softmax(x, dim=dim)\n"),
    # third blind red team: a softmax computed by a fused attention call over an identity (14/14 before the
    # ban covered functions that compute a softmax inside)
    Mistake(cell="stable_softmax", name="softmax through F.scaled_dot_product_attention over an identity", kind="ban",
            rejected_by=("test_stable_softmax",),
            source="def stable_softmax(x, dim=-1):\n    z = x.movedim(dim, -1)\n"
                   "    eye = torch.eye(z.shape[-1], dtype=z.dtype, device=z.device)\n"
                   "    p = F.scaled_dot_product_attention(z.unsqueeze(-2), eye, eye, scale=1.0).squeeze(-2)\n"
                   "    return p.movedim(-1, dim)\n"),
    # third blind red team: the textbook numbers plus noise sized to the sample count, no q or k drawn
    # (14/14 before the ratio check: every other check is statistical)
    Mistake(cell="dot_product_variance", name="textbook values plus noise, nothing drawn from q and k", kind="statistics",
            rejected_by=("test_dot_product_variance",),
            source="def dot_product_variance(d, n_samples, generator):\n"
                   "    z = torch.randn(2, generator=generator, dtype=torch.float64)\n"
                   "    s = (8.0 / n_samples) ** 0.5\n"
                   "    return float(d * abs(1 + s * z[0])), float(abs(1 + s * z[1]))\n"),
    Mistake(cell="attention", name="softmax over the queries axis", kind="logic",
            rejected_by=("test_attention",), replace=(("stable_softmax(scores, dim=-1)", "stable_softmax(scores, dim=-2)"),)),
    Mistake(cell="attention", name="unnormalised scores as weights", kind="logic",
            rejected_by=("test_attention",), replace=(("weights = stable_softmax(scores, dim=-1)", "weights = scores"),)),
    Mistake(cell="self_attention_module", name="values taken from x, not projected", kind="logic",
            rejected_by=("test_self_attention_module",), replace=(("V = self.value(x)", "V = x[..., : self.value.out_features]"),)),
    Mistake(cell="self_attention_module", name="keys from the query projection", kind="logic",
            rejected_by=("test_self_attention_module",), replace=(("K = self.key(x)", "K = self.query(x)"),)),
    Mistake(cell="equivariance_gap", name="output not permuted", kind="logic",
            rejected_by=("test_equivariance_gap",), replace=(("module(x)[0][:, perm]", "module(x)[0]"),)),
    Mistake(cell="equivariance_gap", name="mean absolute difference instead of max", kind="logic",
            rejected_by=("test_equivariance_gap",), replace=((".abs().max().item()", ".abs().mean().item()"),)),
    Mistake(cell="equivariance_gap", name="output permuted with the inverse permutation", kind="logic",
            rejected_by=("test_equivariance_gap",), replace=(("module(x)[0][:, perm]", "module(x)[0][:, torch.argsort(perm)]"),)),
]

# Found by the blind red team of issue 12: each kept full marks before the hidden tests were strengthened.
MISTAKES += [
    Mistake(cell="scaled_scores", name="casts the scores to float32", kind="dtype",
            rejected_by=("test_scaled_scores",),
            replace=(("return Q @ K.transpose(-2, -1) / math.sqrt(d)", "return (Q @ K.transpose(-2, -1)).float() / math.sqrt(d)"),)),
    Mistake(cell="dot_product_variance", name="ignores the generator (global RNG)", kind="argument",
            rejected_by=("test_dot_product_variance",), replace=((", generator=generator)", ")"),)),
    Mistake(cell="dot_product_variance", name="draws k from the global RNG (randn_like)", kind="argument",
            rejected_by=("test_dot_product_variance",),
            replace=(("k = torch.randn(n_samples, d, generator=generator)", "k = torch.randn_like(q)"),)),
    Mistake(cell="dot_product_variance", name="ignores n_samples (always 20,000 pairs)", kind="argument",
            rejected_by=("test_dot_product_variance",), replace=(("torch.randn(n_samples, d,", "torch.randn(20_000, d,"),)),
    Mistake(cell="stable_softmax", name="torch.special.softmax", kind="ban",
            rejected_by=("test_stable_softmax",),
            source="def stable_softmax(x, dim=-1):\n    return torch.special.softmax(x, dim=dim)\n"),
    Mistake(cell="stable_softmax", name="log_softmax().exp()", kind="ban",
            rejected_by=("test_stable_softmax",),
            source="def stable_softmax(x, dim=-1):\n    return x.log_softmax(dim=dim).exp()\n"),
    Mistake(cell="stable_softmax", name="exp of F.log_softmax imported under another name", kind="ban",
            rejected_by=("test_stable_softmax",),
            source=("from torch.nn.functional import log_softmax as _lsm\n\n"
                    "def stable_softmax(x, dim=-1):\n    return torch.exp(_lsm(x, dim))\n")),
    Mistake(cell="stable_softmax", name="imports the course's softmax", kind="reference",
            rejected_by=("test_stable_softmax",),
            source=("from course_utils import attention as _attention\n\n"
                    "def stable_softmax(x, dim=-1):\n    return _attention.softmax(x, dim=dim)\n")),
    Mistake(cell="stable_softmax", name="casts to float32", kind="dtype",
            rejected_by=("test_stable_softmax",),
            replace=(("shifted = x - x.amax", "x = x.float()\n    shifted = x - x.amax"),)),
    Mistake(cell="stable_softmax", name="exp_ and /= in place (breaks backward)", kind="autograd",
            rejected_by=("test_stable_softmax",),
            replace=(("exps = torch.exp(shifted)\n    return exps / exps.sum(dim=dim, keepdim=True)",
                      "exps = shifted.exp_()\n    exps /= exps.sum(dim=dim, keepdim=True)\n    return exps"),)),
    Mistake(cell="stable_softmax", name="subtracts the max from the input in place", kind="autograd",
            rejected_by=("test_stable_softmax",),
            replace=(("shifted = x - x.amax(dim=dim, keepdim=True)", "x -= x.amax(dim=dim, keepdim=True)\n    shifted = x"),)),
    Mistake(cell="attention", name="imports the course's scaled_dot_product_attention", kind="reference",
            rejected_by=("test_attention",),
            source=("from course_utils.attention import scaled_dot_product_attention\n\n"
                    "def attention(Q, K, V):\n    return scaled_dot_product_attention(Q, K, V)\n")),
    Mistake(cell="attention", name="computes in float32 whatever the input dtype", kind="dtype",
            rejected_by=("test_attention",),
            replace=(("weights = stable_softmax(scores, dim=-1)", "weights = stable_softmax(scores.float(), dim=-1)"),
                     ("return weights @ V, weights", "return weights @ V.float(), weights"))),
    Mistake(cell="attention", name="torch.bmm (3-d inputs only)", kind="boundary",
            rejected_by=("test_attention",), replace=(("return weights @ V, weights", "return torch.bmm(weights, V), weights"),)),
    Mistake(cell="self_attention_module", name="subclasses the course's SelfAttentionHead", kind="reference",
            rejected_by=("test_self_attention_module",),
            source=("from course_utils.attention import SelfAttentionHead\n\n\n"
                    "class SelfAttention(SelfAttentionHead):\n"
                    "    def __init__(self, d_model: int, d_head: int):\n"
                    "        super().__init__(d_model, d_head)\n")),
    # the third (blind) red team: with x zeroed in place, expectations computed after the call match
    Mistake(cell="self_attention_module", name="zeroes its input in place, returns uniform weights", kind="argument",
            rejected_by=("test_self_attention_module",),
            source=("import torch\n\n\nclass SelfAttention(torch.nn.Module):\n"
                    "    def __init__(self, d_model: int, d_head: int):\n        super().__init__()\n"
                    "        self.query = torch.nn.Linear(d_model, d_head, bias=False)\n"
                    "        self.key = torch.nn.Linear(d_model, d_head, bias=False)\n"
                    "        self.value = torch.nn.Linear(d_model, d_head, bias=False)\n\n"
                    "    def forward(self, x):\n        with torch.no_grad():\n            x.zero_()\n"
                    "        B, T, _ = x.shape\n        V = self.value(x)\n"
                    "        weights = torch.full((B, T, T), 1.0 / T, dtype=x.dtype) + 0 * V.sum()\n"
                    "        return weights @ V, weights\n")),
    Mistake(cell="self_attention_module", name="query and key are one shared layer", kind="structure",
            rejected_by=("test_self_attention_module",),
            replace=(("self.key = torch.nn.Linear(d_model, d_head, bias=False)", "self.key = self.query"),)),
    Mistake(cell="equivariance_gap", name="largest signed difference (no abs)", kind="logic",
            rejected_by=("test_equivariance_gap",), replace=((".abs().max().item()", ".max().item()"),)),
    Mistake(cell="equivariance_gap", name="gap of the first sequence of the batch only", kind="logic",
            rejected_by=("test_equivariance_gap",),
            replace=(("return (out_of_permuted - permuted_out)", "return (out_of_permuted[0] - permuted_out[0])"),)),
]

# Right answers in other styles than the solution (the blind red team's); every test must accept them.
ACCEPTED = [
    Accepted(cell="scaled_scores", name="einsum with ellipsis", source='''def scaled_scores(Q: torch.Tensor, K: torch.Tensor) -> torch.Tensor:
    """Q: (..., T_q, d), K: (..., T_k, d) -> scores (..., T_q, T_k) = Q K^T / sqrt(d)."""
    d = Q.size(-1)
    return torch.einsum("...id,...jd->...ij", Q, K) * d ** -0.5
'''),
    Accepted(cell="scaled_scores", name="torch.sqrt of a 0-dim tensor, mT, asserts", source='''def scaled_scores(Q: torch.Tensor, K: torch.Tensor) -> torch.Tensor:
    """Q: (..., T_q, d), K: (..., T_k, d) -> scores (..., T_q, T_k) = Q K^T / sqrt(d)."""
    assert Q.shape[-1] == K.shape[-1], "queries and keys must have the same size d"
    scale = torch.sqrt(torch.tensor(K.shape[-1], dtype=Q.dtype, device=Q.device))
    return torch.matmul(Q, K.mT) / scale
'''),
    Accepted(cell="dot_product_variance", name="one draw of (2, n, d), einsum, biased variance in float64", source='''def dot_product_variance(d: int, n_samples: int, generator: torch.Generator) -> tuple[float, float]:
    """Empirical variance of q.k and of q.k / sqrt(d) for standard normal q, k in R^d."""
    q, k = torch.randn(2, n_samples, d, generator=generator, dtype=torch.float64)
    dots = torch.einsum("nd,nd->n", q, k)
    scaled = dots / d ** 0.5
    raw_var = ((dots - dots.mean()) ** 2).mean()
    scaled_var = ((scaled - scaled.mean()) ** 2).mean()
    return float(raw_var), float(scaled_var)
'''),
    Accepted(cell="dot_product_variance", name="loop-free torch.var_mean, statistics-friendly", source='''def dot_product_variance(d: int, n_samples: int, generator: torch.Generator) -> tuple[float, float]:
    """Empirical variance of q.k and of q.k / sqrt(d) for standard normal q, k in R^d."""
    pairs = torch.randn(n_samples, 2, d, generator=generator)
    dots = torch.bmm(pairs[:, :1, :], pairs[:, 1:, :].transpose(1, 2)).flatten()
    var_raw, _ = torch.var_mean(dots)
    var_scaled, _ = torch.var_mean(dots / math.sqrt(d))
    return (var_raw.item(), var_scaled.item())
'''),
    Accepted(cell="stable_softmax", name="max().values detached (shift has zero gradient)", source='''def stable_softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax of x along dim, computed without overflow. Same shape as x."""
    m, _ = torch.max(x, dim=dim, keepdim=True)
    e = (x - m.detach()).exp()
    return torch.div(e, torch.sum(e, dim=dim, keepdim=True))
'''),
    Accepted(cell="stable_softmax", name="movedim to last axis and back", source='''def stable_softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax of x along dim, computed without overflow. Same shape as x."""
    z = x.movedim(dim, -1)
    z = z - z.max(dim=-1, keepdim=True).values
    e = z.exp()
    return (e / e.sum(dim=-1, keepdim=True)).movedim(-1, dim)
'''),
    Accepted(cell="stable_softmax", name="log-sum-exp form: exp(x - m - log sum exp(x - m))", source='''def stable_softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax of x along dim, computed without overflow. Same shape as x."""
    m = x.amax(dim=dim, keepdim=True)
    return torch.exp(x - m - torch.log(torch.exp(x - m).sum(dim=dim, keepdim=True)))
'''),
    Accepted(cell="attention", name="einsum for the weighted sum, default dim", source='''def attention(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Q: (..., T_q, d), K: (..., T_k, d), V: (..., T_k, d_v) -> (output (..., T_q, d_v), weights (..., T_q, T_k))."""
    scores = scaled_scores(Q, K)
    weights = stable_softmax(scores)
    output = torch.einsum("...qk,...kv->...qv", weights, V)
    return (output, weights)
'''),
    Accepted(cell="attention", name="torch.matmul with shape asserts", source='''def attention(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Q: (..., T_q, d), K: (..., T_k, d), V: (..., T_k, d_v) -> (output (..., T_q, d_v), weights (..., T_q, T_k))."""
    assert K.shape[-2] == V.shape[-2], "one value per key"
    weights = stable_softmax(scaled_scores(Q, K), dim=Q.dim() - 1)
    return torch.matmul(weights, V), weights
'''),
    Accepted(cell="self_attention_module", name="explicit weight products, keeps sizes", source='''import torch.nn as nn

class SelfAttention(nn.Module):
    """One self-attention head: x (B, T, d_model) -> (output (B, T, d_head), weights (B, T, T))."""

    def __init__(self, d_model: int, d_head: int):
        super().__init__()
        self.d_model, self.d_head = d_model, d_head
        for name in ("query", "key", "value"):
            setattr(self, name, nn.Linear(d_model, d_head, bias=False))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        Q = x @ self.query.weight.T
        K = x @ self.key.weight.T
        V = x @ self.value.weight.T
        output, weights = attention(Q, K, V)
        return output, weights
'''),
    Accepted(cell="equivariance_gap", name="index_select, detach, float()", source='''def equivariance_gap(module, x: torch.Tensor, perm: torch.Tensor) -> float:
    """max |module(x[:, perm])[0] - module(x)[0][:, perm]| as a float."""
    perm = perm.to(x.device)
    out_of_permuted = module(x.index_select(1, perm))[0].detach()
    permuted_out = module(x)[0].detach().index_select(1, perm)
    return float(torch.max(torch.abs(out_of_permuted - permuted_out)))
'''),
]

# Found by the second blind red team: each kept full marks before the tests were strengthened.
MISTAKES += [
    Mistake(cell="dot_product_variance", name="variance over the d products of each pair, times d", kind="statistics",
            rejected_by=("test_dot_product_variance",),
            replace=(("return dots.var().item(),", "return (q * k).var(dim=-1).mean().item() * d,"),)),
    Mistake(cell="attention", name="squeezes output and weights", kind="boundary",
            rejected_by=("test_attention",),
            replace=(("return weights @ V, weights", "return (weights @ V).squeeze(), weights.squeeze()"),)),
    Mistake(cell="attention", name="squeeze(0) on output and weights (a batch of one loses its dimension)", kind="boundary",
            rejected_by=("test_attention",),
            replace=(("return weights @ V, weights", "return (weights @ V).squeeze(0), weights.squeeze(0)"),)),
    Mistake(cell="self_attention_module", name="casts x to float32 in forward", kind="dtype",
            rejected_by=("test_self_attention_module",),
            replace=(("Q = self.query(x)", "x = x.float()\n        Q = self.query(x)"),)),
    Mistake(cell="self_attention_module", name="x.to(torch.float32) in forward", kind="dtype",
            rejected_by=("test_self_attention_module",),
            replace=(("Q = self.query(x)", "x = x.to(torch.float32)\n        Q = self.query(x)"),)),
    Mistake(cell="self_attention_module", name="detaches x before the projections", kind="autograd",
            rejected_by=("test_self_attention_module",),
            replace=(("Q = self.query(x)", "x = x.detach()\n        Q = self.query(x)"),)),
    Mistake(cell="self_attention_module", name="returns detached weights", kind="autograd",
            rejected_by=("test_self_attention_module",),
            replace=(("return attention(Q, K, V)", "output, weights = attention(Q, K, V)\n        return output, weights.detach()"),)),
    Mistake(cell="self_attention_module", name="squeeze(0) on output and weights (B = 1 breaks)", kind="boundary",
            rejected_by=("test_self_attention_module",),
            replace=(("return attention(Q, K, V)", "output, weights = attention(Q, K, V)\n        return output.squeeze(0), weights.squeeze(0)"),)),
    Mistake(cell="self_attention_module", name="key and value start as copies of the query weights", kind="structure",
            rejected_by=("test_self_attention_module",),
            replace=(("self.value = torch.nn.Linear(d_model, d_head, bias=False)",
                      "self.value = torch.nn.Linear(d_model, d_head, bias=False)\n"
                      "        self.key.weight.data.copy_(self.query.weight.data)\n"
                      "        self.value.weight.data.copy_(self.query.weight.data)"),)),
    Mistake(cell="equivariance_gap", name="permutes the caller's x in place", kind="argument",
            rejected_by=("test_equivariance_gap",),
            replace=(("out_of_permuted = module(x[:, perm])[0]\n        permuted_out = module(x)[0][:, perm]",
                      "permuted_out = module(x)[0][:, perm]\n        x.copy_(x[:, perm])\n        out_of_permuted = module(x)[0]"),)),
    Mistake(cell="equivariance_gap", name="x.requires_grad_() on the caller's tensor", kind="argument",
            rejected_by=("test_equivariance_gap",),
            replace=(("with torch.no_grad():", "x.requires_grad_(True)\n    with torch.no_grad():"),)),
    Mistake(cell="equivariance_gap", name="switches the module to eval() and leaves it there", kind="argument",
            rejected_by=("test_equivariance_gap",),
            replace=(("with torch.no_grad():", "module.eval()\n    with torch.no_grad():"),)),
]

_SA_HEAD = '''class SelfAttention(torch.nn.Module):
    """One self-attention head: x (B, T, d_model) -> (output (B, T, d_head), weights (B, T, T))."""

    def __init__(self, d_model: int, d_head: int):
        super().__init__()
        self.query = torch.nn.Linear(d_model, d_head, bias=False)
        self.key = torch.nn.Linear(d_model, d_head, bias=False)
        self.value = torch.nn.Linear(d_model, d_head, bias=False)
'''
_EG_HEAD = '''def equivariance_gap(module, x: torch.Tensor, perm: torch.Tensor) -> float:
    """max |module(x[:, perm])[0] - module(x)[0][:, perm]| as a float."""
'''

# The second red team's right answers (guards against over-tightening).
ACCEPTED += [
    Accepted(cell="attention", name="keyword calls of the helpers", source='''def attention(Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Q: (..., T_q, d), K: (..., T_k, d), V: (..., T_k, d_v) -> (output (..., T_q, d_v), weights (..., T_q, T_k))."""
    weights = stable_softmax(x=scaled_scores(Q=Q, K=K), dim=-1)
    return weights @ V, weights
'''),
    Accepted(cell="self_attention_module", name="keyword call attention(Q=, K=, V=)", source=_SA_HEAD + '''
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return attention(Q=self.query(x), K=self.key(x), V=self.value(x))
'''),
    Accepted(cell="self_attention_module", name="F.linear with the weights, keyword attention", source=_SA_HEAD + '''
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        F_ = torch.nn.functional
        return attention(Q=F_.linear(x, self.query.weight), K=F_.linear(x, self.key.weight), V=F_.linear(x, self.value.weight))
'''),
    Accepted(cell="self_attention_module", name="layers also kept in a plain list attribute", source=_SA_HEAD.replace(
        "        self.value = torch.nn.Linear(d_model, d_head, bias=False)\n",
        "        self.value = torch.nn.Linear(d_model, d_head, bias=False)\n"
        "        self.projections = [self.query, self.key, self.value]\n") + '''
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        q, k, v = (layer(x) for layer in self.projections)
        out, w = attention(q, k, v)
        return out, w
'''),
    Accepted(cell="equivariance_gap", name="eval() for the comparison, previous mode restored", source=_EG_HEAD + '''    was_training = module.training
    module.eval()
    try:
        with torch.no_grad():
            a = module(x[:, perm])[0]
            b = module(x)[0][:, perm]
    finally:
        module.train(was_training)
    return (a - b).abs().max().item()
'''),
    Accepted(cell="equivariance_gap", name="torch.dist with p=inf, float()", source=_EG_HEAD + '''    with torch.no_grad():
        a = module(x[:, perm])[0]
        b = module(x)[0][:, perm]
    return float(torch.dist(a, b, p=float("inf")))
'''),
    Accepted(cell="equivariance_gap", name="index_select on dim 1, amax, gradients kept", source=_EG_HEAD + '''    a = module(x.index_select(1, perm))[0]
    b = module(x)[0].index_select(1, perm)
    return (a - b).abs().amax().item()
'''),
    Accepted(cell="dot_product_variance", name="raw variance / d for the scaled one", source='''def dot_product_variance(d: int, n_samples: int, generator: torch.Generator) -> tuple[float, float]:
    """Empirical variance of q.k and of q.k / sqrt(d) for standard normal q, k in R^d."""
    q = torch.randn(n_samples, d, generator=generator)
    k = torch.randn(n_samples, d, generator=generator)
    raw = torch.einsum("nd,nd->n", q, k).var().item()
    return raw, raw / d
'''),
    Accepted(cell="stable_softmax", name="max(dim).values.unsqueeze(dim)", source='''def stable_softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax of x along dim, computed without overflow. Same shape as x."""
    m = x.max(dim).values.unsqueeze(dim)
    e = (x - m).exp()
    return e / e.sum(dim).unsqueeze(dim)
'''),
]
