"""Unit tests of course_utils.sentiment_models (the notebook 07 ladder). CPU, a few seconds."""

from __future__ import annotations

import pytest
import torch

from course_utils.sentiment_data import WordVocab, make_sentiment
from course_utils.sentiment_models import (
    RUNGS,
    AttentionClassifier,
    evaluate_accuracy,
    masked_mean_pool,
    prepend_cls,
    train_sentiment_classifier,
)


def test_masked_mean_pool_ignores_padding():
    h = torch.randn(3, 5, 4)
    lengths = [5, 1, 3]
    real = torch.arange(5)[None] < torch.tensor(lengths)[:, None]
    expected = torch.stack([h[b, :n].mean(0) for b, n in enumerate(lengths)])
    torch.testing.assert_close(masked_mean_pool(h, real), expected, atol=1e-6, rtol=0)


def test_prepend_cls_shapes_values_and_gradient():
    cls = torch.randn(4, requires_grad=True)
    h, real = torch.randn(2, 3, 4), torch.tensor([[True, True, False], [True, True, True]])
    h2, real2 = prepend_cls(h, real, cls)
    assert h2.shape == (2, 4, 4) and real2.tolist() == [[True, True, True, False], [True] * 4]
    torch.testing.assert_close(h2[:, 1:], h)
    h2[:, 0].sum().backward()
    torch.testing.assert_close(cls.grad, torch.full((4,), 2.0))


@pytest.fixture(scope="module")
def small():
    data = make_sentiment(n_train=256, n_test=64, n_contrast=64, seed=0)
    return data, WordVocab.from_texts(data["train"]["text"])


@pytest.mark.parametrize("rung", list(RUNGS))
def test_every_rung_runs_and_pads_consistently(small, rung):
    data, vocab = small
    torch.manual_seed(0)
    model = AttentionClassifier(len(vocab), d_model=16, n_layers=2, n_heads=2, **RUNGS[rung]).eval()
    ids = torch.tensor([vocab.encode("i liked it")])
    padded = torch.cat([ids, torch.zeros(1, 3, dtype=torch.long)], dim=1)
    with torch.no_grad():
        a = model(ids, ids != 0)
        b = model(padded, padded != 0)
    assert a.shape == (1, 2)
    torch.testing.assert_close(a, b, atol=1e-5, rtol=0)  # padding changes nothing


@pytest.mark.parametrize("rung", ["Q1 attention, mean", "Q2 + residual & LN"])
def test_rungs_without_positions_are_order_blind(small, rung):
    data, vocab = small
    torch.manual_seed(0)
    model = AttentionClassifier(len(vocab), d_model=16, n_layers=2, n_heads=2, **RUNGS[rung]).eval()
    a = torch.tensor([vocab.encode("the film was not bad , it was great")])
    b = torch.tensor([vocab.encode("the film was bad , it was not great")])
    with torch.no_grad():
        torch.testing.assert_close(model(a, a != 0), model(b, b != 0), atol=1e-5, rtol=0)


def test_positions_break_the_symmetry(small):
    data, vocab = small
    torch.manual_seed(0)
    model = AttentionClassifier(len(vocab), d_model=16, n_layers=2, n_heads=2, **RUNGS["Q3 + positions"]).eval()
    a = torch.tensor([vocab.encode("the film was not bad , it was great")])
    b = torch.tensor([vocab.encode("the film was bad , it was not great")])
    with torch.no_grad():
        assert (model(a, a != 0) - model(b, b != 0)).abs().max() > 1e-4


def test_post_ln_option_and_bad_pooling(small):
    data, vocab = small
    model = AttentionClassifier(len(vocab), 16, 2, 2, norm_first=False)
    assert all(not layer.norm_first for layer in model.layers)
    with pytest.raises(ValueError):
        AttentionClassifier(len(vocab), 16, 2, 2, pooling="max")


def test_train_classifier_is_deterministic_and_reports(small):
    data, vocab = small
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        model = AttentionClassifier(len(vocab), 16, 2, 2, **RUNGS["Q3 + positions"])
        runs.append(train_sentiment_classifier(model, data, vocab, epochs=1, batch_size=64, warmup_steps=2))
    assert runs[0].losses == runs[1].losses and len(runs[0].losses) == 4
    assert set(runs[0].accuracy) == {"train", "test", "contrast"}
    assert all(0.0 <= v <= 1.0 for v in runs[0].accuracy.values())
    assert runs[0].seconds > 0 and runs[0].n_parameters > 0
    assert evaluate_accuracy(model, data["test"], vocab) == runs[1].accuracy["test"]
