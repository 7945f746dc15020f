"""course_utils.device: the device, its one-line description, the CPU thread count."""

from __future__ import annotations

import pytest
import torch

from course_utils.device import describe_device, get_device


def test_device_is_cpu_here_and_can_be_forced(monkeypatch):
    monkeypatch.delenv("COURSE_DEVICE", raising=False)
    expected = "cuda" if torch.cuda.is_available() else ("mps" if torch.backends.mps.is_available() else "cpu")
    assert get_device().type == expected
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    assert get_device() == torch.device("cpu")
    assert get_device("cpu") == torch.device("cpu")


def test_describe_device_is_one_line():
    line = describe_device(torch.device("cpu"))
    assert "\n" not in line and line.startswith("device: cpu") and torch.__version__ in line


def test_cpu_threads_sets_and_restores_the_thread_count():
    from course_utils.device import cpu_threads

    before = torch.get_num_threads()
    with cpu_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with cpu_threads(None):  # None: unchanged
        assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError), cpu_threads(1):
        raise RuntimeError("restored on errors too")
    assert torch.get_num_threads() == before
