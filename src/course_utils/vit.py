"""A vision transformer (ViT) as notebook 12 builds it, on scikit-learn's bundled 8x8 digits.

Shapes: B batch, C channels, H x W image, p patch size, N = (H/p)(W/p) patches, d = d_model,
T = N + 1 tokens ([CLS] first), h heads.

- :func:`digits_splits` -- the 1,797 digits of ``sklearn.datasets.load_digits`` (no download) as a
  ``datasets.DatasetDict`` with a fixed, stratified, seeded train/test split.
- :func:`patchify` -- ``(B, C, H, W) -> (B, N, C p p)``: patches in row-major order (left to right,
  then top to bottom), each flattened channel first, then rows, then columns (the order of a
  ``Conv2d`` weight ``(d, C, p, p)``).
- :func:`patch_embed` -- the patch embedding as a matrix product on :func:`patchify`'s patches; equal
  to :class:`PatchEmbedding`, the strided convolution (kernel = stride = p).
- :class:`ViT` -- patch embedding, a learned [CLS] token, learned position embeddings, pre-LN
  :class:`course_utils.blocks.EncoderBlock` s, a final LayerNorm and a linear head on [CLS].
- :func:`train_classifier`, :func:`accuracy` -- AdamW with warm-up and cosine decay, label smoothing.
- :func:`cls_attention`, :func:`position_similarity` -- what the figures show.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from course_utils.blocks import EncoderBlock, LayerNorm
from course_utils.progress import progress

__all__ = ["digits_splits", "digits_tensors", "patchify", "patch_embed", "PatchEmbedding", "ViTConfig", "ViT",
           "accuracy", "train_classifier", "cls_attention", "position_similarity"]


# --------------------------------------------------------------------------- data
def digits_splits(test_fraction: float = 0.25, seed: int = 0):
    """scikit-learn's 8x8 digits (grey levels 0..16 scaled to [0, 1]) as a ``datasets.DatasetDict``
    with ``train`` and ``test`` splits (stratified by label, fixed by ``seed``); columns ``image``
    (8 x 8 floats) and ``label``, formatted as torch tensors."""
    from datasets import Dataset, DatasetDict
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    images = (digits.images / 16.0).astype("float32")  # (1797, 8, 8)
    labels = digits.target.astype("int64")
    tr_x, te_x, tr_y, te_y = train_test_split(images, labels, test_size=test_fraction, random_state=seed,
                                              stratify=labels)
    splits = DatasetDict({
        "train": Dataset.from_dict({"image": list(tr_x), "label": tr_y}),
        "test": Dataset.from_dict({"image": list(te_x), "label": te_y}),
    })
    splits.set_format("torch")
    return splits


def digits_tensors(split, device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """One split of :func:`digits_splits` -> images ``(n, 1, 8, 8)`` float32 and labels ``(n,)``."""
    rows = split[:]  # one dict of stacked tensors
    return rows["image"].unsqueeze(1).float().to(device), rows["label"].long().to(device)


# --------------------------------------------------------------------------- patches
def patchify(images: torch.Tensor, patch_size: int) -> torch.Tensor:
    """``(B, C, H, W) -> (B, N, C p p)``, ``N = (H/p)(W/p)``; patch ``n = row * (W/p) + col``."""
    B, C, H, W = images.shape
    p = patch_size
    if H % p or W % p:
        raise ValueError(f"image {H}x{W} is not divisible into {p}x{p} patches")
    x = images.reshape(B, C, H // p, p, W // p, p)  # (B, C, rows, i, cols, j)
    x = x.permute(0, 2, 4, 1, 3, 5)  # (B, rows, cols, C, i, j)
    return x.reshape(B, (H // p) * (W // p), C * p * p)


def patch_embed(images: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, patch_size: int) -> torch.Tensor:
    """Linear patch embedding ``patchify(x) W^T + b``: images ``(B, C, H, W)``, ``weight (d, C, p, p)``
    (a Conv2d's), ``bias (d,)`` -> ``(B, N, d)``; equals the convolution with stride ``p``."""
    out = patchify(images, patch_size) @ weight.reshape(weight.size(0), -1).T  # (B, N, d)
    return out if bias is None else out + bias


class PatchEmbedding(nn.Module):
    """The patch embedding as a strided convolution: ``(B, C, H, W) -> (B, N, d)``."""

    def __init__(self, in_channels: int, d_model: int, patch_size: int) -> None:
        super().__init__()
        self.patch_size = patch_size
        self.proj = nn.Conv2d(in_channels, d_model, kernel_size=patch_size, stride=patch_size)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.proj(images).flatten(2).transpose(1, 2)  # (B, d, H/p, W/p) -> (B, N, d)


# --------------------------------------------------------------------------- model
@dataclass
class ViTConfig:
    image_size: int = 8
    patch_size: int = 2
    in_channels: int = 1
    n_classes: int = 10
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 4
    d_ff: int = 128
    dropout: float = 0.0

    @property
    def n_patches(self) -> int:
        return (self.image_size // self.patch_size) ** 2


class ViT(nn.Module):
    """``images (B, C, H, W) -> logits (B, n_classes)``.

    Tokens: ``[CLS]`` then the N patch embeddings, plus a learned position embedding each
    (``pos_embed (1, N + 1, d)``). After a forward, ``attention_maps()`` returns the weights
    ``(B, h, T, T)`` of every block.
    """

    def __init__(self, config: ViTConfig) -> None:
        super().__init__()
        self.config = config
        d = config.d_model
        self.patch_embed = PatchEmbedding(config.in_channels, d, config.patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d))
        self.pos_embed = nn.Parameter(torch.zeros(1, config.n_patches + 1, d))
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(
            EncoderBlock(d, config.n_heads, config.d_ff, config.dropout, norm_first=True, activation="gelu")
            for _ in range(config.n_layers))
        self.norm = LayerNorm(d)
        self.head = nn.Linear(d, config.n_classes)

    def tokens(self, images: torch.Tensor) -> torch.Tensor:
        """``(B, C, H, W) -> (B, N + 1, d)``: [CLS] + patch embeddings, plus positions."""
        x = self.patch_embed(images)  # (B, N, d)
        cls = self.cls_token.expand(x.size(0), -1, -1)  # (B, 1, d)
        return torch.cat([cls, x], dim=1) + self.pos_embed

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.drop(self.tokens(images))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x)[:, 0])  # the [CLS] token's final state

    def attention_maps(self) -> list[torch.Tensor]:
        """Attention weights ``(B, h, T, T)`` of every block, from the last forward."""
        return [block.attn_weights for block in self.blocks]


