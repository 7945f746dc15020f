"""Unit tests of course_utils.flash against torch: softmax and logsumexp (float32, atol 1e-6),
F.scaled_dot_product_attention (float32, atol 1e-5; the errors seen are about 3e-7), autograd
through explicit attention (float64, atol 1e-9), and the memory claim (checks.AllocationLog)."""

import math

import pytest
import torch
import torch.nn.functional as F

from course_utils.checks import AllocationLog
from course_utils.flash import (
    TiledAttention,
    causal_tiles,
    decoder_kv_cache_bytes,
    merge_softmax_states,
    naive_attention,
    online_softmax,
    softmax_state,
    tiled_attention,
)
from course_utils.gpt import GPTConfig
from course_utils.llama import LlamaConfig

NEG = float("-inf")


def _sdpa_mask(B, T_q, T_k, causal, key_padding_mask):
    mask = torch.ones(B, 1, T_q, T_k, dtype=torch.bool)
    if causal:
        mask = mask & torch.ones(T_q, T_k, dtype=torch.bool).tril()
    if key_padding_mask is not None:
        mask = mask & key_padding_mask[:, None, None, :]
    return mask


def _scaled_scores(q, k, mask):
    return ((q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])).masked_fill(~mask, NEG)


@pytest.mark.parametrize("width,block", [(37, 8), (8, 8), (1, 4), (50, 1), (130, 64)])
def test_online_softmax_matches_torch_softmax(width, block):
    torch.manual_seed(width)
    x = torch.randn(3, 4, width) * 5
    x[0, 0, -1] = NEG if width > 1 else 0.0  # (torch's softmax of an all -inf row is NaN)
    x[1] += 1e4  # no overflow
    torch.testing.assert_close(online_softmax(x, block), torch.softmax(x, -1), atol=1e-6, rtol=0)


def test_online_softmax_of_an_all_minus_inf_row_is_zeros_and_its_max_may_grow_late():
    x = torch.tensor([[NEG] * 5, [-3.0, -2.0, -1.0, 0.0, 50.0]])
    y = online_softmax(x, 2)
    assert torch.equal(y[0], torch.zeros(5))
    torch.testing.assert_close(y[1], torch.softmax(x[1], -1), atol=1e-6, rtol=0)


def test_merge_softmax_states_is_the_state_of_the_union_in_any_order():
    torch.manual_seed(0)
    s, v = torch.randn(4, 30) * 3, torch.randn(4, 30, 5)
    s[0, :12] = NEG  # an empty part
    cuts = [0, 5, 12, 20, 30]
    parts = [softmax_state(s[:, a:b], v[:, a:b]) for a, b in zip(cuts, cuts[1:])]
    whole = softmax_state(s, v)
    for order in ([0, 1, 2, 3], [3, 1, 0, 2], [2, 0, 3, 1]):
        state = parts[order[0]]
        for i in order[1:]:
            state = merge_softmax_states(state, parts[i])
        for got, want in zip(state, whole):
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    empty = (torch.full((4,), NEG), torch.zeros(4), torch.zeros(4, 5))
    m, ell, o = merge_softmax_states(empty, empty)
    assert torch.equal(m, empty[0]) and torch.equal(ell, empty[1]) and torch.equal(o, empty[2])
    for got, want in zip(merge_softmax_states(empty, whole), whole):
        torch.testing.assert_close(got, want)


CASES = [  # B, H, T_q, T_k, d, block_q, block_k, causal, padded
    (2, 3, 17, 17, 8, 4, 5, False, False),
    (2, 3, 17, 17, 8, 4, 5, True, True),
    (1, 2, 130, 70, 16, 32, 16, True, False),
    (1, 2, 70, 130, 16, 16, 64, True, True),
    (2, 1, 64, 64, 16, 16, 16, False, True),
    (1, 1, 1, 9, 4, 64, 64, False, False),
]


