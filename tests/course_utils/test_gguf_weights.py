"""Unit tests of course_utils.gguf_weights: Q4_1/Q8_0 dequantisation and every tensor type read from a
file, against the gguf package (PyPI, where installed); tests/course_utils/test_llama.py loads whole models from
GGUF files (a tiny one written here, and SmolLM2's)."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from course_utils.gguf_weights import permute_qk, unpermute_qk

HAS_GGUF = importlib.util.find_spec("gguf") is not None
needs_gguf = pytest.mark.skipif(not HAS_GGUF, reason="gguf (PyPI) is not installed: pip install -e .[pretrained]")


def test_permute_unpermute_inverse_and_per_head():
    torch.manual_seed(0)
    n_heads, hd = 3, 8
    w = torch.randn(n_heads * hd, 10)
    p = permute_qk(w, n_heads)
    assert torch.equal(unpermute_qk(p, n_heads), w)
    assert torch.equal(permute_qk(unpermute_qk(w, n_heads), n_heads), w)
    assert not torch.equal(p, w)
    for h in range(n_heads):  # rows stay inside their head
        assert torch.equal(p[h * hd:(h + 1) * hd], permute_qk(w[h * hd:(h + 1) * hd], 1))
    # llama.cpp convert_hf_to_gguf.py's LlamaModel.permute, verbatim (NumPy-style swapaxes)
    ref = w.reshape(n_heads, 2, w.shape[0] // n_heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
    assert torch.equal(p, ref)
    b = torch.randn(n_heads * hd)  # 1-D (a bias) works too
    assert torch.equal(unpermute_qk(permute_qk(b, n_heads), n_heads), b)


@needs_gguf
@pytest.mark.parametrize("kind", ["Q4_1", "Q8_0"])
def test_dequantize_equals_gguf(kind):
    import numpy as np
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize, quantize

    from course_utils.gguf_weights import dequantize_q4_1, dequantize_q8_0

    qtype = GGMLQuantizationType[kind]
    w = np.random.default_rng(0).standard_normal((6, 64)).astype(np.float32)
    packed = quantize(w, qtype)  # (6, bytes)
    ref = dequantize(packed, qtype)  # (6, 64)
    ours_fn = dequantize_q4_1 if kind == "Q4_1" else dequantize_q8_0
    ours = ours_fn(torch.from_numpy(packed.reshape(-1, packed.shape[-1] // 2)))
    assert torch.equal(ours.reshape(6, 64), torch.from_numpy(ref))
    assert np.abs(ref - w).max() < (0.3 if kind == "Q4_1" else 0.03)  # what quantisation costs


@needs_gguf
@pytest.mark.parametrize("kind", ["F32", "F16", "BF16", "Q4_0", "Q4_1", "Q8_0"])
def test_dequantize_each_type_equals_gguf(tmp_path, kind):
    """Every tensor type, read from a file, equals ``gguf.quants.dequantize`` of the gguf reader's data,
    bit for bit (Q4_0: by the gguf package itself, our fallback)."""
    import gguf
    import numpy as np
    from gguf.quants import dequantize, quantize

    from course_utils.gguf_file import GGUFFile
    from course_utils.gguf_weights import _dequantize

    qtype = gguf.GGMLQuantizationType[kind]
    w = np.random.default_rng(1).standard_normal((3, 512)).astype(np.float32)
    path = tmp_path / f"{kind}.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tensor("w", quantize(w, qtype) if kind != "F32" else w, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    ref = gguf.GGUFReader(str(path)).tensors[0]
    expected = torch.from_numpy(np.array(dequantize(ref.data, ref.tensor_type), dtype=np.float32))
    ours = _dequantize(GGUFFile(path), "w")
    assert ours.dtype == torch.float32 and ours.shape == (3, 512)
    assert torch.equal(ours, expected.reshape(3, 512))
