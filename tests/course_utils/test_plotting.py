"""Plot helpers draw what they are given and complain clearly about wrong shapes."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from course_utils.plotting import plot_attention, plot_attention_grid, plot_curves  # noqa: E402


def test_plot_attention_labels_and_annotations():
    weights = torch.softmax(torch.randn(3, 4), dim=-1)
    ax = plot_attention(weights, ["a", "b", "c"], ["w", "x", "y", "z"], title="t")
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b", "c"]
    assert len(ax.texts) == 12  # small matrices are annotated
    np.testing.assert_allclose(ax.images[0].get_array(), weights.numpy(), rtol=1e-6)
    plt.close("all")


def test_plot_attention_rejects_wrong_rank():
    with pytest.raises(ValueError, match="2-d"):
        plot_attention(torch.zeros(2, 3, 3))


def test_plot_attention_grid_one_panel_per_matrix():
    fig = plot_attention_grid(torch.rand(5, 4, 4), ncols=3)
    drawn = [ax for ax in fig.axes if ax.images]
    assert len(drawn) == 5
    plt.close("all")


def test_plot_curves_one_line_per_series():
    ax = plot_curves({"train": [3, 2, 1], "val": [3.5, 2.5]}, logy=True)
    assert [line.get_label() for line in ax.get_lines()] == ["train", "val"]
    assert ax.get_yscale() == "log"
    plt.close("all")
