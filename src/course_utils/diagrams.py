"""Schematics of the architectures students build, drawn with matplotlib at run time.

One function per diagram; each returns a :class:`matplotlib.figure.Figure` (the notebooks
call it in a code cell, so no image is stored in a notebook). All of them share the colours
of :data:`ROLES` and the two helpers :func:`box` and :func:`arrow`.

- :func:`rnn_encoder_decoder` -- notebooks 01-02: one context vector (the bottleneck) against
  attention over all encoder states.
- :func:`attention_flow` -- notebook 03: scaled dot-product attention, Q/K/V -> scores -> scale ->
  mask -> softmax -> weights x V, with the shape of each step.
- :func:`multihead_flow` -- notebook 04: project, split into heads, attend per head, concatenate, W^O.
- :func:`post_ln_vs_pre_ln` -- notebook 07: where the LayerNorm sits on the residual path.
- :func:`encoder_decoder` -- notebook 08: the two stacks and cross-attention.
- :func:`kv_cache` -- notebook 10: what the cache stores and where the new query sits.
- :func:`gqa_groups`, :func:`rope_pairings` -- notebook 11: grouped-query heads, and the
  interleaved and rotate-half pairings of RoPE.
- :func:`bert_embeddings` -- notebook 09: BERT's input, token + segment + position embeddings
  summed per position, then LayerNorm and dropout.
- :func:`vit_patches` -- notebook 12: an image cut into patches, each flattened and projected by
  one shared linear map, a learned [CLS] token in front, position embeddings added.
- :func:`moe_routing` -- notebook 12: top-1 routing with a capacity, and a dropped token.
- :func:`flash_tiles` -- notebook 13: the query-block x key-block grid of tiled attention, the
  running ``(m, l, o)`` state of one query block, and the causal tiles that are skipped.
- :func:`preference_pipeline` -- notebook 14: SFT, then DPO or GRPO from the SFT model (the frozen
  reference), and one DPO step (policy and reference scoring the chosen and the rejected answer).
"""

from __future__ import annotations

import math
from typing import Sequence

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Arc, FancyArrowPatch, FancyBboxPatch

__all__ = [
    "ROLES",
    "box",
    "arrow",
    "rnn_encoder_decoder",
    "attention_flow",
    "multihead_flow",
    "post_ln_vs_pre_ln",
    "encoder_decoder",
    "kv_cache",
    "gqa_groups",
    "rope_pairings",
    "bert_embeddings",
    "vit_patches",
    "moe_routing",
    "flash_tiles",
    "preference_pipeline",
]

# (face colour, edge colour) of each kind of part, the same in every diagram
ROLES: dict[str, tuple[str, str]] = {
    "encoder": ("#dbe9f6", "#3d78b5"),
    "decoder": ("#fde8d2", "#d9822b"),
    "attention": ("#e6e0f3", "#6a4fa3"),
    "norm": ("#fff4c2", "#b8930b"),
    "ffn": ("#dcefd6", "#4e9a3a"),
    "cache": ("#d5ecec", "#2f8080"),
    "alert": ("#f9d6d5", "#c0392b"),
    "neutral": ("#f2f2f2", "#6b6b6b"),
    "ghost": ("#ffffff", "#b0b0b0"),
}
INK = "#333333"
NOTE = "#555555"
GOOD = "#2e8b57"
BAD = "#c0392b"


def _canvas(n_panels: int, figsize: tuple[float, float], xlim: tuple[float, float], ylim: tuple[float, float]) -> tuple[Figure, list[Axes]]:
    """A figure of ``n_panels`` side-by-side axes in data units, equal aspect, no frame."""
    fig, axes = plt.subplots(1, n_panels, figsize=figsize, squeeze=False)
    for ax in axes[0]:
        ax.set_xlim(*xlim)
        ax.set_ylim(*ylim)
        ax.set_aspect("equal")
        ax.axis("off")
    return fig, list(axes[0])


def box(ax: Axes, x: float, y: float, w: float, h: float, text: str = "", role: str = "neutral", *,
        fontsize: float = 10, lw: float = 1.4, ls: str = "-", bold: bool = False, color: str = INK) -> FancyBboxPatch:
    """A rounded box centred at (x, y), w wide and h high, coloured by ``role``, with centred text."""
    face, edge = ROLES[role]
    patch = FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0,rounding_size=0.12",
                           facecolor=face, edgecolor=edge, linewidth=lw, linestyle=ls, zorder=2)
    ax.add_patch(patch)
    if text:
        ax.text(x, y, text, ha="center", va="center", fontsize=fontsize, color=color, zorder=3,
                fontweight="bold" if bold else "normal")
    return patch


def arrow(ax: Axes, start: tuple[float, float], end: tuple[float, float], *, color: str = INK, lw: float = 1.3,
          ls: str = "-", rad: float = 0.0, style: str = "-|>", alpha: float = 1.0, zorder: float = 1.5) -> FancyArrowPatch:
    """An arrow from ``start`` to ``end`` (data units); ``rad`` bends it (0 = straight)."""
    patch = FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=12, color=color, linewidth=lw, linestyle=ls,
                            connectionstyle=f"arc3,rad={rad}", shrinkA=0, shrinkB=0, alpha=alpha, zorder=zorder)
    ax.add_patch(patch)
    return patch


def _note(ax: Axes, x: float, y: float, text: str, *, color: str = NOTE, size: float = 9, ha: str = "center",
          va: str = "center", style: str = "italic") -> None:
    ax.text(x, y, text, ha=ha, va=va, fontsize=size, color=color, style=style, zorder=4)


def _polyline(ax: Axes, points: Sequence[tuple[float, float]], *, color: str = INK, lw: float = 1.3) -> None:
    """Straight segments through ``points``, the last one with an arrow head."""
    xs, ys = zip(*points[:-1])
    ax.plot(xs, ys, color=color, lw=lw, solid_capstyle="round", zorder=1.5)
    arrow(ax, points[-2], points[-1], color=color, lw=lw)


# --------------------------------------------------------------------------- notebooks 01-02
def _rnn_encoder(ax: Axes, xs: Sequence[float], y: float) -> None:
    for j, x in enumerate(xs, 1):
        ax.text(x, 0.3, f"$x_{j}$", ha="center", va="center", fontsize=12, color=INK)
        arrow(ax, (x, 0.55), (x, y - 0.35))
        box(ax, x, y, 0.95, 0.7, f"$h_{j}$", "encoder", fontsize=12)
    for a, b in zip(xs, xs[1:]):
        arrow(ax, (a + 0.48, y), (b - 0.48, y), style="<|-|>")
    _note(ax, (xs[0] + xs[-1]) / 2, -0.35, "encoder: bidirectional GRU", size=9)


def _rnn_decoder(ax: Axes, xs: Sequence[float], y: float, highlight: int | None = None) -> None:
    for t, x in enumerate(xs, 1):
        faded = highlight is not None and t != highlight
        box(ax, x, y, 0.95, 0.7, f"$s_{t}$", "ghost" if faded else "decoder", fontsize=12,
            color=NOTE if faded else INK)
        arrow(ax, (x, y + 0.35), (x, y + 0.95), color=NOTE if faded else INK)
        ax.text(x, y + 1.2, f"$y_{t}$", ha="center", va="center", fontsize=12, color=NOTE if faded else INK)
    for a, b in zip(xs, xs[1:]):
        arrow(ax, (a + 0.48, y), (b - 0.48, y))
    _note(ax, (xs[0] + xs[-1]) / 2, y + 1.75, "decoder: GRU, one token per step", size=9)


