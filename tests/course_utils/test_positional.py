"""Unit tests of course_utils.positional against straightforward loop references.

Tolerances: float64 comparisons at 1e-12 absolute; float32 outputs at 1e-5 absolute
(values are sines and cosines in [-1, 1], or rotations of N(0, 1) vectors).
"""

from __future__ import annotations

import math

import pytest
import torch

from course_utils.positional import (
    LearnedPositionalEmbedding,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    apply_rope,
    frequencies,
    offset_matrix,
    sinusoidal_encoding,
)

F32_ATOL = 1e-5


def loop_pe(T: int, d: int, base: float = 10000.0) -> torch.Tensor:
    """PE[pos, h]: sin(pos / base^(h/d)) for even h, cos(pos / base^((h-1)/d)) for odd h (the AMAL lab's indexing)."""
    pe = torch.zeros(T, d, dtype=torch.float64)
    for pos in range(T):
        for h in range(d):
            if h % 2 == 0:
                pe[pos, h] = math.sin(pos / base ** (h / d))
            else:
                pe[pos, h] = math.cos(pos / base ** ((h - 1) / d))
    return pe


def loop_rope(x: torch.Tensor, positions: list[int], base: float = 10000.0) -> torch.Tensor:
    """x: (T, d). Rotate pair (2i, 2i+1) of row t by positions[t] * base^(-2i/d), counter-clockwise."""
    T, d = x.shape
    out = torch.zeros(T, d, dtype=torch.float64)
    for t in range(T):
        for i in range(d // 2):
            angle = positions[t] * base ** (-2 * i / d)
            a, b = float(x[t, 2 * i]), float(x[t, 2 * i + 1])
            out[t, 2 * i] = a * math.cos(angle) - b * math.sin(angle)
            out[t, 2 * i + 1] = a * math.sin(angle) + b * math.cos(angle)
    return out


@pytest.mark.parametrize("T,d", [(1, 2), (7, 4), (50, 16), (20, 6)])
def test_sinusoidal_matches_loop(T, d):
    got = sinusoidal_encoding(T, d, dtype=torch.float64)
    torch.testing.assert_close(got, loop_pe(T, d), atol=1e-12, rtol=0)
    got32 = sinusoidal_encoding(T, d)
    assert got32.dtype == torch.float32 and got32.shape == (T, d)
    torch.testing.assert_close(got32.double(), loop_pe(T, d), atol=F32_ATOL, rtol=0)


def test_sinusoidal_other_base_and_first_row():
    torch.testing.assert_close(sinusoidal_encoding(9, 8, base=100.0, dtype=torch.float64), loop_pe(9, 8, 100.0), atol=1e-12, rtol=0)
    first = sinusoidal_encoding(3, 8)[0]
    assert torch.equal(first, torch.tensor([0.0, 1.0] * 4))


def test_frequencies():
    w = frequencies(8)
    torch.testing.assert_close(w, torch.tensor([1.0, 10000 ** -0.25, 10000 ** -0.5, 10000 ** -0.75], dtype=torch.float64))


def test_odd_dimension_rejected():
    with pytest.raises(ValueError):
        sinusoidal_encoding(4, 5)
    with pytest.raises(ValueError):
        RotaryEmbedding(7)


def test_sinusoidal_module_adds_table():
    torch.manual_seed(0)
    module = SinusoidalPositionalEncoding(8, max_len=32)
    x = torch.randn(3, 10, 8)
    torch.testing.assert_close(module(x), x + loop_pe(10, 8).float(), atol=F32_ATOL, rtol=0)
    torch.testing.assert_close(module(x[:, :4], offset=5), x[:, :4] + loop_pe(9, 8)[5:].float(), atol=F32_ATOL, rtol=0)
    assert list(module.parameters()) == [] and "pe" not in module.state_dict()
    with pytest.raises(ValueError):
        module(torch.randn(1, 33, 8))


def test_learned_module():
    torch.manual_seed(0)
    module = LearnedPositionalEmbedding(12, 6)
    x = torch.randn(2, 5, 6)
    out = module(x)
    torch.testing.assert_close(out, x + module.embedding.weight[:5], atol=0, rtol=0)
    assert sum(p.numel() for p in module.parameters()) == 12 * 6
    out.sum().backward()
    grad = module.embedding.weight.grad
    assert torch.all(grad[:5] == 2.0) and torch.all(grad[5:] == 0.0)
    with pytest.raises(ValueError):
        module(torch.randn(1, 13, 6))


@pytest.mark.parametrize("k", [0, 1, 3, 17, -4])
def test_offset_matrix_shifts_every_position(k):
    d, T = 16, 60
    pe = loop_pe(T + 30, d)
    m = offset_matrix(k, d, dtype=torch.float64)
    for pos in range(max(0, -k), T):
        torch.testing.assert_close(m @ pe[pos], pe[pos + k], atol=1e-10, rtol=0)


def test_offset_matrix_algebra():
    d = 12
    m3, m5, m8 = (offset_matrix(k, d, dtype=torch.float64) for k in (3, 5, 8))
    torch.testing.assert_close(m3 @ m5, m8, atol=1e-12, rtol=0)
    torch.testing.assert_close(m3 @ m3.T, torch.eye(d, dtype=torch.float64), atol=1e-12, rtol=0)
    torch.testing.assert_close(offset_matrix(0, d, dtype=torch.float64), torch.eye(d, dtype=torch.float64))
    assert offset_matrix(2, d).dtype == torch.float32


@pytest.mark.parametrize("d", [2, 8])
def test_rope_matches_loop(d):
    torch.manual_seed(1)
    x = torch.randn(6, d, dtype=torch.float64)
    positions = [0, 1, 2, 5, 11, 40]
    got = apply_rope(x, torch.tensor(positions))
    torch.testing.assert_close(got, loop_rope(x, positions), atol=1e-12, rtol=0)
    torch.testing.assert_close(apply_rope(x), loop_rope(x, list(range(6))), atol=1e-12, rtol=0)


def test_rope_batched_and_module_agree():
    torch.manual_seed(2)
    x = torch.randn(2, 3, 7, 8)  # (B, heads, T, d)
    expected = torch.stack([torch.stack([loop_rope(x[b, h].double(), list(range(7))) for h in range(3)]) for b in range(2)])
    torch.testing.assert_close(apply_rope(x).double(), expected, atol=F32_ATOL, rtol=0)
    rope = RotaryEmbedding(8, max_len=32)
    torch.testing.assert_close(rope(x), apply_rope(x), atol=F32_ATOL, rtol=0)
    torch.testing.assert_close(rope(x, offset=4), apply_rope(x, torch.arange(4, 11)), atol=F32_ATOL, rtol=0)
    assert list(rope.parameters()) == []


def test_rope_score_depends_only_on_offset():
    torch.manual_seed(3)
    d = 16
    q, k = torch.randn(d, dtype=torch.float64), torch.randn(d, dtype=torch.float64)

    def score(m: int, n: int) -> float:
        return float(apply_rope(q[None], torch.tensor([m]))[0] @ apply_rope(k[None], torch.tensor([n]))[0])

    for delta in (-7, 0, 3):
        values = [score(n + delta, n) for n in (10, 20, 33, 100)]
        assert max(values) - min(values) < 1e-10
    assert abs(score(0, 0) - float(q @ k)) < 1e-12
    # rotating preserves norms
    torch.testing.assert_close(apply_rope(q[None], torch.tensor([9])).norm(), q.norm())