# --------------------------------------------------------------------------- training
@torch.no_grad()
def accuracy(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, batch_size: int = 512) -> float:
    """Fraction of ``images`` whose argmax logit is the label (model in eval mode)."""
    was_training = model.training
    model.eval()
    correct = 0
    for i in range(0, len(images), batch_size):
        correct += int((model(images[i:i + batch_size]).argmax(-1) == labels[i:i + batch_size]).sum())
    model.train(was_training)
    return correct / len(images)


def train_classifier(
    model: nn.Module, x_train: torch.Tensor, y_train: torch.Tensor, x_test: torch.Tensor, y_test: torch.Tensor, *,
    epochs: int, batch_size: int = 32, lr: float = 3e-3, weight_decay: float = 0.05, warmup_epochs: int = 2,
    label_smoothing: float = 0.1, seed: int = 0,
) -> dict:
    """AdamW, linear warm-up then cosine decay, per step. Returns ``epochs``, ``train_loss`` (mean per
    epoch), ``test_acc`` (after each epoch) and ``seconds`` (training only)."""
    gen = torch.Generator().manual_seed(seed)
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    steps_per_epoch = math.ceil(len(x_train) / batch_size)
    total, warmup = epochs * steps_per_epoch, warmup_epochs * steps_per_epoch
    history: dict = {"epochs": [], "train_loss": [], "test_acc": []}
    seconds, step = 0.0, 0
    for epoch in progress(range(1, epochs + 1), desc="training (epochs)"):
        start = time.perf_counter()
        model.train()
        order = torch.randperm(len(x_train), generator=gen).to(x_train.device)
        losses = []
        for i in range(0, len(x_train), batch_size):
            idx = order[i:i + batch_size]
            x, y = x_train[idx], y_train[idx]
            scale = (step + 1) / warmup if step < warmup else 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, total - warmup)))
            for group in optimiser.param_groups:
                group["lr"] = lr * scale
            loss = F.cross_entropy(model(x), y, label_smoothing=label_smoothing)
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
            losses.append(loss.item())
            step += 1
        seconds += time.perf_counter() - start
        history["epochs"].append(epoch)
        history["train_loss"].append(sum(losses) / len(losses))
        history["test_acc"].append(accuracy(model, x_test, y_test))
    history["seconds"] = seconds
    return history


# --------------------------------------------------------------------------- what the figures show
@torch.no_grad()
def cls_attention(model: ViT, images: torch.Tensor, layer: int = -1) -> torch.Tensor:
    """Attention of [CLS] over the patches in block ``layer``, averaged over heads, as a grid
    ``(B, H/p, W/p)`` (row ``r``, column ``c`` is patch ``r * (W/p) + c``)."""
    was_training = model.training
    model.eval()
    model(images)
    model.train(was_training)
    weights = model.attention_maps()[layer]  # (B, h, T, T)
    side = model.config.image_size // model.config.patch_size
    return weights[:, :, 0, 1:].mean(dim=1).reshape(-1, side, side)


def position_similarity(pos_embed: torch.Tensor) -> torch.Tensor:
    """Cosine similarity of every pair of position embeddings: ``(N, d) -> (N, N)``."""
    unit = F.normalize(pos_embed, dim=-1)
    return unit @ unit.T
