"""Unit tests of course_utils.multihead against torch.nn.MultiheadAttention / SDPA.

Tolerance: float32, atol = rtol = 1e-5 (the two implementations order their
floating-point operations differently; observed differences are ~1e-7).
"""

import pytest
import torch

from course_utils.masking import causal_mask, key_mask, padding_mask
from course_utils.multihead import MultiHeadAttention, mha_parameter_count, from_torch, merge_heads, split_heads

TOL = dict(atol=1e-5, rtol=1e-5)


def test_split_heads_matches_slicing_and_merge_inverts():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 12)
    s = split_heads(x, 3)
    assert s.shape == (2, 3, 5, 4)
    for i in range(3):
        assert torch.equal(s[:, i], x[..., 4 * i : 4 * (i + 1)])
    assert torch.equal(merge_heads(s), x)
    with pytest.raises(ValueError):
        split_heads(x, 5)


@pytest.mark.parametrize("bias", [True, False])
def test_parameter_count_matches_torch(bias):
    for d, h in [(512, 8), (64, 1), (64, 4)]:
        ours = MultiHeadAttention(d, h, bias=bias)
        ref = torch.nn.MultiheadAttention(d, h, bias=bias)
        n_ours = sum(p.numel() for p in ours.parameters())
        assert n_ours == sum(p.numel() for p in ref.parameters()) == mha_parameter_count(d, h, bias)
    assert mha_parameter_count(512, 8) == 1_050_624


@pytest.mark.parametrize("bias", [True, False])
def test_equal_to_torch_multiheadattention_self_and_cross(bias):
    torch.manual_seed(0)
    ref = torch.nn.MultiheadAttention(16, 4, bias=bias, batch_first=True).eval()
    ours = from_torch(ref).eval()
    x, mem = torch.randn(3, 6, 16), torch.randn(3, 9, 16)
    out, w = ours(x, x, x)
    out_ref, w_ref = ref(x, x, x, average_attn_weights=False)
    torch.testing.assert_close(out, out_ref, **TOL)
    torch.testing.assert_close(w, w_ref, **TOL)
    out, w = ours(x, mem, mem)
    out_ref, w_ref = ref(x, mem, mem, average_attn_weights=False)
    assert w.shape == (3, 4, 6, 9)
    torch.testing.assert_close(out, out_ref, **TOL)
    torch.testing.assert_close(w, w_ref, **TOL)


def test_masks_follow_course_convention_against_torch():
    torch.manual_seed(0)
    ref = torch.nn.MultiheadAttention(16, 2, batch_first=True).eval()
    ours = from_torch(ref).eval()
    x = torch.randn(2, 5, 16)
    pad = padding_mask([5, 3], 5)
    causal = causal_mask(5)
    out_ref, w_ref = ref(x, x, x, key_padding_mask=~pad, attn_mask=~causal, average_attn_weights=False)
    out, w = ours(x, x, x, mask=key_mask(pad) & causal)  # 3-d mask
    torch.testing.assert_close(out, out_ref, **TOL)
    torch.testing.assert_close(w, w_ref, **TOL)
    out4, _ = ours(x, x, x, mask=key_mask(pad, n_heads=True), is_causal=True)  # 4-d mask + is_causal
    torch.testing.assert_close(out4, out_ref, **TOL)
    out2, _ = ours(x, x, x, mask=causal)  # 2-d mask
    torch.testing.assert_close(out2, ref(x, x, x, is_causal=True, attn_mask=~causal)[0], **TOL)


def test_fused_path_equals_explicit_path():
    torch.manual_seed(0)
    ours = MultiHeadAttention(32, 4).eval()
    fused = MultiHeadAttention(32, 4, fused=True).eval()
    fused.load_state_dict(ours.state_dict())
    x = torch.randn(2, 7, 32)
    mask = key_mask(padding_mask([7, 4], 7)) & causal_mask(7)
    out, w = ours(x, x, x, mask)
    out_f, w_f = fused(x, x, x, mask)
    assert w_f is None and w.shape == (2, 4, 7, 7)
    torch.testing.assert_close(out_f, out, **TOL)


def test_fully_masked_rows_give_zero_not_nan():
    ours = MultiHeadAttention(8, 2, bias=False).eval()
    x = torch.randn(1, 3, 8)
    mask = torch.tensor([[True, False, False], [False, False, False], [True, True, True]])
    for module in (ours, MultiHeadAttention(8, 2, bias=False, fused=True).eval()):
        module.load_state_dict(ours.state_dict())
        out, _ = module(x, x, x, mask)
        assert torch.isfinite(out).all()
        assert torch.allclose(out[0, 1], torch.zeros(8), atol=1e-7)


def test_dropout_only_in_training_and_load_checks_shapes():
    torch.manual_seed(0)
    ref = torch.nn.MultiheadAttention(8, 2, dropout=0.5, batch_first=True)
    ours = from_torch(ref)
    assert ours.dropout == 0.5
    x = torch.randn(1, 4, 8)
    ours.eval()
    a, _ = ours(x, x, x)
    b, _ = ours(x, x, x)
    assert torch.equal(a, b)
    ours.train()
    c, _ = ours(x, x, x)
    assert not torch.allclose(a, c)
    with pytest.raises(ValueError):
        MultiHeadAttention(8, 4).load_from_torch(ref)
    with pytest.raises(ValueError):
        MultiHeadAttention(10, 3)


def test_gradients_match_torch():
    torch.manual_seed(0)
    ref = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    ours = from_torch(ref)
    x = torch.randn(2, 4, 8)
    ref(x, x, x)[0].square().sum().backward()
    ours(x, x, x)[0].square().sum().backward()
    g_q, g_k, g_v = ref.in_proj_weight.grad.chunk(3)
    torch.testing.assert_close(ours.q_proj.weight.grad, g_q, **TOL)
    torch.testing.assert_close(ours.v_proj.weight.grad, g_v, **TOL)
    torch.testing.assert_close(ours.out_proj.weight.grad, ref.out_proj.weight.grad, **TOL)


def test_is_causal_aligns_bottom_right_like_a_kv_cache():
    """With T_q < T_k the queries are the last positions: the last query sees every key."""
    from course_utils.masking import causal_mask

    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4)
    q, kv = torch.randn(2, 3, 16), torch.randn(2, 7, 16)
    out, weights = mha(q, kv, kv, is_causal=True)
    ref, _ = mha(q, kv, kv, mask=causal_mask(3, 7))
    torch.testing.assert_close(out, ref)
    assert (weights[:, :, -1] > 0).all() and (weights[:, :, 0, 5:] == 0).all()


def test_explicit_path_scales_q_first_same_result():
    # explicit path: (q * d_k**-0.5) @ k^T instead of (q @ k^T) / sqrt(d_k); equal within 1e-6
    torch.manual_seed(6)
    mha = MultiHeadAttention(64, 4).eval()
    x = torch.randn(2, 11, 64)
    mask = causal_mask(11)
    out, weights = mha(x, x, x, mask)
    q, k, v = (split_heads(layer(x), 4) for layer in (mha.q_proj, mha.k_proj, mha.v_proj))
    scores = (q @ k.transpose(-2, -1) / 16**0.5).masked_fill(~mask, float("-inf"))
    weights_ref = torch.softmax(scores, dim=-1)
    torch.testing.assert_close(weights, weights_ref, atol=1e-6, rtol=0)
    torch.testing.assert_close(out, mha.out_proj(merge_heads(weights_ref @ v)), atol=1e-6, rtol=0)
