"""The schematics of course_utils.diagrams: each draws its labelled parts, and each notebook
that teaches the architecture calls its diagram in a code cell (no image pasted in)."""

from __future__ import annotations

import json
import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402

from course_utils import diagrams  # noqa: E402

from tests.conftest import ROOT  # noqa: E402

# diagram -> (keyword arguments, texts the figure must show)
EXPECTED = {
    "rnn_encoder_decoder": ({}, ["without attention", "with attention", "$c$", "bottleneck", "$h_1$", "$s_3$",
                                "$c_3=\\sum_j a_{3j}\\,h_j$", "weights $a_{3j}$"]),
    "attention_flow": ({}, ["$Q$", "$K$", "$V$", "$QK^\\top$", "$\\div\\sqrt{d}$", "+ mask", "softmax\nover the keys",
                           "$A\\,V$", "output", "$(T_q, d_v)$", "weights $A$ (returned too: the heatmaps)"]),
    "multihead_flow": ({}, ["$X$   $(B, T, d)$", "$Q = XW^Q$", "split_heads", "head 1", "head 3", "merge_heads",
                           "$W^O$ $(d, d)$: mixes the heads", "output $(B, T, d)$: the shape of $X$"]),
    "post_ln_vs_pre_ln": ({}, ["post-LN", "pre-LN", "self-attention", "feed-forward", "LayerNorm", "final LayerNorm",
                              "+", "residual stream"]),
    "encoder_decoder": ({}, ["ENCODER", "DECODER", "cross-attention", "masked self-attention", "memory $M$",
                            "keys and values", "queries", "linear + softmax"]),
    "kv_cache": ({}, ["K cache", "V cache", "$k_0$", "$v_5$", "$q_5$", "computed now", "past queries",
                     "causal_mask(2, 5)", "cached", "new"]),
    "gqa_groups": ({}, ["multi-head", "grouped-query", "multi-query", "repeat_kv(k, n_rep=3)", "right:", "wrong:"]),
    "rope_pairings": ({}, ["interleaved", "rotate-half", "notebook 06", "this notebook", "0", "7"]),
    "flash_tiles": ({}, ["skipped", "mask", "$Q_0$", "$K_3, V_3$", "running max", "never in memory"]),
    "bert_embeddings": ({}, ["token", "segment", "position", "$E_A$", "$E_B$", "$P_0$", "$P_6$", "[CLS]",
                            "LayerNorm, dropout"]),
    "vit_patches": ({}, ["learned\n[CLS]", "$P_{0}$", "$P_{9}$", "patch 1\n$C p^2$", "encoder blocks", "+"]),
    "moe_routing": ({}, ["router", "expert 1 (an FFN)", "expert 3 (an FFN)", "empty", "dropped", "✗",
                        "capacity"]),
    "preference_pipeline": ({}, ["SFT (notebook 11)", "DPO", "GRPO", "reference $\\pi_{ref}$", "chosen $y_w$",
                                "rejected $y_l$", "computed once, cached", "LoRA weights only"]),
}

# notebook -> the diagrams it must draw in a code cell
NOTEBOOKS = {
    "01_rnn_bottleneck": ["rnn_encoder_decoder"],
    "02_soft_attention": ["rnn_encoder_decoder"],
    "03_self_attention": ["attention_flow"],
    "04_multihead": ["multihead_flow"],
    "07_transformer_block": ["post_ln_vs_pre_ln"],
    "08_encoder_decoder": ["encoder_decoder"],
    "09_bert": ["bert_embeddings"],
    "10_gpt": ["kv_cache"],
    "11_modern_lm": ["gqa_groups", "rope_pairings"],
    "12_vit_moe": ["vit_patches", "moe_routing"],
    "13_attention_at_scale": ["flash_tiles"],
    "14_after_fine_tuning": ["preference_pipeline"],
}


def _texts(fig: Figure) -> list[str]:
    return [t.get_text() for ax in fig.axes for t in [ax.title, *ax.texts]]


