"""Unit tests of course_utils.benchmark."""

import pytest
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


def test_generation_speed_times_a_generate_function_with_and_without_the_cache():
    from course_utils.benchmark import generation_speed
    from course_utils.gpt import GPT, GPTConfig, generate

    torch.manual_seed(6)
    m = GPT(GPTConfig(vocab_size=31, block_size=16, n_layer=1, n_head=2, d_model=16)).eval()
    r = generation_speed(m, generate, prompt_len=4, new_tokens=8, repeats=1)
    assert r["identical"] and r["with_cache"] > 0 and r["without_cache"] > 0
    assert r["speedup"] == pytest.approx(r["with_cache"] / r["without_cache"])