def rnn_encoder_decoder(attention: bool = True) -> Figure:
    """Notebook 01's encoder-decoder, whose decoder sees one context vector c at every step
    (the bottleneck); with ``attention=True`` a second panel: notebook 02's decoder, which mixes
    a new context c_t from all encoder states at every step."""
    fig, axes = _canvas(2 if attention else 1, (13.5, 4.6) if attention else (7.0, 4.6), (-0.2, 12.2), (-0.6, 6.4))
    enc_x, dec_x, y_enc, y_dec = [0.8, 2.1, 3.4, 4.7], [7.4, 8.7, 10.0, 11.3], 1.7, 4.2
    violet = ROLES["attention"][1]

    ax = axes[0]
    ax.set_title("without attention (notebook 01): one context vector $c$", fontsize=11)
    _rnn_encoder(ax, enc_x, y_enc)
    _rnn_decoder(ax, dec_x, y_dec)
    box(ax, 6.0, y_enc, 0.95, 0.75, "$c$", "alert", fontsize=13, lw=2.2, bold=True)
    # c = [forward state after the last input; backward state after the first]: one arrow from each end
    arrow(ax, (enc_x[-1] + 0.48, y_enc + 0.12), (6.0 - 0.5, y_enc + 0.12), color=BAD, lw=2)
    _note(ax, 5.33, y_enc + 0.43, "$\\overrightarrow{h}_4$", color=BAD, size=10, style="normal")   # above its arrow
    _polyline(ax, [(enc_x[0], y_enc + 0.36), (enc_x[0], y_enc + 0.8), (5.72, y_enc + 0.8), (5.72, y_enc + 0.39)],
              color=BAD, lw=2)
    _note(ax, (enc_x[0] + enc_x[-1]) / 2, y_enc + 1.05, "$\\overleftarrow{h}_1$ (the backward GRU ends at $x_1$)",
          color=BAD, size=9)
    for k, x in enumerate(dec_x):
        arrow(ax, (6.1 + 0.1 * k, y_enc + 0.38), (x - 0.2, y_dec - 0.36), color=BAD, lw=1.2, rad=-0.12)
    _note(ax, 9.4, 1.55, "bottleneck: $c = [\\overrightarrow{h}_L; \\overleftarrow{h}_1]$\n(both ends of the input),\n"
          "the same $H$ numbers at every step,\nwhatever the input's length", color=BAD, size=9)

    if attention:
        ax = axes[1]
        ax.set_title("with attention (notebook 02): a new $c_t$ at every step", fontsize=11)
        _rnn_encoder(ax, enc_x, y_enc)
        _rnn_decoder(ax, dec_x, y_dec, highlight=3)
        cx, cy = 8.05, 2.55
        box(ax, cx, cy, 1.9, 0.75, "$c_3=\\sum_j a_{3j}\\,h_j$", "attention", fontsize=11)
        weights = [0.08, 0.12, 0.55, 0.25]
        for j, (x, a) in enumerate(zip(enc_x, weights), 1):
            arrow(ax, (x + 0.1, y_enc + 0.36), (cx - 0.96, cy - 0.3 + 0.12 * j), color=violet, lw=0.8 + 6 * a,
                  rad=-0.25 + 0.04 * j)
            ax.text(x - 0.25, y_enc + 0.55, f"{a:.2f}", ha="center", va="center", fontsize=8, color=violet)
        _note(ax, 0.9, 2.75, "weights $a_{3j}$", color=violet, size=8.5)
        arrow(ax, (cx + 0.6, cy + 0.38), (dec_x[2] - 0.15, y_dec - 0.36), color=violet, lw=2)
        arrow(ax, (dec_x[1] - 0.1, y_dec - 0.36), (cx - 0.3, cy + 0.38), color=NOTE, lw=1.1, ls="--")
        _note(ax, 7.55, 3.45, "query $s_2$", size=8.5, ha="right")
        _note(ax, 10.3, 1.2, "all encoder states are kept;\nthe weights $a_{tj}$ (a softmax) choose\n"
              "which ones step $t$ reads", color=violet, size=9)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- notebook 03
def attention_flow(masked: bool = True) -> Figure:
    """Scaled dot-product attention, left to right: Q and K give the scores QK^T, scaled by sqrt(d),
    (with ``masked``) a mask adds 0 or -inf, a softmax over the keys gives the weights A (returned
    too), and A V is the output; the shape of each step is written under it."""
    fig, (ax,) = _canvas(1, (13.0, 4.4), (-0.3, 15.6), (-0.5, 4.9))
    y = 3.0
    box(ax, 0.8, 4.0, 1.1, 0.65, "$Q$", "decoder", fontsize=13)
    box(ax, 0.8, 2.3, 1.1, 0.65, "$K$", "encoder", fontsize=13)
    box(ax, 0.8, 0.5, 1.1, 0.65, "$V$", "cache", fontsize=13)
    _note(ax, 0.8, 3.48, "$(T_q, d)$", size=8.5, style="normal")
    _note(ax, 0.8, 1.78, "$(T_k, d)$", size=8.5, style="normal")
    _note(ax, 0.8, -0.02, "$(T_k, d_v)$", size=8.5, style="normal")
    steps = [("$QK^\\top$", "attention", "scores $(T_q, T_k)$:\none dot product\nper (query, key)"),
             ("$\\div\\sqrt{d}$", "neutral", "keeps their variance\nnear 1 (section 2)")]
    if masked:
        steps.append(("+ mask\n($0$ or $-\\infty$)", "alert", "optional:\n$-\\infty$ where a key\nmay not be read (05)"))
    steps.append(("softmax\nover the keys", "norm", "weights $A$ $(T_q, T_k)$:\neach row sums to 1"))
    xs = [3.3 + 2.35 * i for i in range(len(steps))]
    for i, (x, (text, role, note)) in enumerate(zip(xs, steps)):
        box(ax, x, y, 1.75, 0.85, text, role, fontsize=10.5 if "\n" in text else 12,
            ls="--" if role == "alert" else "-")
        _note(ax, x, y - 1.05, note, size=8.5)
        if i:
            arrow(ax, (xs[i - 1] + 0.88, y), (x - 0.88, y))
    arrow(ax, (1.36, 4.0), (xs[0] - 0.88, y + 0.2), rad=-0.1)
    arrow(ax, (1.36, 2.3), (xs[0] - 0.88, y - 0.2), rad=0.1)
    x_av = xs[-1] + 2.35
    box(ax, x_av, y, 1.35, 0.85, "$A\\,V$", "attention", fontsize=13)
    arrow(ax, (xs[-1] + 0.88, y), (x_av - 0.68, y))
    _polyline(ax, [(1.36, 0.5), (x_av, 0.5), (x_av, y - 0.43)])
    _note(ax, (xs[0] + x_av) / 2, 0.72, "values: what each key hands over", size=8.5)
    box(ax, x_av + 1.75, y, 1.25, 0.85, "output", "neutral", fontsize=11, bold=True)
    arrow(ax, (x_av + 0.68, y), (x_av + 1.12, y))
    _note(ax, x_av + 1.75, y - 0.72, "$(T_q, d_v)$", size=8.5, style="normal")
    arrow(ax, (xs[-1], y + 0.43), (xs[-1], y + 1.2), ls="--", color=NOTE)
    _note(ax, xs[-1], y + 1.45, "weights $A$ (returned too: the heatmaps)", size=8.5)
    ax.set_title("scaled dot-product attention: $\\mathrm{softmax}(QK^\\top/\\sqrt{d} + \\mathrm{mask})\\,V$", fontsize=11)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- notebook 04
