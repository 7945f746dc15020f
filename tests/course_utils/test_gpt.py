"""Unit tests of course_utils.gpt (CPU, small models, a few seconds)."""

from __future__ import annotations

import math

import pytest
import torch

from course_utils.gpt import (
    GPT, GPTClassifier, GPTConfig, KVCache, bigram_log_probs, bigram_loss, continuation_log_likelihood,
    encode_padded, generate, gpt2_init_, last_token_pool, lm_batch, lm_train_step, train_lm,
    warmup_cosine,
)
from course_utils.corpus import CharTokenizer

INF = float("inf")


def small_model(seed: int = 0, **overrides) -> GPT:
    torch.manual_seed(seed)
    cfg = dict(vocab_size=31, block_size=24, n_layer=2, n_head=4, d_model=32)
    cfg.update(overrides)
    return GPT(GPTConfig(**cfg)).eval()


# ---------------------------------------------------------------- model structure
def test_weight_tying_shares_one_parameter():
    m = small_model()
    assert m.lm_head.weight is m.wte.weight
    assert m.lm_head.weight.data_ptr() == m.wte.weight.data_ptr()
    n_unique = sum(p.numel() for p in m.parameters())
    assert m.num_parameters() == n_unique
    # a gradient step on the head moves the embedding too
    x = torch.randint(0, 31, (2, 5))
    m(x).sum().backward()
    assert m.wte.weight.grad is not None and m.lm_head.weight.grad is m.wte.weight.grad


def test_gpt2_init_std():
    torch.manual_seed(0)
    m = GPT(GPTConfig(vocab_size=64, block_size=32, n_layer=6, n_head=4, d_model=256))
    # tolerance: std estimated from >= 65k samples, relative error ~0.3%; 5% is generous
    assert m.wte.weight.std().item() == pytest.approx(0.02, rel=0.05)
    for block in m.blocks:
        assert block.attn.qkv.weight.std().item() == pytest.approx(0.02, rel=0.05)
        assert block.ffn.fc1.weight.std().item() == pytest.approx(0.02, rel=0.05)
        for proj in (block.attn.proj, block.ffn.fc2):
            assert proj.weight.std().item() == pytest.approx(0.02 / math.sqrt(12), rel=0.05)
            assert proj.bias.abs().max().item() == 0.0
        assert torch.equal(block.ln1.weight, torch.ones(256))
    # the helper is idempotent on structure
    gpt2_init_(m, 6)
    assert m.lm_head.weight is m.wte.weight


def test_causality_output_at_t_independent_of_later_inputs():
    m = small_model(seed=1)
    x = torch.randint(0, 31, (1, 12))
    base = m(x)
    for t in range(11):
        y = x.clone()
        y[0, t + 1:] = (y[0, t + 1:] + 7) % 31  # change every input after t
        out = m(y)
        assert torch.allclose(out[0, : t + 1], base[0, : t + 1], atol=1e-6), f"position {t} saw the future"
        assert not torch.allclose(out[0, t + 1:], base[0, t + 1:], atol=1e-6)


def test_causality_by_gradient():
    m = small_model(seed=2)
    emb = torch.randn(1, 8, 32, requires_grad=True)
    h = emb
    for block in m.blocks:
        h = block(h)
    for t in range(7):
        (g,) = torch.autograd.grad(h[0, t].sum(), emb, retain_graph=True)
        assert g[0, t + 1:].abs().max().item() == 0.0


def test_too_long_sequence_raises():
    m = small_model()
    with pytest.raises(ValueError):
        m(torch.zeros(1, 25, dtype=torch.long))


# ---------------------------------------------------------------- KV cache
def test_cache_logits_match_full_pass():
    m = small_model(seed=3)
    x = torch.randint(0, 31, (3, 20))
    full = m(x)
    cache = m.new_cache()
    parts = [m(x[:, :7], cache), m(x[:, 7:10], cache)] + [m(x[:, t:t + 1], cache) for t in range(10, 20)]
    assert len(cache) == 20
    torch.testing.assert_close(torch.cat(parts, 1), full, atol=1e-5, rtol=1e-5)


def test_kvcache_append():
    c = KVCache(2)
    assert len(c) == 0
    k, v = c.append(0, torch.ones(1, 2, 3, 4), torch.zeros(1, 2, 3, 4))
    k, v = c.append(0, 2 * torch.ones(1, 2, 1, 4), torch.ones(1, 2, 1, 4))
    assert k.shape == (1, 2, 4, 4) and len(c) == 4
    assert torch.equal(k[:, :, -1], 2 * torch.ones(1, 2, 4))


def test_kvcache_writes_into_preallocated_buffers():
    m = small_model(seed=7)
    x = torch.randint(0, 31, (2, 12))
    cache = m.new_cache()  # room for block_size = 24 positions
    with torch.no_grad():
        m(x[:, :5], cache)
        first = [k.data_ptr() for k in cache.keys]
        for t in range(5, 12):
            m(x[:, t:t + 1], cache)
    assert len(cache) == 12
    assert [k.data_ptr() for k in cache.keys] == first  # the same storage: written in place, never concatenated
    assert all(k.shape == (2, 4, 12, 8) and v.shape == (2, 4, 12, 8) for k, v in zip(cache.keys, cache.values))
    assert all(buf.size(-2) == 24 for pair in cache._buffers for buf in pair)


