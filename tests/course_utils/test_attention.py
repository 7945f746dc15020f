"""course_utils.attention against PyTorch's own kernels (float32, atol 1e-5)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from course_utils.attention import SelfAttentionHead, scaled_dot_product_attention, softmax

ATOL = 1e-5


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_matches_torch(dim):
    x = torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(0)) * 30
    torch.testing.assert_close(softmax(x, dim=dim), torch.softmax(x, dim=dim), atol=ATOL, rtol=1e-5)


def test_softmax_does_not_overflow():
    x = torch.tensor([[1000.0, 1001.0], [-1000.0, -1001.0]])
    assert torch.isfinite(softmax(x)).all()
    torch.testing.assert_close(softmax(x), torch.softmax(x, dim=-1))


@pytest.mark.parametrize("shape_q,shape_k", [((5, 8), (7, 8)), ((2, 5, 8), (2, 7, 8)), ((2, 3, 6, 16), (2, 3, 6, 16))])
def test_attention_matches_torch_sdpa(shape_q, shape_k):
    gen = torch.Generator().manual_seed(1)
    q, k = torch.randn(shape_q, generator=gen), torch.randn(shape_k, generator=gen)
    v = torch.randn(*shape_k[:-1], 4, generator=gen)
    out, weights = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), atol=ATOL, rtol=1e-5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]))


def test_attention_mask_true_means_allowed():
    gen = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, 4, 8, generator=gen) for _ in range(3))
    causal = torch.ones(4, 4, dtype=torch.bool).tril()
    out, weights = scaled_dot_product_attention(q, k, v, causal)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=causal), atol=ATOL, rtol=1e-5)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True), atol=ATOL, rtol=1e-5)
    assert (weights.masked_select(~causal) == 0).all()


def test_self_attention_head_shapes_and_equivariance():
    torch.manual_seed(3)
    head = SelfAttentionHead(d_model=8, d_head=4)
    x = torch.randn(2, 6, 8)
    out, weights = head(x)
    assert out.shape == (2, 6, 4) and weights.shape == (2, 6, 6)
    assert sum(p.numel() for p in head.parameters()) == 3 * 8 * 4
    perm = torch.tensor([3, 1, 0, 5, 2, 4])
    torch.testing.assert_close(head(x[:, perm])[0], out[:, perm], atol=ATOL, rtol=1e-5)


def test_self_attention_head_equals_explicit_formula():
    torch.manual_seed(4)
    head = SelfAttentionHead(d_model=5)
    x = torch.randn(1, 3, 5)
    q, k, v = x @ head.query.weight.T, x @ head.key.weight.T, x @ head.value.weight.T
    expected = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(5), dim=-1) @ v
    torch.testing.assert_close(head(x)[0], expected, atol=ATOL, rtol=1e-5)


@pytest.mark.parametrize("d", [5, 16, 64])
def test_scaling_q_first_equals_scaling_the_scores(d):
    # the library scales q by d**-0.5 before q @ k^T (T x d work, not T x T); same result within 1e-6
    gen = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(2, 3, 9, d, generator=gen) for _ in range(3))
    mask = torch.ones(9, 9, dtype=torch.bool).tril()
    scores = (q @ k.transpose(-2, -1) / math.sqrt(d)).masked_fill(~mask, float("-inf"))
    weights_ref = torch.softmax(scores, dim=-1)
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(weights, weights_ref, atol=1e-6, rtol=0)
    torch.testing.assert_close(out, weights_ref @ v, atol=1e-6, rtol=0)