def multihead_flow(n_heads: int = 3) -> Figure:
    """Multi-head attention, bottom to top: X is projected once by W^Q, W^K, W^V; split_heads cuts
    the d features into ``n_heads`` slices of d/h (one colour per head); each head runs scaled
    dot-product attention on its slice; merge_heads concatenates the heads and W^O mixes them."""
    colours = ["#3d78b5", "#d9822b", "#4e9a3a", "#6a4fa3", "#c0392b", "#2f8080", "#b8930b", "#6b6b6b"]
    fig, (ax,) = _canvas(1, (9.0, 7.6), (-0.4, 12.6), (-0.4, 10.2))
    xc, width = 5.0, 8.2
    box(ax, xc, 0.3, 2.6, 0.6, "$X$   $(B, T, d)$", "neutral", fontsize=11)
    proj_x = [xc - 2.9, xc, xc + 2.9]
    for x, text in zip(proj_x, ("$Q = XW^Q$", "$K = XW^K$", "$V = XW^V$")):
        arrow(ax, (xc, 0.6), (x, 1.3), rad=0.0)
        box(ax, x, 1.65, 2.3, 0.65, text, "neutral", fontsize=11)
    _note(ax, xc + 5.35, 1.65, "one $(d, d)$ matrix\neach: all heads at once", size=8.5, ha="left")
    # the d features of each projection, cut into n_heads coloured slices
    for x in proj_x:
        arrow(ax, (x, 1.98), (x, 2.55))
        w = 2.2 / n_heads
        for h in range(n_heads):
            ax.add_patch(plt.Rectangle((x - 1.1 + h * w, 2.6), w, 0.35, facecolor=colours[h % len(colours)],
                                       edgecolor="white", lw=1.0, alpha=0.75, zorder=2))
    box(ax, xc, 3.45, width, 0.55, "split_heads: $(B, T, d) \\to (B, h, T, d_k)$, $d_k = d/h$", "ghost", fontsize=10)
    head_x = [xc - width / 2 + width * (h + 0.5) / n_heads for h in range(n_heads)]
    for h, x in enumerate(head_x):
        c = colours[h % len(colours)]
        arrow(ax, (x, 3.73), (x, 4.55), color=c, lw=1.8)
        patch = box(ax, x, 5.15, min(2.4, width / n_heads - 0.3), 1.1,
                    f"head {h + 1}\n$\\mathrm{{softmax}}(Q_{h + 1}K_{h + 1}^\\top/\\sqrt{{d_k}})V_{h + 1}$", "attention",
                    fontsize=8.5 if n_heads > 3 else 9.5)
        patch.set_edgecolor(c)
        arrow(ax, (x, 5.71), (x, 6.5), color=c, lw=1.8)
    _note(ax, xc + width / 2 + 0.2, 5.15, "the heads are a\nbatch axis: one\ncall for all", size=8.5, ha="left")
    box(ax, xc, 6.8, width, 0.55, "merge_heads (concatenate): $(B, h, T, d_k) \\to (B, T, d)$", "ghost", fontsize=10)
    w = 4.0 / n_heads
    for h in range(n_heads):
        ax.add_patch(plt.Rectangle((xc - 2.0 + h * w, 7.3), w, 0.35, facecolor=colours[h % len(colours)],
                                   edgecolor="white", lw=1.0, alpha=0.75, zorder=2))
    arrow(ax, (xc, 7.08), (xc, 7.28))
    arrow(ax, (xc, 7.67), (xc, 8.05))
    box(ax, xc, 8.4, 3.6, 0.65, "$W^O$ $(d, d)$: mixes the heads", "encoder", fontsize=10.5, lw=2)
    arrow(ax, (xc, 8.73), (xc, 9.25))
    ax.text(xc, 9.5, "output $(B, T, d)$: the shape of $X$", ha="center", va="center", fontsize=11, color=INK)
    ax.set_title(f"multi-head attention, $h = {n_heads}$ heads", fontsize=11)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- notebook 07
def _branch(ax: Axes, x_stream: float, x_side: float, y_from: float, y_to: float, parts: Sequence[tuple[str, str]],
            plus_at: float) -> None:
    """A side branch: leave the stream at y_from, go through ``parts`` (text, role) upwards, come back at a "+"."""
    ys = [y_from + 0.75 + 0.95 * i for i in range(len(parts))]
    _polyline(ax, [(x_stream, y_from), (x_side, y_from), (x_side, ys[0] - 0.33)])
    for i, (text, role) in enumerate(parts):
        box(ax, x_side, ys[i], 2.3, 0.66, text, role, fontsize=10)
        if i:
            arrow(ax, (x_side, ys[i - 1] + 0.33), (x_side, ys[i] - 0.33))
    _polyline(ax, [(x_side, ys[-1] + 0.33), (x_side, plus_at), (x_stream + 0.27, plus_at)])
    ax.add_patch(plt.Circle((x_stream, plus_at), 0.26, facecolor="white", edgecolor=INK, lw=1.4, zorder=3))
    ax.text(x_stream, plus_at, "+", ha="center", va="center", fontsize=13, zorder=4)


def post_ln_vs_pre_ln() -> Figure:
    """One transformer block drawn twice: post-LN (the LayerNorm sits on the residual stream,
    after each sum) and pre-LN (the LayerNorm sits on the branch, the stream is never normalised)."""
    fig, axes = _canvas(2, (11.5, 6.4), (-0.3, 7.3), (-0.4, 9.6))
    xs, xb = 1.6, 4.6

    ax = axes[0]
    ax.set_title("post-LN (Vaswani et al. 2017, BERT)\n$x \\leftarrow \\mathrm{LN}(x + \\mathrm{Sublayer}(x))$", fontsize=11)
    ax.text(xs, 0.0, "$x$", ha="center", fontsize=13)
    ax.plot([xs, xs], [0.3, 2.74], color=BAD, lw=9, alpha=0.25, zorder=1)
    ax.plot([xs, xs], [0.3, 2.74], color=INK, lw=1.3, zorder=1.5)
    _branch(ax, xs, xb, 1.0, 3.0, [("self-attention", "attention")], 3.0)
    box(ax, xs, 3.9, 1.9, 0.6, "LayerNorm", "norm", lw=2.2)
    arrow(ax, (xs, 3.26), (xs, 3.6))
    ax.plot([xs, xs], [4.2, 6.14], color=BAD, lw=9, alpha=0.25, zorder=1)
    ax.plot([xs, xs], [4.2, 6.14], color=INK, lw=1.3, zorder=1.5)
    _branch(ax, xs, xb, 4.6, 6.4, [("feed-forward", "ffn")], 6.4)
    box(ax, xs, 7.3, 1.9, 0.6, "LayerNorm", "norm", lw=2.2)
    arrow(ax, (xs, 6.66), (xs, 7.0))
    arrow(ax, (xs, 7.6), (xs, 8.3))
    ax.text(xs, 8.55, "out", ha="center", fontsize=11)
    ax.text(xs - 0.42, 1.9, "residual stream", rotation=90, ha="center", va="center", fontsize=8.5, color=BAD)
    _note(ax, 3.5, -0.25, "every path from the output back to $x$ crosses every LayerNorm", color=BAD)

    ax = axes[1]
    ax.set_title("pre-LN (GPT-2, Llama and most models since)\n$x \\leftarrow x + \\mathrm{Sublayer}(\\mathrm{LN}(x))$", fontsize=11)
    ax.text(xs, 0.0, "$x$", ha="center", fontsize=13)
    ax.plot([xs, xs], [0.3, 6.9], color=GOOD, lw=9, alpha=0.3, zorder=1)
    ax.plot([xs, xs], [0.3, 6.9], color=INK, lw=1.3, zorder=1.5)
    _branch(ax, xs, xb, 0.8, 3.6, [("LayerNorm", "norm"), ("self-attention", "attention")], 3.6)
    _branch(ax, xs, xb, 4.3, 7.1, [("LayerNorm", "norm"), ("feed-forward", "ffn")], 7.1)
    box(ax, xs, 8.05, 2.3, 0.6, "final LayerNorm", "norm", fontsize=10, ls="--")
    _note(ax, xs + 1.35, 8.05, "once, after the last block\n(not part of each block)", ha="left")
    arrow(ax, (xs, 7.36), (xs, 7.75))
    arrow(ax, (xs, 8.35), (xs, 8.95))
    ax.text(xs, 9.2, "out", ha="center", fontsize=11)
    ax.text(xs - 0.42, 2.3, "residual stream", rotation=90, ha="center", va="center", fontsize=8.5, color=GOOD)
    _note(ax, 3.5, -0.25, "a clean residual path: no norm on the stream, one final LayerNorm at the top", color=GOOD)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- notebook 08