def test_kvcache_prefix_assignment_drops_positions():
    # notebook 10 times one step again by assigning a shorter prefix of the cached keys/values
    m = small_model(seed=8)
    x = torch.randint(0, 31, (1, 10))
    with torch.no_grad():
        full = m(x)
        cache = m.new_cache()
        m(x[:, :9], cache)
        m(torch.tensor([[5]]), cache)  # a wrong token, then dropped
        for layer in range(2):
            cache.keys[layer], cache.values[layer] = cache.keys[layer][:, :, :-1], cache.values[layer][:, :, :-1]
        assert len(cache) == 9
        last = m(x[:, 9:], cache)
        torch.testing.assert_close(last, full[:, 9:], atol=1e-5, rtol=1e-5)
        # a tensor from elsewhere is copied into the buffer at the next append
        cache.keys[0], cache.values[0] = cache.keys[0][:, :, :9].clone(), cache.values[0][:, :, :9].clone()
        for layer in range(1, 2):
            cache.keys[layer], cache.values[layer] = cache.keys[layer][:, :, :-1], cache.values[layer][:, :, :-1]
        torch.testing.assert_close(m(x[:, 9:], cache), full[:, 9:], atol=1e-5, rtol=1e-5)


def test_kvcache_grows_without_max_len_and_keeps_values():
    c = KVCache(1)
    keys = torch.randn(1, 2, 11, 3)
    for start, stop in [(0, 2), (2, 3), (3, 7), (7, 11)]:  # outgrows its buffer three times
        k, v = c.append(0, keys[:, :, start:stop], -keys[:, :, start:stop])
    assert torch.equal(k, keys) and torch.equal(v, -keys) and len(c) == 11


def test_kvcache_keeps_the_autograd_graph():
    m = small_model(seed=9)
    x = torch.randint(0, 31, (2, 8))
    m(x)[:, 5:].sum().backward()
    expected = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    cache = m.new_cache()
    m(x[:, :5], cache)
    m(x[:, 5:], cache).sum().backward()  # flows through the cached keys/values into the prefill
    for got, want in zip((p.grad for p in m.parameters()), expected):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)


def test_generate_returns_an_ordinary_tensor():
    m = small_model(seed=10)
    out = generate(m, torch.randint(0, 31, (1, 3)), 4, temperature=0)
    assert not out.is_inference() and m(out).requires_grad


@pytest.mark.parametrize("kwargs", [dict(temperature=0), dict(temperature=1.0, top_k=5),
                                    dict(temperature=0.8, top_p=0.9), dict(temperature=1.3)])
def test_generate_identical_with_and_without_cache(kwargs):
    m = small_model(seed=4)
    prompt = torch.randint(0, 31, (2, 4))
    # 30 new tokens: runs past block_size=24, so the cropping path is exercised as well
    a = generate(m, prompt, 30, use_cache=True, generator=torch.Generator().manual_seed(9), **kwargs)
    b = generate(m, prompt, 30, use_cache=False, generator=torch.Generator().manual_seed(9), **kwargs)
    assert a.shape == (2, 34)
    assert torch.equal(a, b)
    assert torch.equal(a[:, :4], prompt)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_a_cpu_generator_samples_a_gpu_model():  # pragma: no cover - needs a GPU
    """10 seeds a `torch.Generator()` (CPU) and generates with the model on the GPU: the draw happens on
    the generator's device, so the same seed gives the same text on either (an H200 first found this)."""
    m = small_model(seed=4)
    prompt = torch.randint(0, 31, (2, 4))
    on_cpu = generate(m, prompt, 12, temperature=1.0, top_k=5, generator=torch.Generator().manual_seed(9))
    on_gpu = generate(m.cuda(), prompt.cuda(), 12, temperature=1.0, top_k=5, generator=torch.Generator().manual_seed(9))
    assert on_gpu.device.type == "cuda" and torch.equal(on_gpu.cpu(), on_cpu)


def test_greedy_is_argmax():
    m = small_model(seed=5)
    prompt = torch.randint(0, 31, (1, 3))
    out = generate(m, prompt, 1, temperature=0)
    assert out[0, -1].item() == m(prompt)[0, -1].argmax().item()


def test_generate_with_top_p_zero_is_greedy():
    m = small_model(seed=3)
    prompt = torch.randint(0, 31, (2, 4))
    sampled = generate(m, prompt, 6, temperature=1.0, top_p=0.0, generator=torch.Generator().manual_seed(0))
    assert torch.equal(sampled, generate(m, prompt, 6, temperature=0))  # top_p = 0 samples the argmax: greedy


