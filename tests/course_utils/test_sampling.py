"""Unit tests of course_utils.sampling: temperature, the top-k and top-p filters, the next-token step."""

from __future__ import annotations

import pytest
import torch

from course_utils.sampling import apply_temperature, next_token, top_k_filter, top_p_filter

INF = float("inf")


def test_top_k_filter_exact():
    z = torch.tensor([[1.0, 3.0, 2.0, 0.5], [0.0, -1.0, 4.0, 2.0]])
    expected = torch.tensor([[-INF, 3.0, 2.0, -INF], [-INF, -INF, 4.0, 2.0]])
    assert torch.equal(top_k_filter(z, 2), expected)
    assert torch.equal(top_k_filter(z, None), z)
    assert torch.equal(top_k_filter(z, 10), z)


def test_top_p_filter_exact():
    probs = torch.tensor([0.15, 0.5, 0.05, 0.3])
    z = probs.log()
    assert torch.equal(top_p_filter(z, 0.7), torch.tensor([-INF, z[1], -INF, z[3]]))   # 0.5 + 0.3 crosses 0.7
    assert torch.equal(top_p_filter(z, 0.9), torch.tensor([z[0], z[1], -INF, z[3]]))   # 0.8 < 0.9: one more
    assert torch.equal(top_p_filter(z, 0.3), torch.tensor([-INF, z[1], -INF, -INF]))   # the top token always stays
    assert torch.equal(top_p_filter(z, 1.0), z)


def test_top_p_zero_keeps_the_most_likely_token():
    z = torch.tensor([[0.3, 2.0, -1.0], [5.0, 1.0, 4.0]])
    expected = torch.tensor([[-INF, 2.0, -INF], [5.0, -INF, -INF]])
    assert torch.equal(top_p_filter(z, 0.0), expected)            # p = 0: only the top token, never all -inf
    assert torch.equal(top_p_filter(z, -0.5), expected)


def test_top_p_matches_sorted_definition_on_random_logits():
    torch.manual_seed(0)
    z = 2 * torch.randn(50, 40)
    out = top_p_filter(z, 0.8)
    for row, filt in zip(z, out):
        p = torch.softmax(row, -1)
        order = p.argsort(descending=True)
        cum = p[order].cumsum(0)
        n_keep = int((cum < 0.8).sum()) + 1
        kept = set(order[:n_keep].tolist())
        assert kept == set(torch.nonzero(torch.isfinite(filt)).flatten().tolist())


def test_temperature():
    z = torch.tensor([1.0, 2.0])
    assert torch.equal(apply_temperature(z, 0.5), torch.tensor([2.0, 4.0]))
    with pytest.raises(ValueError):
        apply_temperature(z, 0.0)


def test_next_token_greedy_and_seeded():
    logits = torch.tensor([[0.1, 2.0, -1.0], [3.0, 0.0, 0.5]])
    assert next_token(logits, temperature=0).tolist() == [[1], [0]]
    draw = lambda: next_token(logits, 1.0, top_k=2, generator=torch.Generator().manual_seed(3))  # noqa: E731
    assert torch.equal(draw(), draw()) and draw().shape == (2, 1)
    assert next_token(logits, 1.0, top_k=1).tolist() == [[1], [0]]  # only the top token survives
    assert next_token(logits.bfloat16(), temperature=0).tolist() == [[1], [0]]