def encoder_decoder() -> Figure:
    """The encoder-decoder transformer: the encoder's memory M feeds the cross-attention of
    every decoder block (queries from the decoder, keys and values from M)."""
    fig, (ax,) = _canvas(1, (9.5, 7.6), (-0.2, 12.4), (-0.3, 10.0))
    xe, xd, w = 2.8, 8.9, 3.3

    ax.text(xe, 0.15, "source $x_1 \\dots x_S$", ha="center", fontsize=11)
    arrow(ax, (xe, 0.45), (xe, 0.95))
    box(ax, xe, 1.3, w, 0.65, "embedding + positions", "neutral")
    ax.add_patch(FancyBboxPatch((xe - w / 2 - 0.3, 2.2), w + 0.6, 2.9, boxstyle="round,pad=0,rounding_size=0.2",
                                facecolor="none", edgecolor=ROLES["encoder"][1], lw=1.3, ls="--", zorder=1))
    ax.text(xe - w / 2 - 0.5, 3.65, "$N\\times$", ha="right", va="center", fontsize=12, color=ROLES["encoder"][1])
    arrow(ax, (xe, 1.63), (xe, 2.8))
    box(ax, xe, 3.15, w, 0.7, "self-attention\n(every position reads every one)", "attention", fontsize=9)
    arrow(ax, (xe, 3.5), (xe, 4.0))
    box(ax, xe, 4.35, w, 0.65, "feed-forward", "ffn")
    arrow(ax, (xe, 4.68), (xe, 5.9))
    box(ax, xe, 6.3, w, 0.8, "memory $M$\n($S \\times d$: one vector per source token)", "encoder", fontsize=9, lw=2)
    ax.text(xe, 9.2, "ENCODER", ha="center", fontsize=12, color=ROLES["encoder"][1], fontweight="bold")

    ax.text(xd, 0.15, "target shifted right: <bos> $y_1 \\dots y_{T-1}$", ha="center", fontsize=11)
    arrow(ax, (xd, 0.45), (xd, 0.95))
    box(ax, xd, 1.3, w, 0.65, "embedding + positions", "neutral")
    ax.add_patch(FancyBboxPatch((xd - w / 2 - 0.3, 2.2), w + 0.6, 4.3, boxstyle="round,pad=0,rounding_size=0.2",
                                facecolor="none", edgecolor=ROLES["decoder"][1], lw=1.3, ls="--", zorder=1))
    ax.text(xd + w / 2 + 0.5, 4.35, "$\\times N$", ha="left", va="center", fontsize=12, color=ROLES["decoder"][1])
    arrow(ax, (xd, 1.63), (xd, 2.8))
    box(ax, xd, 3.15, w, 0.7, "masked self-attention\n(position $t$ reads $\\leq t$)", "attention", fontsize=9)
    arrow(ax, (xd, 3.5), (xd, 4.0))
    box(ax, xd, 4.4, w, 0.75, "cross-attention", "attention", fontsize=11, lw=2.4, bold=True)
    arrow(ax, (xd, 4.78), (xd, 5.45))
    box(ax, xd, 5.8, w, 0.65, "feed-forward", "ffn")
    arrow(ax, (xd, 6.13), (xd, 7.05))
    box(ax, xd, 7.4, w, 0.65, "linear + softmax", "decoder")
    arrow(ax, (xd, 7.73), (xd, 8.3))
    ax.text(xd, 8.55, "next tokens $y_1 \\dots y_T$", ha="center", fontsize=11)
    ax.text(xd, 9.2, "DECODER", ha="center", fontsize=12, color=ROLES["decoder"][1], fontweight="bold")

    arrow(ax, (xe + w / 2, 6.3), (xd - w / 2, 4.5), color=ROLES["encoder"][1], lw=2.6, rad=-0.15)
    _note(ax, 6.1, 7.0, "keys and values\n(the same $M$ for every\ndecoder block)", color=ROLES["encoder"][1], size=9)
    _note(ax, xd - 0.9, 3.75, "queries", size=9)
    _note(ax, 6.0, -0.25, "residual connections and LayerNorms omitted; every attention has its own mask (section 2)", size=8.5)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- notebook 10
