"""A llama-architecture GGUF file's weights as a state dict: dequantising, names, q/k row order.

:mod:`course_utils.gguf_file` reads the file's bytes; this module says what they mean for a Llama:
Q4_1 and Q8_0 blocks dequantised in torch (:func:`dequantize_q4_1`, :func:`dequantize_q8_0`; other
types through the ``gguf`` package), llama.cpp's tensor names mapped to
:class:`~course_utils.llama.Llama`'s, and llama.cpp's interleaved q/k rows put back in the
rotate-half order (:func:`unpermute_qk`). :func:`load_gguf_state_dict` does all three;
:func:`course_utils.llama.load_llama_gguf` builds the model from it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from course_utils.device import cpu_threads
from course_utils.gguf_file import GGML_BLOCK_SIZES, GGUFFile

__all__ = ["permute_qk", "unpermute_qk", "open_gguf", "llama_hyperparameters", "dequantize_q4_1", "dequantize_q8_0",
           "load_gguf_state_dict"]


def permute_qk(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Hugging Face (rotate-half) row order -> llama.cpp (interleaved) row order, per head.

    ``w``: ``(n_heads * hd, ...)``, the rows of a query or key projection (``n_heads`` = the heads
    of *that* projection: H for q, H_kv for k). Within a head, HF's rotate-half RoPE pairs output
    ``j`` with ``j + hd/2``; llama.cpp's RoPE for Llama pairs ``2j`` with ``2j + 1`` (interleaved,
    as Meta's original code and notebook 06). Its converter ``convert_hf_to_gguf.py`` therefore
    reorders each head's rows ``[a_0 .. a_{hd/2-1}, b_0 .. b_{hd/2-1}]`` into
    ``[a_0, b_0, a_1, b_1, ...]``::

        w.reshape(n_heads, 2, hd // 2, *rest).swapaxes(1, 2).reshape(w.shape)

    (Meta's original checkpoints were interleaved; Hugging Face's conversion script applied the
    inverse reordering to use rotate-half; llama.cpp's converter puts Meta's order back.)
    Rotating the reordered q, k interleaved gives the same vectors, reordered the same way, as
    rotating the original ones rotate-half; a dot product over a head does not depend on the order
    of its dimensions, so attention is unchanged. Only the layout of the weights differs.
    """
    hd = w.size(0) // n_heads
    return w.reshape(n_heads, 2, hd // 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape)


def unpermute_qk(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Undo :func:`permute_qk`: llama.cpp's interleaved q/k row order back to HF's rotate-half order.

    ``w.reshape(n_heads, hd // 2, 2, *rest).swapaxes(1, 2).reshape(w.shape)``: each head's rows
    ``[a_0, b_0, a_1, b_1, ...]`` become ``[a_0, a_1, ..., b_0, b_1, ...]``, so that the
    rotate-half :func:`~course_utils.llama.apply_rope_rotate_half` pairs row ``j`` with row ``j + hd/2`` as llama.cpp paired them.
    """
    hd = w.size(0) // n_heads
    return w.reshape(n_heads, hd // 2, 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape)


def open_gguf(source, prefix: str = "llama.") -> GGUFFile:
    """A :class:`GGUFFile` from a path, a ``GGUFFile``, or a ``gguf.GGUFReader`` (read again from its
    file: the ``gguf`` package's reader is accepted for backward compatibility, not used)."""
    if isinstance(source, GGUFFile):
        return source
    if isinstance(source, (str, Path)):
        return GGUFFile(source, prefix=prefix)
    filename = getattr(getattr(source, "data", None), "filename", None)  # gguf.GGUFReader: a np.memmap
    if filename is None:
        raise TypeError(f"expected a path, a GGUFFile or a gguf.GGUFReader, got {type(source).__name__}")
    return GGUFFile(filename, prefix=prefix)


def _field(file: GGUFFile, key: str):
    if key not in file.metadata:
        raise KeyError(f"the GGUF file has no metadata field {key!r}")
    return file.metadata[key]


def _from_float32(value: float) -> float:
    """The shortest decimal that rounds to the same float32: GGUF stores 1e-5 as 9.99999974e-06."""
    return float(str(np.float32(value)))


def llama_hyperparameters(source) -> dict[str, Any]:
    """The hyperparameters a llama-architecture GGUF file's metadata states, as
    :class:`~course_utils.llama.LlamaConfig`'s keyword arguments (``course_utils.llama.gguf_config``
    builds the config); ``source``: a path, a :class:`GGUFFile` or a ``gguf.GGUFReader``."""
    file = open_gguf(source)
    arch = _field(file, "general.architecture")
    if arch != "llama":
        raise ValueError(f"expected a llama-architecture GGUF file, got {arch!r}")
    meta = file.metadata
    vocab = meta.get("llama.vocab_size")
    if vocab is None:  # the token embedding is listed (d_model, vocab) in GGUF order
        vocab = file.tensors["token_embd.weight"].shape[1]
    return dict(
        vocab_size=int(vocab),
        d_model=int(_field(file, "llama.embedding_length")),
        n_layers=int(_field(file, "llama.block_count")),
        n_heads=int(_field(file, "llama.attention.head_count")),
        n_kv_heads=int(_field(file, "llama.attention.head_count_kv")),
        d_ff=int(_field(file, "llama.feed_forward_length")),
        norm_eps=_from_float32(_field(file, "llama.attention.layer_norm_rms_epsilon")),
        rope_base=_from_float32(meta.get("llama.rope.freq_base", 10000.0)),
        max_seq_len=int(_field(file, "llama.context_length")),
        tie_embeddings="output.weight" not in file.tensors,
    )


# llama.cpp tensor names -> Llama's (``{i}`` the block)
_GGUF_NAMES = {
    "token_embd.weight": "embed.weight",
    "output_norm.weight": "norm.weight",
    "output.weight": "lm_head.weight",
    "blk.{i}.attn_norm.weight": "blocks.{i}.attn_norm.weight",
    "blk.{i}.attn_q.weight": "blocks.{i}.attn.q_proj.weight",
    "blk.{i}.attn_k.weight": "blocks.{i}.attn.k_proj.weight",
    "blk.{i}.attn_v.weight": "blocks.{i}.attn.v_proj.weight",
    "blk.{i}.attn_output.weight": "blocks.{i}.attn.o_proj.weight",
    "blk.{i}.ffn_norm.weight": "blocks.{i}.ffn_norm.weight",
    "blk.{i}.ffn_gate.weight": "blocks.{i}.ffn.gate_proj.weight",
    "blk.{i}.ffn_up.weight": "blocks.{i}.ffn.up_proj.weight",
    "blk.{i}.ffn_down.weight": "blocks.{i}.ffn.down_proj.weight",
}


def _our_name(gguf_name: str) -> str:
    if gguf_name.startswith("blk."):
        _, i, rest = gguf_name.split(".", 2)
        template = _GGUF_NAMES.get(f"blk.{{i}}.{rest}")
        if template is not None:
            return template.format(i=int(i))
    elif gguf_name in _GGUF_NAMES:
        return _GGUF_NAMES[gguf_name]
    raise KeyError(f"no Llama parameter for the GGUF tensor {gguf_name!r}")


def dequantize_q4_1(blocks: torch.Tensor) -> torch.Tensor:
    """GGML's Q4_1: blocks of 32 weights in 20 bytes, ``(n_blocks, 20) uint8 -> (n_blocks, 32) float32``.

    Each block: a scale ``d`` and a minimum ``m`` (float16, 2 bytes each), then 16 bytes holding 32
    4-bit codes ``q`` in 0..15 (the low nibbles are weights 0..15, the high nibbles 16..31);
    weight = ``d * q + m``.
    """
    dm = blocks[:, 0:4].contiguous().view(torch.float16).float()  # (n, 2): d, m
    qs = blocks[:, 4:20]  # (n, 16) bytes, two codes each
    q = torch.empty(blocks.size(0), 32, device=blocks.device)  # (n, 32) float32
    q[:, :16] = qs & 0x0F
    q[:, 16:] = qs >> 4
    return q.mul_(dm[:, :1]).add_(dm[:, 1:])  # d * q + m, in place: one float32 buffer per tensor


def dequantize_q8_0(blocks: torch.Tensor) -> torch.Tensor:
    """GGML's Q8_0: blocks of 32 weights in 34 bytes, ``(n_blocks, 34) uint8 -> (n_blocks, 32) float32``.

    Each block: a float16 scale ``d``, then 32 signed bytes ``q``; weight = ``d * q``.
    """
    d = blocks[:, 0:2].contiguous().view(torch.float16).float()  # (n, 1)
    q = blocks[:, 2:34].contiguous().view(torch.int8).float()  # (n, 32)
    return q.mul_(d)


def _dequantize(file: GGUFFile, name: str) -> torch.Tensor:
    """Tensor ``name`` of a GGUF file as a new float32 tensor ``(out, in)`` (GGUF lists ``(in, out)``)."""
    info = file.tensors[name]
    data = file.tensor(name)  # a view of the file: plain dtype, or uint8 (rows, bytes per row)
    if info.type_name in ("F32", "F16", "BF16"):
        return data.to(torch.float32, copy=True)
    if info.type_name in ("Q4_1", "Q8_0"):  # the two formats of SmolLM2's file, vectorised in torch
        blocks = data.reshape(-1, GGML_BLOCK_SIZES[info.ggml_type][1])  # (n blocks, bytes per block)
        out = dequantize_q4_1(blocks) if info.type_name == "Q4_1" else dequantize_q8_0(blocks)
        return out.reshape(info.torch_shape)
    try:  # other quantisations: the gguf package's NumPy reference, where it is installed
        from gguf import GGMLQuantizationType
        from gguf.quants import dequantize
    except ImportError as err:  # pragma: no cover - depends on the installation
        raise NotImplementedError(f"{name}: {info.type_name} tensors need the `gguf` package "
                                  "(pip install -e '.[pretrained]')") from err
    out = dequantize(data.numpy(), GGMLQuantizationType(info.ggml_type))
    return torch.from_numpy(np.array(out, dtype=np.float32)).reshape(info.torch_shape)


def load_gguf_state_dict(path, *, dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
    """Read a llama-architecture GGUF file (a path, a :class:`~course_utils.gguf_file.GGUFFile` or a
    ``gguf.GGUFReader``) into a state dict of :class:`~course_utils.llama.Llama`'s names.

    Each tensor is dequantised to float32 (Q4_1 and Q8_0 by :func:`dequantize_q4_1` /
    :func:`dequantize_q8_0`, equal to ``gguf.quants.dequantize``; F32/F16/BF16 converted; other
    types by the latter). GGUF lists shapes as ``(in, out)``; the tensors come out ``(out, in)``
    like ``nn.Linear.weight``, then cast to ``dtype``. The q/k projections go through
    :func:`unpermute_qk`. With tied embeddings (no ``output.weight``) ``lm_head.weight`` is the
    same tensor as ``embed.weight``.
    """
    file = open_gguf(path)
    config = llama_hyperparameters(file)
    if "rope_freqs.weight" in file.tensors:
        raise NotImplementedError("RoPE frequency scaling (rope_freqs) is not supported")
    state: dict[str, torch.Tensor] = {}
    # elementwise work on a few MB at a time: one thread is as fast on an idle machine, and avoids
    # OpenMP's waits on a busy one (measured 10-40x slower with 2 threads on 2 loaded cores)
    with cpu_threads(1):
        for name in file.tensors:
            w = _dequantize(file, name)  # float32 (out, in)
            if ".attn_q." in name:
                w = unpermute_qk(w, config["n_heads"])
            elif ".attn_k." in name:
                w = unpermute_qk(w, config["n_kv_heads"])
            state[_our_name(name)] = w.to(dtype).contiguous()
            del w
    if config["tie_embeddings"]:
        state["lm_head.weight"] = state["embed.weight"]
    return state