@pytest.mark.parametrize("case", CASES)
def test_tiled_and_naive_attention_match_sdpa_and_logsumexp(case):
    B, H, T_q, T_k, d, bq, bk, causal, padded = case
    torch.manual_seed(T_q * T_k)
    q, k, v = torch.randn(B, H, T_q, d), torch.randn(B, H, T_k, d), torch.randn(B, H, T_k, d + 1)
    kpm = None
    if padded:
        kpm = torch.rand(B, T_k) > 0.3
        kpm[0] = False  # every key of sequence 0 masked: empty rows
    mask = _sdpa_mask(B, T_q, T_k, causal, kpm)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    expected_lse = torch.logsumexp(_scaled_scores(q, k, mask), dim=-1)
    for fn in (tiled_attention, naive_attention):
        out, lse = fn(q, k, v, bq, bk, causal, kpm)
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=0)
        torch.testing.assert_close(lse, expected_lse, atol=1e-5, rtol=0)  # -inf where SDPA's row is empty
        assert not out.isnan().any()


def test_tiled_attention_matches_sdpa_is_causal_and_the_cpu_flash_kernel_lse():
    torch.manual_seed(1)
    q, k, v = torch.randn(3, 2, 4, 100, 32).unbind(0)
    out, lse = tiled_attention(q, k, v, 32, 16, causal=True)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True), atol=1e-5, rtol=0)
    flash = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)
    if flash is not None:
        ref_out, ref_lse = flash(q, k, v, 0.0, True)[:2]
        torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=0)
        torch.testing.assert_close(lse, ref_lse, atol=1e-5, rtol=0)


def test_tiled_attention_accumulates_half_precision_in_float32():
    torch.manual_seed(2)
    q, k, v = (torch.randn(1, 1, 256, 64).bfloat16() for _ in range(3))
    out, lse = tiled_attention(q, k, v, 32, 32)
    assert out.dtype == torch.bfloat16 and lse.dtype == torch.float32
    expected = F.scaled_dot_product_attention(q.float(), k.float(), v.float())
    assert (out.float() - expected).abs().max() < 4e-3  # the output's own rounding; bf16 sums give ~1e-2


@pytest.mark.parametrize("case", CASES)
def test_tiled_attention_backward_matches_autograd_through_naive_attention(case):
    B, H, T_q, T_k, d, bq, bk, causal, padded = case
    torch.manual_seed(T_q + T_k)
    q, k, v = (torch.randn(B, H, T, d, dtype=torch.float64) for T in (T_q, T_k, T_k))
    kpm = None
    if padded:
        kpm = torch.rand(B, T_k) > 0.3
        kpm[0] = False
    w_out, w_lse = torch.randn(B, H, T_q, d, dtype=torch.float64), torch.randn(B, H, T_q, dtype=torch.float64)

    def grads(fn):
        leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
        out, lse = fn(*leaves, bq, bk, causal, kpm)
        loss = (out * w_out).sum() + torch.where(torch.isfinite(lse), lse * w_lse, torch.zeros_like(lse)).sum()
        return torch.autograd.grad(loss, leaves)

    for got, want in zip(grads(TiledAttention.apply), grads(naive_attention)):
        assert not want.isnan().any()
        torch.testing.assert_close(got, want, atol=1e-9, rtol=1e-7)


def test_tiled_attention_never_builds_a_score_row_and_skips_future_blocks():
    torch.manual_seed(3)
    q, k, v = torch.randn(3, 1, 1, 256, 8).unbind(0)
    kpm = torch.ones(1, 256, dtype=torch.bool)
    with AllocationLog() as tiled:
        tiled_attention(q, k, v, 16, 16, True, kpm)
    with AllocationLog() as full:
        tiled_attention(q, k, v, 16, 16, False, kpm)
    with AllocationLog() as naive:
        naive_attention(q, k, v, causal=True)
    assert tiled.largest <= 256 * 8 < 16 * 256  # the output; no (16, 256) row of scores
    assert naive.largest >= 256 * 256
    assert tiled.total_bytes < 0.75 * full.total_bytes  # 136 of 256 tiles computed
    assert tiled.ops["bmm"] == 2 * sum(kind != "skipped" for *_, kind in causal_tiles(256, 256, 16, 16))


