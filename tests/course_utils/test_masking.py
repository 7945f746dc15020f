"""Unit tests of course_utils.masking against torch references (float32; atol 1e-6 unless stated)."""

import pytest
import torch
import torch.nn.functional as F

from course_utils.attention import scaled_dot_product_attention
from course_utils.masking import (
    batch_mask,
    causal_mask,
    combine,
    from_torch_key_padding_mask,
    fully_masked_rows,
    key_mask,
    masked_attention,
    masked_softmax,
    padding_mask,
    to_additive,
    to_torch_key_padding_mask,
)


def test_causal_mask_is_lower_triangular():
    m = causal_mask(4)
    assert m.dtype == torch.bool and m.shape == (4, 4)
    assert torch.equal(m, torch.ones(4, 4).tril().bool())


def test_causal_mask_rectangular_matches_kv_cache_alignment():
    # 2 new queries after 3 cached keys: query 0 is position 3, sees keys 0..3.
    m = causal_mask(2, 5)
    assert m.tolist() == [[True, True, True, True, False], [True, True, True, True, True]]


def test_causal_mask_matches_sdpa_is_causal():
    torch.manual_seed(0)
    q, k, v = torch.randn(3, 2, 5, 8).unbind(0)
    ours = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(5))
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(ours, ref, atol=1e-6, rtol=1e-5)


def test_padding_mask():
    m = padding_mask([3, 1, 0], T=4)
    assert m.tolist() == [[True, True, True, False], [True, False, False, False], [False] * 4]
    assert padding_mask(torch.tensor([2, 5])).shape == (2, 5)
    with pytest.raises(ValueError):
        padding_mask([5], T=3)


def test_key_mask_and_combine_shapes():
    pad = padding_mask([2, 3], T=3)
    assert key_mask(pad).shape == (2, 1, 3)
    assert key_mask(pad, n_heads=True).shape == (2, 1, 1, 3)
    both = combine(key_mask(pad), causal_mask(3), None)
    assert both.shape == (2, 3, 3)
    assert both[0].tolist() == [[True, False, False], [True, True, False], [True, True, False]]
    assert combine(None) is None
    with pytest.raises(TypeError):
        combine(torch.ones(2, 2))


def test_batch_mask_equals_explicit_loops():
    lengths = [4, 2, 3]
    m = batch_mask(lengths, T=5)
    for b, n in enumerate(lengths):
        for i in range(5):
            for j in range(5):
                assert bool(m[b, i, j]) == (j <= i and j < n)
    assert torch.equal(batch_mask(lengths, 5, causal=False)[1, 0], torch.tensor([True, True, False, False, False]))


def test_to_additive_matches_seed_004_form():
    add = to_additive(causal_mask(3))
    assert add[0].tolist() == [0.0, float("-inf"), float("-inf")]
    assert add[2].tolist() == [0.0, 0.0, 0.0]


def test_torch_conventions_round_trip_and_match_multiheadattention():
    torch.manual_seed(0)
    lengths = [5, 3]
    pad = padding_mask(lengths, T=5)
    kpm = to_torch_key_padding_mask(pad)
    assert torch.equal(kpm, ~pad)
    attn_mask = from_torch_key_padding_mask(kpm)
    assert attn_mask.shape == (2, 1, 1, 5)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval()
    x = torch.randn(2, 5, 8)
    ref, _ = mha(x, x, x, key_padding_mask=kpm)
    # Same computation through SDPA with the converted mask.
    w_q, w_k, w_v = mha.in_proj_weight.chunk(3)
    b_q, b_k, b_v = mha.in_proj_bias.chunk(3)
    split = lambda t: t.view(2, 5, 2, 4).transpose(1, 2)  # noqa: E731
    q, k, v = split(x @ w_q.T + b_q), split(x @ w_k.T + b_k), split(x @ w_v.T + b_v)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask).transpose(1, 2).reshape(2, 5, 8)
    out = mha.out_proj(out)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


def test_masked_softmax_matches_torch_where_rows_are_not_empty():
    torch.manual_seed(0)
    scores = torch.randn(2, 4, 4)
    mask = batch_mask([4, 2], 4)
    ref = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    torch.testing.assert_close(masked_softmax(scores, mask), ref, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(masked_softmax(scores), torch.softmax(scores, -1))


def test_masked_softmax_fully_masked_row_is_zero_with_finite_gradient():
    scores = torch.randn(3, 3, requires_grad=True)
    mask = torch.tensor([[True, False, False], [False, False, False], [True, True, True]])
    assert fully_masked_rows(mask).tolist() == [False, True, False]
    w = masked_softmax(scores, mask)
    assert not torch.isnan(w).any()
    assert w[1].tolist() == [0.0, 0.0, 0.0]
    torch.testing.assert_close(w.sum(-1), torch.tensor([1.0, 0.0, 1.0]))
    (w * torch.randn(3, 3)).sum().backward()
    assert torch.isfinite(scores.grad).all()
    # The naive way produces NaN: that is the trap notebook 05 shows.
    naive = torch.softmax(scores.detach().masked_fill(~mask, float("-inf")), -1)
    assert torch.isnan(naive[1]).all()


def test_masked_attention_matches_sdpa_including_empty_rows():
    torch.manual_seed(1)
    q, k, v = torch.randn(3, 2, 3, 4, 8).unbind(0)
    mask = torch.rand(2, 3, 4, 4) > 0.5
    mask[0, 0, 1] = False  # one fully masked row
    out, w = masked_attention(q, k, v, mask)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    assert w.shape == (2, 3, 4, 4)
    # Where no row is empty it agrees with notebook 03's reference.
    full = causal_mask(4)
    torch.testing.assert_close(masked_attention(q, k, v, full)[0], scaled_dot_product_attention(q, k, v, full)[0])