def kv_cache(tokens: Sequence[str] = ("To", " be", ",", " or", " not", " to")) -> Figure:
    """Left: one layer's KV cache while generating the last of ``tokens``: keys and values of the
    past positions are stored, the new token adds one column, and its query (the only one computed)
    reads every key. Right: two new queries at once sit at the bottom right of the causal mask."""
    fig, (ax, ax2) = _canvas(2, (13.2, 4.6), (-1.9, 10.0), (-1.0, 5.8))
    fig.axes[1].set_xlim(-2.2, 6.6)
    n = len(tokens)
    xs = [0.6 + 1.25 * j for j in range(n)]
    new = n - 1
    y_tok, y_v, y_k, y_q = 0.4, 1.85, 3.0, 4.9
    ax.set_title(f"generating token {new}: what one layer's KV cache holds", fontsize=11)
    for j, (x, tok) in enumerate(zip(xs, tokens)):
        is_new = j == new
        box(ax, x, y_tok, 1.05, 0.55, repr(tok)[1:-1].replace(" ", "·"), "decoder" if is_new else "neutral", fontsize=9)
        arrow(ax, (x, y_tok + 0.28), (x, y_v - 0.3), color=NOTE, lw=0.8)
        box(ax, x, y_v, 0.8, 0.55, f"$v_{j}$", "decoder" if is_new else "cache", fontsize=11, lw=2 if is_new else 1.4)
        box(ax, x, y_k, 0.8, 0.55, f"$k_{j}$", "decoder" if is_new else "cache", fontsize=11, lw=2 if is_new else 1.4)
        if is_new:
            box(ax, x, y_q, 0.8, 0.55, f"$q_{j}$", "decoder", fontsize=11, lw=2.2)
        else:
            box(ax, x, y_q, 0.8, 0.55, f"$q_{j}$", "ghost", fontsize=10, ls="--", color="#aaaaaa")
    for x in xs:
        arrow(ax, (xs[new] - 0.1, y_q - 0.28), (x, y_k + 0.29), color=ROLES["decoder"][1], lw=1.1, rad=0.0)
    ax.text(-0.2, y_k, "K cache", ha="right", va="center", fontsize=10, color=ROLES["cache"][1], fontweight="bold")
    ax.text(-0.2, y_v, "V cache", ha="right", va="center", fontsize=10, color=ROLES["cache"][1], fontweight="bold")
    ax.text(-0.2, y_q, "queries", ha="right", va="center", fontsize=10, color=NOTE)
    ax.text(-0.2, y_tok, "tokens", ha="right", va="center", fontsize=10, color=NOTE)
    ax.add_patch(FancyBboxPatch((xs[0] - 0.5, y_v - 0.4), xs[new - 1] - xs[0] + 1.0, y_k - y_v + 0.8,
                                boxstyle="round,pad=0,rounding_size=0.15", facecolor="none",
                                edgecolor=ROLES["cache"][1], lw=1.2, ls="--", zorder=1))
    _note(ax, (xs[0] + xs[new - 1]) / 2, y_tok - 0.62, f"the cache (dashed): $k, v$ of positions 0..{new - 1}, "
          "shape $(B, h, T_{past}, d_k)$, in every layer", color=ROLES["cache"][1], size=8.5)
    _note(ax, xs[new] + 0.55, (y_k + y_v) / 2, "computed now\nand appended", color=ROLES["decoder"][1], size=8.5, ha="left")
    _note(ax, xs[new] + 0.55, y_q, f"the only query computed:\nit reads all {n} keys,\ncached and its own",
          color=ROLES["decoder"][1], size=8.5, ha="left")
    _note(ax, (xs[0] + xs[new - 1]) / 2, y_q + 0.55, "past queries: never needed again, not kept", color="#999999", size=8.5)

    t_past, t_new = 3, 2
    ax2.set_title(f"{t_new} new queries after {t_past} cached keys:\ncausal_mask({t_new}, {t_past + t_new}) is bottom-right aligned",
                  fontsize=11)
    cell, x0, y0 = 1.0, 0.0, 3.2
    for i in range(t_new):
        for j in range(t_past + t_new):
            allowed = j <= i + t_past
            role = ("cache" if j < t_past else "decoder") if allowed else "ghost"
            box(ax2, x0 + j * cell + 0.5, y0 - i * cell, 0.9, 0.9, "1" if allowed else "0", role, fontsize=11,
                color=INK if allowed else "#aaaaaa")
        ax2.text(x0 - 0.2, y0 - i * cell, f"$q_{t_past + i}$", ha="right", va="center", fontsize=11)
    for j in range(t_past + t_new):
        ax2.text(x0 + j * cell + 0.5, y0 + 0.75, f"$k_{j}$", ha="center", va="center", fontsize=11)
    _note(ax2, x0 + t_past * cell / 2, y0 + 1.35, "cached", color=ROLES["cache"][1], size=9)
    _note(ax2, x0 + t_past * cell + t_new * cell / 2, y0 + 1.35, "new", color=ROLES["decoder"][1], size=9)
    _note(ax2, 2.5, 0.9, "the query at position $t$ reads key $j$ when $j \\leq t$\n(new query $i = 0, 1, \\ldots$ sits at "
          "$t = T_{past} + i$);\na top-left tril would hide cached keys", size=9)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- notebook 11
GROUP_COLOURS = ("#3d78b5", "#d9822b", "#4e9a3a", "#6a4fa3", "#c0392b", "#2f8080")


