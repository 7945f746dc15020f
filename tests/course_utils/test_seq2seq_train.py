"""Unit tests of course_utils.seq2seq_train (metrics exactly; training only as a smoke test)."""

import matplotlib

matplotlib.use("Agg")

import pytest
import torch

from course_utils import seq2seq_train as st
from course_utils.rnn_seq2seq import build_seq2seq
from course_utils.seq2seq_data import make_string_task, string_vocab


def test_char_accuracy():
    assert st.char_accuracy("abcd", "abcd") == 1.0
    assert st.char_accuracy("abxd", "abcd") == 0.75
    assert st.char_accuracy("ab", "abcd") == 0.5  # missing characters count as wrong
    assert st.char_accuracy("abcdef", "abcd") == 1.0  # extra ones do not (exact match catches them)
    assert st.char_accuracy("", "") == 1.0


def test_accuracy_by_bucket():
    rows = st.accuracy_by_bucket(["ab", "xy", "abc", "abcd", "zz"], ["ab", "xz", "abd", "abcd", "zz"], [2, 2, 3, 4, 9], [2, 4, 6])
    assert [r["bucket"] for r in rows] == ["2-3", "4-5"]
    assert rows[0]["n"] == 3 and rows[0]["exact"] == pytest.approx(1 / 3)
    assert rows[0]["char"] == pytest.approx((1 + 0.5 + 2 / 3) / 3)
    assert rows[1] == {"bucket": "4-5", "lo": 4, "hi": 5, "n": 1, "exact": 1.0, "char": 1.0}
    assert "2-3" in st.format_buckets({"m": rows})


def test_training_smoke_and_evaluation():
    torch.manual_seed(0)
    vocab = string_vocab("abc")
    data = make_string_task(64, 16, task="copy", min_len=1, max_len=4, alphabet="abc", seed=0)
    model = build_seq2seq(len(vocab), attention="additive", embed_size=8, hidden_size=16)
    stats = {}
    losses = st.train_seq2seq(model, data["train"], vocab, steps=30, batch_size=16, lr=1e-2, stats=stats)
    assert len(losses) == 30 and losses[-1] < losses[0]
    assert stats["steps"] == 30 and stats["tokens"] >= 30 * 16 * 2 and stats["tokens_per_s"] > 0
    assert len(st.train_seq2seq(model, data["train"], vocab, steps=1000, batch_size=16, time_budget=0.0)) == 1
    rows, predictions = st.evaluate_by_length(model, data["test"], vocab, [1, 3, 5])
    assert len(predictions) == 16 and sum(r["n"] for r in rows) == 16
    outputs, attention = st.translate(model, ["abc"], vocab, return_attention=True)
    assert attention[0].shape[1] == 4  # three characters + <eos>
    ax = st.plot_accuracy_by_length({"m": rows})
    assert ax.get_ylabel().startswith("exact")