# ---------------------------------------------------------------- data, baseline, training, classification
def test_lm_batch_shift():
    data = torch.arange(1000)
    x, y = lm_batch(data, 16, 8, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (8, 16)
    assert torch.equal(y, x + 1)


def test_bigram_baseline():
    data = torch.tensor([0, 1, 0, 1, 0, 1, 0, 1, 2])
    lp = bigram_log_probs(data, 3, alpha=0.0 + 1e-9)
    assert lp.exp().sum(1).sub(1).abs().max() < 1e-5
    assert lp[0, 1].exp().item() == pytest.approx(1.0, abs=1e-6)
    # uniform counts give log V
    lp_uniform = bigram_log_probs(torch.tensor([0]), 4, alpha=1.0)
    assert bigram_loss(lp_uniform, torch.tensor([0, 1, 2, 3])) == pytest.approx(math.log(4), rel=1e-6)


def test_train_lm_reduces_loss_on_a_periodic_stream():
    torch.manual_seed(0)
    data = torch.arange(40).repeat(50) % 7  # perfectly predictable
    m = GPT(GPTConfig(vocab_size=7, block_size=16, n_layer=1, n_head=2, d_model=32))
    h = train_lm(m, data, data, steps=60, batch_size=8, lr=3e-3, warmup=5, eval_every=30, eval_batches=2)
    assert h["steps"] == [0, 30, 60] and len(h["train_batch"]) == 60
    assert h["val"][-1] < 0.5 * h["val"][0]
    assert h["tokens_per_s"] > 0


def test_train_lm_calls_the_step_it_is_given_with_a_schedule_that_moves():
    """``step_fn`` does every update; the scheduler it receives sets warm-up then cosine decay (what
    the loop set by hand before: lr * warmup_cosine(step))."""
    torch.manual_seed(0)
    data = torch.arange(40).repeat(20) % 7
    m = GPT(GPTConfig(vocab_size=7, block_size=8, n_layer=1, n_head=2, d_model=16))
    calls = []

    def step(model, x, y, optimizer, scheduler, max_norm):
        calls.append((x.shape, max_norm, optimizer.param_groups[0]["lr"]))
        return lm_train_step(model, x, y, optimizer, scheduler, max_norm)

    h = train_lm(m, data, data, steps=6, batch_size=4, lr=1e-2, warmup=2, max_norm=0.5, eval_every=6, eval_batches=1,
                 step_fn=step)
    assert [c[:2] for c in calls] == [((4, 8), 0.5)] * 6
    assert h["lr"] == [c[2] for c in calls] == pytest.approx([1e-2 * warmup_cosine(s, 2, 6) for s in range(6)])
    assert h["lr"][:2] == pytest.approx([5e-3, 1e-2]) and h["lr"][-1] < h["lr"][2]
    assert all(isinstance(v, float) for v in h["train_batch"])


def test_lm_train_step_clips_before_the_step_and_returns_the_loss_before_it():
    torch.manual_seed(0)
    m = GPT(GPTConfig(vocab_size=7, block_size=8, n_layer=1, n_head=2, d_model=16, dropout=0.0)).eval()
    opt = torch.optim.SGD(m.parameters(), lr=1.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 ** s)
    x, y = torch.randint(0, 7, (3, 8)), torch.randint(0, 7, (3, 8))
    before = [p.detach().clone() for p in m.parameters()]
    with torch.no_grad():
        expected = torch.nn.functional.cross_entropy(m(x).reshape(-1, 7), y.reshape(-1)).item()
    loss = lm_train_step(m, x, y, opt, sched, max_norm=1e-3)
    assert isinstance(loss, float) and loss == pytest.approx(expected, rel=1e-5)
    assert m.training and opt.param_groups[0]["lr"] == 0.5
    moved = torch.sqrt(sum(((p.detach() - b) ** 2).sum() for p, b in zip(m.parameters(), before)))
    assert moved.item() == pytest.approx(1e-3, rel=1e-3)  # SGD at lr 1 moves by the clipped gradient: norm max_norm


def test_continuation_log_likelihood_is_the_sum_of_next_token_log_probs():
    m = small_model(vocab_size=7, block_size=12)
    prompt, cont = torch.randint(0, 7, (2, 5)), torch.randint(0, 7, (2, 3))
    got = continuation_log_likelihood(m, prompt, cont)
    ids = torch.cat([prompt, cont], 1)
    logp = torch.log_softmax(m(ids), -1)
    expected = sum(logp[:, 4 + i].gather(-1, cont[:, i:i + 1]).squeeze(-1) for i in range(3))
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_last_token_pool_and_classifier():
    h = torch.arange(24.0).reshape(2, 4, 3)
    assert torch.equal(last_token_pool(h, torch.tensor([4, 2])), torch.stack([h[0, 3], h[1, 1]]))
    tok = CharTokenizer.from_texts(["abc d"])
    ids, lengths = encode_padded(["ab", "abc d"], tok)
    assert ids.shape == (2, 5) and lengths.tolist() == [2, 5]
    m = small_model(vocab_size=len(tok))
    clf = GPTClassifier(m, 2).eval()
    logits = clf(ids, lengths)
    assert logits.shape == (2, 2)
    # padding after the last real token does not change the prediction (causal model)
    alone = clf(ids[:1, :2], lengths[:1])
    torch.testing.assert_close(alone, logits[:1], atol=1e-5, rtol=1e-5)