def _heads_panel(ax: Axes, x0: float, n_heads: int, n_kv: int, title: str) -> None:
    rep = n_heads // n_kv
    hx = [x0 + 0.75 * i for i in range(n_heads)]
    centre = (hx[0] + hx[-1]) / 2
    kx = [centre + 0.75 * rep * (g - (n_kv - 1) / 2) for g in range(n_kv)]
    for i, x in enumerate(hx):
        colour = GROUP_COLOURS[i // rep]
        ax.add_patch(FancyBboxPatch((x - 0.28, 4.7), 0.56, 0.56, boxstyle="round,pad=0,rounding_size=0.08",
                                    facecolor="white", edgecolor=colour, lw=1.8, zorder=2))
        ax.text(x, 4.98, f"{i}", ha="center", va="center", fontsize=9, zorder=3)
        ax.plot([x, kx[i // rep]], [4.7, 3.35], color=colour, lw=1.3, zorder=1)
    for g, x in enumerate(kx):
        ax.add_patch(FancyBboxPatch((x - 0.3, 2.75), 0.6, 0.6, boxstyle="round,pad=0,rounding_size=0.08",
                                    facecolor=GROUP_COLOURS[g], edgecolor=GROUP_COLOURS[g], alpha=0.85, zorder=2))
        ax.text(x, 3.05, "abcdef"[g], ha="center", va="center", fontsize=10, color="white", fontweight="bold", zorder=3)
    ax.text(centre, 6.1, title, ha="center", va="center", fontsize=10.5)
    _note(ax, centre, 2.25, f"KV cache: {n_kv} head{'s' if n_kv > 1 else ''} ({n_kv}/{n_heads} of multi-head)", size=8.5)


def gqa_groups(n_heads: int = 6, n_kv_heads: int = 2) -> Figure:
    """Top: which key/value head each query head reads, for multi-head, grouped-query and
    multi-query attention. Bottom: ``repeat_kv`` repeats each kv head in place (a a a b b b),
    not in turn (a b a b a b)."""
    fig, (ax,) = _canvas(1, (12.5, 5.6), (-0.6, 19.2), (-2.9, 6.7))
    ax.text(-0.5, 4.98, "query heads", ha="left", va="center", fontsize=9, color=NOTE, rotation=90)
    ax.text(-0.5, 3.05, "k, v heads", ha="left", va="center", fontsize=9, color=NOTE, rotation=90)
    _heads_panel(ax, 0.5, n_heads, n_heads, f"multi-head ($H_{{kv}} = H = {n_heads}$)")
    _heads_panel(ax, 7.0, n_heads, n_kv_heads, f"grouped-query ($H_{{kv}} = {n_kv_heads}$)")
    _heads_panel(ax, 13.5, n_heads, 1, "multi-query ($H_{kv} = 1$)")
    rep = n_heads // n_kv_heads

    ax.plot([-0.4, 19.0], [1.6, 1.6], color="#dddddd", lw=1)
    ax.text(0.0, 0.85, f"repeat_kv(k, n_rep={rep}):\nkv heads (a, b) become", ha="left", va="center", fontsize=10)
    for row, (order, ok) in enumerate(((["abcdef"[i // rep] for i in range(n_heads)], True),
                                       (["abcdef"[i % n_kv_heads] for i in range(n_heads)], False))):
        y = 0.85 - 1.55 * row
        for i, name in enumerate(order):
            x = 5.4 + 0.75 * i
            g = "abcdef".index(name)
            ax.add_patch(FancyBboxPatch((x - 0.28, y - 0.28), 0.56, 0.56, boxstyle="round,pad=0,rounding_size=0.08",
                                        facecolor=GROUP_COLOURS[g], edgecolor=GROUP_COLOURS[g], alpha=0.85, zorder=2))
            ax.text(x, y, name, ha="center", va="center", fontsize=10, color="white", fontweight="bold", zorder=3)
            ax.text(x, y - 0.5, f"{i}", ha="center", va="center", fontsize=7.5, color=NOTE)
        verdict = (f"right: query heads 0..{rep - 1} read a, {rep}..{2 * rep - 1} read b (in place)" if ok else
                   "wrong: query head 1 would read b, another group's keys (in turn)")
        ax.text(5.4 + 0.75 * n_heads, y, ("✓  " if ok else "✗  ") + verdict, ha="left", va="center", fontsize=10,
                color=GOOD if ok else BAD)
    _note(ax, 5.4, -1.35, "(small numbers: the query head that reads each copy)", size=8, ha="left")
    fig.tight_layout()
    return fig


def rope_pairings(head_dim: int = 8) -> Figure:
    """The dimensions of one head and the pairs RoPE rotates together: (2i, 2i+1) in the
    interleaved layout, (i, i + d/2) in the rotate-half layout; the same colour is the same
    frequency, so the two layouts are one rotation with the dimensions listed in another order."""
    half = head_dim // 2
    fig, (ax,) = _canvas(1, (11.0, 4.4), (-5.3, 0.95 * head_dim + 3.4), (-1.9, 4.9))
    colours = [plt.get_cmap("viridis")(0.1 + 0.75 * i / max(1, half - 1)) for i in range(half)]
    xs = [0.5 + 0.95 * d for d in range(head_dim)]
    rows = (("interleaved: pairs $(2i,\\ 2i+1)$", "notebook 06, RoFormer, llama.cpp",
             [(2 * i, 2 * i + 1) for i in range(half)], 3.0, 1),
            ("rotate-half: pairs $(i,\\ i + d/2)$", "Hugging Face Llama, SmolLM2, this notebook",
             [(i, i + half) for i in range(half)], 0.2, -1))
    for title, users, pairs, y, side in rows:
        pair_of = {d: i for i, pair in enumerate(pairs) for d in pair}
        for d, x in enumerate(xs):
            ax.add_patch(FancyBboxPatch((x - 0.38, y - 0.32), 0.76, 0.64, boxstyle="round,pad=0,rounding_size=0.08",
                                        facecolor=colours[pair_of[d]], edgecolor="white", alpha=0.9, zorder=2))
            ax.text(x, y, f"{d}", ha="center", va="center", fontsize=10, color="white", fontweight="bold", zorder=3)
        for i, (a, b) in enumerate(pairs):
            height = 0.45 if b - a == 1 else 0.5 + 0.28 * i
            ax.add_patch(Arc(((xs[a] + xs[b]) / 2, y + side * 0.32), xs[b] - xs[a], 2 * height,
                             theta1=0 if side > 0 else 180, theta2=180 if side > 0 else 360, color=colours[i], lw=2,
                             zorder=1.5))
        ax.text(-5.1, y + 0.22, title, ha="left", va="center", fontsize=11)
        ax.text(-5.1, y - 0.32, users, ha="left", va="center", fontsize=9, color=NOTE, style="italic")
    lx = xs[-1] + 0.9
    ax.text(lx, 2.3, "pair $i$ turns\nby $m\\,\\omega_i$:", ha="left", va="center", fontsize=9, color=NOTE)
    for i in range(half):
        ax.add_patch(FancyBboxPatch((lx, 1.45 - 0.45 * i - 0.15), 0.3, 0.3, boxstyle="round,pad=0,rounding_size=0.05",
                                    facecolor=colours[i], edgecolor="none", zorder=2))
        label = "fastest" if i == 0 else "slowest" if i == half - 1 else ""
        ax.text(lx + 0.45, 1.45 - 0.45 * i, f"$i = {i}$  {label}", ha="left", va="center", fontsize=8.5, color=NOTE)
    ax.text(xs[0] - 0.4, 4.35, f"the {head_dim} dimensions of one head; same colour = rotated together, "
            "by the same angle ($\\omega_i = b^{-2i/d}$)", ha="left", va="center", fontsize=9, color=NOTE)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- notebook 12
def bert_embeddings(tokens: Sequence[str] = ("[CLS]", "my", "dog", "[SEP]", "it", "barks", "[SEP]"),
                    n_first: int = 4) -> Figure:
    """BERT's input: for each position t, the token embedding E[token_t], the segment embedding
    (A for the first ``n_first`` tokens, [CLS] and the first [SEP] included, B after) and the learned
    position embedding P[t] are summed, then LayerNorm and dropout give the encoder's input (T, d)."""
    n = len(tokens)
    fig, (ax,) = _canvas(1, (1.45 * n + 2.6, 6.2), (-2.3, 1.45 * n + 0.3), (-0.6, 7.6))
    ax.set_title("BERT's input embeddings: three lookups summed per position", fontsize=11)
    rows = [(6.6, "input", None), (5.3, "token", "encoder"), (4.1, "segment", "decoder"), (2.9, "position", "attention")]
    for y, name, _ in rows:
        _note(ax, -1.3, y, name, size=10)
    _note(ax, -1.3, 1.55, "sum", size=10)
    _note(ax, -1.3, 0.25, "encoder\ninput", size=10)
    for t, tok in enumerate(tokens):
        x = 1.45 * t + 0.7
        box(ax, x, 6.6, 1.25, 0.6, tok, "neutral", fontsize=10)
        arrow(ax, (x, 6.3), (x, 5.6))
        box(ax, x, 5.3, 1.25, 0.6, f"$E_{{\\mathrm{{{tok.strip('[]')}}}}}$", "encoder", fontsize=9)
        seg = "A" if t < n_first else "B"
        box(ax, x, 4.1, 1.25, 0.6, f"$E_{seg}$", "decoder", fontsize=10)
        box(ax, x, 2.9, 1.25, 0.6, f"$P_{t}$", "attention", fontsize=10)
        for y0, y1 in ((6.3, 5.6), (5.0, 4.4), (3.8, 3.2)):
            ax.text(x, (y0 + y1) / 2, "+" if y1 < 5 else "", ha="center", va="center", fontsize=12, color=INK)
        arrow(ax, (x, 2.6), (x, 1.85))
        ax.text(x, 1.55, "$\\oplus$", ha="center", va="center", fontsize=16, color=INK)
        arrow(ax, (x, 1.25), (x, 0.6))
    box(ax, 1.45 * (n - 1) / 2 + 0.7, 0.25, 1.45 * n - 0.2, 0.6,
        "LayerNorm, dropout  ->  $(T, d)$, the first encoder block's input", "norm", fontsize=10)
    _note(ax, 1.45 * (n - 1) / 2 + 0.7, 7.3, f"segment A: the first {n_first} tokens (up to the first [SEP]); "
          "segment B: the rest; every table is learned", size=9)
    fig.tight_layout()
    return fig


def vit_patches(grid: int = 3, shown: int = 4) -> Figure:
    """ViT's input: an image cut into ``grid`` x ``grid`` patches of p x p pixels, in reading order;
    each patch flattened to C p^2 numbers and mapped by one shared linear layer E to d; a learned
    [CLS] vector in front; a learned position embedding added to each of the N + 1 tokens."""
    n = grid * grid
    fig, (ax,) = _canvas(1, (12.0, 5.6), (-0.3, 15.2), (-0.8, 6.4))
    ax.set_title(f"ViT's input: {n} patches -> linear projection -> [CLS] in front -> + positions", fontsize=11)
    cell = 0.8
    for r in range(grid):
        for c in range(grid):
            k = r * grid + c
            box(ax, 0.6 + c * cell, 4.6 - r * cell, cell * 0.92, cell * 0.92, str(k + 1), "neutral", fontsize=8)
    _note(ax, 0.2 + grid * cell / 2, 1.9, "image $(C, H, W)$\ncut into $p \\times p$ patches", size=9)
    arrow(ax, (0.4 + grid * cell, 4.2), (3.3, 4.2))
    cols = ["[CLS]"] + [f"{k + 1}" for k in range(shown - 1)] + ["..."] + [f"{n}"]
    for i, lab in enumerate(cols):
        x = 4.2 + 1.7 * i
        if lab == "...":
            ax.text(x, 2.6, "...", ha="center", va="center", fontsize=14, color=INK)
            continue
        if lab == "[CLS]":
            box(ax, x, 4.2, 1.4, 0.7, "learned\n[CLS]", "decoder", fontsize=9)
        else:
            box(ax, x, 5.3, 1.4, 0.6, f"patch {lab}\n$C p^2$", "neutral", fontsize=8)
            arrow(ax, (x, 5.0), (x, 4.55))
            box(ax, x, 4.2, 1.4, 0.7, f"$x_p^{{({lab})}} E^\\top$", "encoder", fontsize=10)
        arrow(ax, (x, 3.85), (x, 3.25))
        ax.text(x, 3.0, "+", ha="center", va="center", fontsize=13, color=INK)
        pos = 0 if lab == "[CLS]" else int(lab)
        box(ax, x, 2.3, 1.4, 0.6, f"$P_{{{pos}}}$", "attention", fontsize=10)
        arrow(ax, (x, 2.0), (x, 1.2))
    box(ax, 4.2 + 1.7 * (len(cols) - 1) / 2, 0.8, 1.7 * len(cols) - 0.2, 0.7,
        f"encoder blocks: $N + 1 = {n + 1}$ tokens of width $d$; the classifier reads the [CLS] output", "norm", fontsize=10)
    _note(ax, 10.0, 5.95, "one shared linear layer $E$ $(d, C p^2)$ for every patch (a convolution with stride $p$)", size=9)
    fig.tight_layout()
    return fig


def moe_routing(choices: Sequence[int] = (0, 1, 0, 2, 1, 0), n_experts: int = 3, capacity_factor: float = 1.0) -> Figure:
    """Top-1 routing of len(choices) tokens to ``n_experts`` experts with
    capacity = ceil(capacity_factor * N * k / E) slots each: tokens are served in order, and an
    assignment that finds its expert full is dropped (the token skips the FFN, the residual carries it)."""
    n = len(choices)
    capacity = math.ceil(capacity_factor * n * 1 / n_experts)
    fig, (ax,) = _canvas(1, (10.5, 6.0), (-0.6, 11.9), (-0.9, n + 1.4))
    ax.set_title(f"top-1 routing, $N = {n}$ tokens, $E = {n_experts}$ experts: capacity "
                 f"$= \\lceil {capacity_factor:g} \\cdot N k / E \\rceil = {capacity}$ slots each", fontsize=11)
    ys = [n - 0.2 - i for i in range(n)]
    for i, y in enumerate(ys):
        box(ax, 0.4, y, 0.9, 0.6, f"$x_{i + 1}$", "decoder", fontsize=11)
        arrow(ax, (0.85, y), (2.05, y))
    box(ax, 2.6, (ys[0] + ys[-1]) / 2, 1.1, ys[0] - ys[-1] + 0.9, "router\n$x W_r$\nsoftmax\ntop-1", "attention", fontsize=10)
    ey = [ys[0] - 0.1 - 1.6 * e for e in range(n_experts)]
    slot_w, ex = 1.0, 8.0
    used = [0] * n_experts
    for i, (y, e) in enumerate(zip(ys, choices)):
        slot = used[e]
        used[e] += 1
        if slot < capacity:
            sx = ex - (capacity - 1) * slot_w / 2 + slot * slot_w
            sy = ey[e] - 0.15
            arrow(ax, (3.15, y), (sx - 0.3, sy + 0.1 * (1 - 2 * slot) - 0.0), color=GROUP_COLOURS[e], lw=1.5)
            box(ax, sx, sy, 0.8, 0.55, f"$x_{i + 1}$", "decoder", fontsize=10)
        else:
            arrow(ax, (3.15, y), (5.3, y), color=BAD, lw=1.5, ls="--")
            ax.text(5.55, y, "✗", color=BAD, fontsize=16, ha="center", va="center", fontweight="bold")
            _note(ax, 5.95, y, f"$x_{i + 1}$ chose expert {e + 1}, which is full: dropped.\nIt skips the FFN in this "
                  "layer; the residual\nconnection carries it on unchanged.", color=BAD, size=9, ha="left")
    for e, y in enumerate(ey):
        face, edge = ROLES["ffn"]
        ax.add_patch(FancyBboxPatch((ex - capacity * slot_w / 2 - 0.25, y - 0.55), capacity * slot_w + 0.5, 1.3,
                                    boxstyle="round,pad=0,rounding_size=0.15", facecolor=face, edgecolor=edge, lw=1.5, zorder=1))
        ax.text(ex, y + 0.48, f"expert {e + 1} (an FFN)", ha="center", va="center", fontsize=9.5, color=INK)
        for slot in range(used[e], capacity):
            sx = ex - (capacity - 1) * slot_w / 2 + slot * slot_w
            box(ax, sx, y - 0.15, 0.8, 0.55, "empty", "ghost", fontsize=8, ls="--", color="#999999")
    _note(ax, 6.5, -0.55, "slots are served in token order (with top-2: every first choice before any second choice);\n"
          "the output of a kept token is $x + g\\,\\mathrm{FFN}_e(x)$", size=9)
    fig.tight_layout()
    return fig


def flash_tiles(n_q: int = 4, n_k: int = 4, causal: bool = True, row: int = 2) -> Figure:
    """Tiled attention's grid: ``n_q`` query blocks (rows) by ``n_k`` key blocks (columns), each tile
    marked computed, masked on the diagonal, or skipped (causal); query block ``row`` sweeps its key
    blocks left to right, carrying only its state ``(m, l, o)`` from one tile to the next."""
    fig, (ax,) = _canvas(1, (10.5, 5.2), (-1.6, n_k + 6.4), (-1.3, n_q + 1.1))
    ax.set_title("tiled (flash) attention: one $B_q \\times B_k$ tile of scores at a time"
                 + (", causal" if causal else ""), fontsize=11)
    for i in range(n_q):
        y = n_q - 1 - i + 0.5
        box(ax, -0.9, y, 0.9, 0.8, f"$Q_{i}$", "decoder", fontsize=10)
        for j in range(n_k):
            x = j + 0.5
            skipped = causal and j > i * n_k / n_q + (n_k / n_q - 1) + 1e-9
            diagonal = causal and not skipped and (j + 1) * n_q > i * n_k + 1e-9 and j * n_q < (i + 1) * n_k
            if skipped:
                box(ax, x, y, 0.9, 0.8, "skipped", "ghost", fontsize=7.5, ls="--", color="#999999")
            else:
                role = "alert" if diagonal else ("attention" if i == row else "neutral")
                box(ax, x, y, 0.9, 0.8, "mask" if diagonal else "$S_{%d%d}$" % (i, j), role, fontsize=8.5)
    for j in range(n_k):
        box(ax, j + 0.5, n_q + 0.55, 0.9, 0.6, f"$K_{j}, V_{j}$", "encoder", fontsize=9)
    y = n_q - 1 - row + 0.5
    last = min(n_k - 1, int(row * n_k / n_q + n_k / n_q - 1)) if causal else n_k - 1
    for j in range(last):
        arrow(ax, (j + 0.5 + 0.25, y - 0.5), (j + 1.5 - 0.25, y - 0.5), color=ROLES["attention"][1], rad=0.35)
    box(ax, n_k + 2.6, y, 3.6, 1.5, "state of $Q_{%d}$, kept on chip:\n$m$ running max, $\\ell$ running sum,\n"
        "$o$ unnormalised output" % row, "cache", fontsize=9)
    arrow(ax, (last + 0.95, y), (n_k + 0.8, y), color=ROLES["cache"][1])
    _note(ax, n_k + 2.6, y - 1.35, "per tile: $m\' = \\max(m, \\max_j s_j)$,\n"
          "$\\ell \\leftarrow e^{m - m\'}\\ell + \\sum_j e^{s_j - m\'}$, $o \\leftarrow e^{m - m\'} o + e^{S - m\'} V_j$;\n"
          "at the end: out $= o / \\ell$, lse $= m + \\log \\ell$", size=8.5, ha="center")
    _note(ax, (n_k - 1.6) / 2, -0.75, "never in memory: the whole $T_q \\times T_k$ matrix"
          + ("; tiles above the diagonal are never computed" if causal else ""), size=9)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- notebook 14
def preference_pipeline() -> Figure:
    """Top: the stages after pretraining (SFT, then DPO from preference pairs or GRPO from a
    verifiable reward), each starting from the SFT model, which stays frozen as the reference.
    Bottom: one DPO step: the trainable policy (LoRA) and the frozen reference score the chosen and
    the rejected answer of each pair; four summed log-probabilities make the loss, and the gradient
    reaches the policy's LoRA weights only."""
    fig, axes = plt.subplots(2, 1, figsize=(11.0, 8.2), gridspec_kw={"height_ratios": [1.0, 1.45]})
    for ax, ylim in zip(axes, ((-1.6, 2.3), (-2.4, 5.2))):
        ax.set_xlim(-0.4, 15.4)
        ax.set_ylim(*ylim)
        ax.set_aspect("equal")
        ax.axis("off")
    top, bottom = axes
    top.set_title("after pretraining: SFT, then preferences (DPO) or a verifiable reward (GRPO)", fontsize=11)
    box(top, 1.3, 0.6, 2.4, 1.1, "pretrained LM\n(SmolLM2-135M-\nInstruct)", "neutral", fontsize=9)
    box(top, 5.0, 0.6, 2.6, 1.1, "SFT (notebook 11)\ncross-entropy of\nthe answer tokens", "ffn", fontsize=9)
    box(top, 10.2, 1.35, 3.6, 0.95, "DPO: pairs (chosen, rejected)\nlogistic loss on log-ratios", "attention", fontsize=9)
    box(top, 10.2, -0.25, 3.6, 0.95, "GRPO: a group of samples,\na verifier's reward, clipped ratio", "decoder", fontsize=9)
    box(top, 14.2, 0.6, 1.9, 1.0, "greedy answers\nmeasured", "cache", fontsize=9)
    arrow(top, (2.5, 0.6), (3.7, 0.6))
    arrow(top, (6.3, 0.75), (8.4, 1.3))
    arrow(top, (6.3, 0.45), (8.4, -0.2))
    arrow(top, (12.0, 1.3), (13.25, 0.75))
    arrow(top, (12.0, -0.2), (13.25, 0.45))
    _note(top, 5.0, -0.7, "the SFT model: the policy's start\nand the frozen reference $\\pi_{ref}$", size=8.5)
    _note(top, 10.2, -1.25, "reward: date_reward (exact ISO date) or format_reward (only the shape: gamed)", size=8.5)
    bottom.set_title("one DPO step: a trainable policy and a frozen reference score both answers", fontsize=11)
    box(bottom, 1.5, 3.6, 2.8, 1.0, "prompt $x$ +\nchosen $y_w$", "ffn", fontsize=9.5)
    box(bottom, 1.5, 0.6, 2.8, 1.0, "prompt $x$ +\nrejected $y_l$", "alert", fontsize=9.5)
    box(bottom, 6.0, 3.6, 3.0, 1.1, "policy $\\pi_\\theta$\nSFT + LoRA (trained)", "decoder", fontsize=9.5, bold=True)
    box(bottom, 6.0, 0.6, 3.0, 1.1, "reference $\\pi_{ref}$\nSFT, frozen (no grad)", "neutral", fontsize=9.5, ls="--")
    for y_from in (3.6, 0.6):
        for y_to in (3.6, 0.6):
            arrow(bottom, (2.9, y_from), (4.5, y_to + (0.2 if y_from > y_to else -0.2 if y_from < y_to else 0)),
                  color=GOOD if y_from > 2 else BAD, lw=1.1)
    ys = (4.1, 3.1, 1.1, 0.1)
    labels = ("$\\log\\pi_\\theta(y_w|x)$", "$\\log\\pi_\\theta(y_l|x)$",
              "$\\log\\pi_{ref}(y_w|x)$", "$\\log\\pi_{ref}(y_l|x)$")
    for y, label in zip(ys, labels):
        box(bottom, 9.6, y, 2.6, 0.75, label, "cache" if "ref" in label else "attention", fontsize=9.5)
        arrow(bottom, (7.5, 3.6 if "theta" in label else 0.6), (8.3, y), lw=1.0)
    _note(bottom, 9.6, -0.75, "reference log-probs: computed once, cached", size=8.5)
    box(bottom, 13.4, 2.1, 3.0, 2.2, "$-\\log\\sigma(\\beta\\,[$\n$(\\pi_w - ref_w)$\n$- (\\pi_l - ref_l)])$\n"
        "loss: F.logsigmoid", "alert", fontsize=9.5)
    for y in ys:
        arrow(bottom, (10.9, y), (11.9, 2.1 + (y - 2.1) * 0.35), lw=1.0)
    arrow(bottom, (13.4, 3.2), (6.0, 4.15), color=ROLES["decoder"][1], lw=1.4, ls="--", rad=0.35)
    _note(bottom, 13.6, 4.75, "gradient: to the policy's\nLoRA weights only", size=8.5, color=ROLES["decoder"][1])
    _note(bottom, 7.4, -1.75, "implicit rewards $\\beta(\\log\\pi_\\theta - \\log\\pi_{ref})$ of $y_w$ and $y_l$: "
          "measured (detached), not trained on; the greedy answers are measured separately", size=8.5)
    fig.tight_layout()
    return fig
