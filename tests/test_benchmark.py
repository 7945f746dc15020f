"""Unit tests of course_utils.benchmark."""

import torch

from course_utils.benchmark import PeakMemory, peak_memory, time_call


def test_peak_memory_counts_live_tensors_exactly():
    x = torch.randn(100, 100)

    def f():
        a = x @ x  # 40,000 bytes
        b = a + 1  # 40,000 bytes, both alive
        del a
        return b.sum()

    with PeakMemory() as meter:
        f()
    assert meter.peak == 80_000 + 0 or meter.peak == 80_004  # the sum's scalar may be alive too
    assert meter.total >= 80_000


def test_views_are_not_counted_twice_and_quadratic_growth_is_seen():
    x, w = torch.randn(64, 8), torch.randn(8, 64)
    assert peak_memory(lambda: (x @ w).view(-1).view(64, 64)) == 64 * 64 * 4
    small = peak_memory(lambda: torch.softmax(x @ w, -1))
    y, v = torch.randn(128, 8), torch.randn(8, 128)
    big = peak_memory(lambda: torch.softmax(y @ v, -1))
    assert big == 4 * small


def test_time_call_returns_positive_median():
    t = time_call(lambda: torch.randn(10, 10) @ torch.randn(10, 10), repeats=3)
    assert 0 < t < 1