def test_every_public_diagram_is_tested_and_shown_somewhere():
    drawn = {name for names in NOTEBOOKS.values() for name in names}
    public = {name for name in diagrams.__all__ if name not in ("ROLES", "box", "arrow")}
    assert set(EXPECTED) == public == drawn


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_diagram_draws_its_labelled_parts(name):
    kwargs, labels = EXPECTED[name]
    fig = getattr(diagrams, name)(**kwargs)
    try:
        assert isinstance(fig, Figure)
        texts = _texts(fig)
        joined = "\n".join(texts)
        missing = [label for label in labels if label not in texts and label not in joined]
        assert not missing, f"{name}() does not show {missing}"
        boxes = [p for ax in fig.axes for p in ax.patches if isinstance(p, FancyBboxPatch)]
        assert len(boxes) >= 5, f"{name}() draws {len(boxes)} boxes"
    finally:
        plt.close(fig)


def test_rnn_diagram_without_attention_has_one_panel():
    fig = diagrams.rnn_encoder_decoder(attention=False)
    try:
        assert len(fig.axes) == 1
        assert "bottleneck" in "\n".join(_texts(fig))
        assert not any("with attention" in t for t in _texts(fig))
    finally:
        plt.close(fig)


def test_rnn_context_vector_is_drawn_from_both_ends_of_the_encoder():
    """c = [forward h_L; backward h_1]: two red arrows reach c, one from h_4 and one from h_1 (issue 34)."""
    fig = diagrams.rnn_encoder_decoder(attention=False)
    try:
        texts = "\n".join(_texts(fig))
        assert "$\\overrightarrow{h}_4$" in texts and "$\\overleftarrow{h}_1$" in texts
        ax = fig.axes[0]
        # a red line leaves h_1 (x = 0.8) upwards: the backward half of c
        red_from_h1 = [line for line in ax.lines if line.get_color() == diagrams.BAD
                       and min(line.get_xdata()) <= 0.8 <= max(line.get_xdata())]
        assert red_from_h1, "no line from h_1 to c"
    finally:
        plt.close(fig)


def test_attention_flow_without_mask_has_no_mask_step():
    fig = diagrams.attention_flow(masked=False)
    try:
        texts = "\n".join(_texts(fig))
        assert "+ mask" not in texts and "softmax" in texts
    finally:
        plt.close(fig)


@pytest.mark.parametrize("n_heads", [2, 4])
def test_multihead_flow_draws_one_box_per_head(n_heads):
    fig = diagrams.multihead_flow(n_heads=n_heads)
    try:
        heads = [t for t in _texts(fig) if t.startswith("head ")]
        assert [t.split("\n")[0] for t in heads] == [f"head {i}" for i in range(1, n_heads + 1)]
        assert f"$h = {n_heads}$" in fig.axes[0].get_title()
    finally:
        plt.close(fig)


def test_moe_diagram_drops_what_exceeds_the_capacity():
    fig = diagrams.moe_routing(choices=(0, 0, 0, 1), n_experts=2, capacity_factor=1.0)   # capacity 2: token 3 dropped
    try:
        texts = "\n".join(_texts(fig))
        assert "$x_3$ chose expert 1, which is full" in texts
        assert texts.count("empty") == 1                         # expert 2 got one of its two slots
    finally:
        plt.close(fig)


def test_bert_embeddings_splits_the_segments_after_n_first():
    fig = diagrams.bert_embeddings(tokens=("[CLS]", "a", "[SEP]", "b", "[SEP]"), n_first=3)
    try:
        texts = _texts(fig)
        assert texts.count("$E_A$") == 3 and texts.count("$E_B$") == 2
    finally:
        plt.close(fig)


@pytest.mark.parametrize("assignment", sorted(NOTEBOOKS))
def test_notebook_draws_its_diagram_in_a_code_cell(assignment):
    nb = json.loads((ROOT / "solutions" / assignment / f"{assignment}.ipynb").read_text())
    for name in NOTEBOOKS[assignment]:
        calls = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"
                 and re.search(rf"\b{name}\(", "".join(c["source"]))]
        assert calls, f"solutions/{assignment} has no code cell that calls course_utils.diagrams.{name}()"
        cell = nb["cells"][calls[0]]
        assert not cell["metadata"].get("nbgrader", {}).get("grade"), "a diagram is not a graded cell"
        before = "".join(nb["cells"][calls[0] - 1]["source"])
        assert nb["cells"][calls[0] - 1]["cell_type"] == "markdown" and before.strip(), (
            f"{assignment}: the markdown before {name}() tells the reader what to look at")
    pasted = [i for i, c in enumerate(nb["cells"]) if c.get("attachments") or "data:image" in "".join(c["source"])]
    assert not pasted, f"{assignment}: cells {pasted} paste images; draw them with course_utils.diagrams"
