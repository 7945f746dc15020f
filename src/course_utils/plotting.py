"""Figures the course draws again and again: attention heatmaps and training curves."""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

__all__ = ["plot_attention", "plot_attention_grid", "plot_curves"]


def _to_numpy(values: torch.Tensor | np.ndarray) -> np.ndarray:
    if isinstance(values, torch.Tensor):
        return values.detach().float().cpu().numpy()
    return np.asarray(values, dtype=float)


def plot_attention(
    weights: torch.Tensor | np.ndarray,
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    *,
    ax: Axes | None = None,
    title: str | None = None,
    annotate: bool | None = None,
    cmap: str = "viridis",
    colorbar: bool = True,
) -> Axes:
    """Heatmap of one attention matrix, shape ``(T_query, T_key)``: row i is what query i reads.

    Numbers are written in the cells when the matrix is small (``annotate=None`` decides).
    """
    matrix = _to_numpy(weights)
    if matrix.ndim != 2:
        raise ValueError(f"plot_attention needs a 2-d matrix (T_query, T_key), got shape {matrix.shape}")
    if ax is None:
        size = max(3.0, min(8.0, 0.45 * max(matrix.shape) + 1.5))
        _, ax = plt.subplots(figsize=(size + 1.0, size))
    image = ax.imshow(matrix, cmap=cmap, vmin=0.0, vmax=max(1e-12, float(matrix.max())), aspect="auto")
    n_query, n_key = matrix.shape
    if query_labels is not None:
        ax.set_yticks(range(n_query), list(query_labels))
    if key_labels is not None:
        ax.set_xticks(range(n_key), list(key_labels), rotation=90 if max(map(len, key_labels), default=0) > 3 else 0)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    if annotate is None:
        annotate = n_query * n_key <= 64
    if annotate:
        threshold = 0.6 * float(matrix.max())
        for i in range(n_query):
            for j in range(n_key):
                color = "black" if matrix[i, j] > threshold else "white"
                ax.text(j, i, f"{matrix[i, j]:.2f}", ha="center", va="center", color=color, fontsize=9)
    if title:
        ax.set_title(title)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return ax


def plot_attention_grid(
    weights: torch.Tensor | np.ndarray,
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    *,
    titles: Sequence[str] | None = None,
    ncols: int = 4,
    suptitle: str | None = None,
) -> Figure:
    """Several attention matrices side by side, shape ``(n, T_query, T_key)`` (e.g. one per head)."""
    stack = _to_numpy(weights)
    if stack.ndim != 3:
        raise ValueError(f"plot_attention_grid needs shape (n, T_query, T_key), got {stack.shape}")
    n = stack.shape[0]
    ncols = min(ncols, n)
    nrows = (n + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.2 * ncols, 3.0 * nrows), squeeze=False)
    for index, ax in enumerate(axes.flat):
        if index >= n:
            ax.axis("off")
            continue
        title = titles[index] if titles is not None else f"head {index}"
        plot_attention(stack[index], query_labels, key_labels, ax=ax, title=title, annotate=False, colorbar=False)
        if index % ncols:
            ax.set_ylabel("")
    if suptitle:
        fig.suptitle(suptitle)
    fig.tight_layout()
    return fig


def plot_curves(
    curves: Mapping[str, Sequence[float]],
    *,
    xlabel: str = "step",
    ylabel: str = "loss",
    x: Sequence[float] | None = None,
    ax: Axes | None = None,
    title: str | None = None,
    logy: bool = False,
    marker: str | None = None,
) -> Axes:
    """One line per named series, e.g. ``{"train": losses, "validation": val_losses}``."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.6))
    for label, series in curves.items():
        values = _to_numpy(torch.as_tensor(list(series), dtype=torch.float64))
        xs = np.asarray(x if x is not None else range(1, len(values) + 1), dtype=float)[: len(values)]
        ax.plot(xs, values, label=label, marker=marker)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
    if title:
        ax.set_title(title)
    if len(curves) > 1:
        ax.legend()
    ax.grid(alpha=0.3)
    return ax