def test_causal_tiles_kinds():
    kinds = {(i, j): kind for i, j, kind in causal_tiles(4, 4, 2, 2)}
    assert kinds == {(0, 0): "diagonal", (0, 1): "skipped", (1, 0): "full", (1, 1): "diagonal"}
    assert [kind for *_, kind in causal_tiles(3, 6, 3, 3)] == ["diagonal", "skipped"]


def test_kv_cache_bytes_for_gpt_and_llama_configs():
    gpt = GPTConfig(vocab_size=65, n_layer=4, n_head=4, d_model=128)
    assert decoder_kv_cache_bytes(gpt, T=100, batch=2, dtype=torch.float32) == 2 * 4 * 2 * 4 * 100 * 32 * 4
    smol = LlamaConfig(vocab_size=49152, d_model=576, n_layers=30, n_heads=9, n_kv_heads=3, d_ff=1536)
    assert decoder_kv_cache_bytes(smol, 2048, 1, torch.bfloat16) == 2 * 30 * 3 * 2048 * 64 * 2  # 45 MiB
    mha = LlamaConfig(vocab_size=49152, d_model=576, n_layers=30, n_heads=9, n_kv_heads=9, d_ff=1536)
    assert decoder_kv_cache_bytes(mha, 2048, 1, torch.bfloat16) == 3 * decoder_kv_cache_bytes(smol, 2048, 1, torch.bfloat16)
    assert decoder_kv_cache_bytes({"n_layers": 2, "n_heads": 4, "n_kv_heads": 1, "d_model": 64}, 10, 1, torch.float16) == 2 * 2 * 1 * 10 * 16 * 2


def test_allocation_log_reports_and_absorbs_as_plain_data():
    x = torch.randn(4, 40)
    with AllocationLog() as log:
        online_softmax(x, 16)
    assert [kind for kind, _ in log.reductions[:2]] == ["max", "sum"]
    assert max(width for _, width in log.reductions) == 16
    copy = AllocationLog()
    copy.absorb(log.report())
    assert (copy.largest, copy.peak_bytes, copy.reductions, copy.ops) == (log.largest, log.peak_bytes, log.reductions, log.ops)
    copy.absorb({"largest": "many"})  # malformed: ignored
    copy.absorb(None)
    assert copy.largest == log.largest


def test_allocation_log_sees_saved_tensors_live_bytes_and_product_dtypes():
    # 13's second blind red team: P tiles kept for the backward, q, k, v, out, lse as ctx attributes and
    # bfloat16 tile products in the backward all escaped; the log now records what each of them changes
    q, k, v = (torch.randn(1, 1, 64, 4, requires_grad=True) for _ in range(3))
    with AllocationLog() as log:
        out, lse = TiledAttention.apply(q, k, v, 16, 16, False, None)
    assert sorted(log.saved) == sorted([((1, 1, 64, 4), "torch.float32")] * 4 + [((1, 1, 64), "torch.float32")])
    assert log.live_bytes == (out.numel() + lse.numel()) * 4  # only the results stay alive
    assert log.product_dtypes == {"torch.float32": 2 * 2 * 16}  # 16 tiles, 2 products of 2 operands each

    class KeepsTiles(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.kept = a[:, None] * a[None, :]  # an attribute: not packed, but alive
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    a = torch.randn(100, requires_grad=True)
    with AllocationLog() as kept:
        b = KeepsTiles.apply(a)
    assert kept.saved == [] and kept.live_bytes >= 100 * 100 * 4
    del b
    assert kept.live_bytes < 100 * 100 * 4

    x = torch.randn(8, 8, dtype=torch.bfloat16)
    with AllocationLog() as products:
        x @ x
        x.float() @ x.float()
    assert products.product_dtypes == {"torch.bfloat16": 2, "torch.float32": 2}

    copy = AllocationLog()
    copy.absorb(log.report())
    assert (copy.saved, copy.live_bytes, copy.product_dtypes) == (log.saved, log.live_bytes, log.product_dtypes)
