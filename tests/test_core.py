"""device, seeding, profiles and session."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from course_utils.device import describe_device, get_device
from course_utils.profiles import choose, describe_profile, get_profile
from course_utils.seeding import seed_everything
from course_utils.session import start


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


def test_seed_everything_repeats_every_generator():
    def draw():
        return random.random(), float(np.random.rand()), torch.rand(3).tolist()

    seed_everything(123)
    first = draw()
    seed_everything(123)
    assert draw() == first
    seed_everything(124)
    assert draw() != first


def test_seed_everything_returns_an_independent_generator():
    gen = seed_everything(5)
    a = torch.rand(2, generator=gen)
    assert torch.equal(a, torch.rand(2, generator=torch.Generator().manual_seed(5)))


@pytest.mark.parametrize("profile", ["ci", "cpu", "gpu"])
def test_profile_from_environment(monkeypatch, profile):
    monkeypatch.setenv("COURSE_PROFILE", profile)
    assert get_profile() == profile
    assert choose(ci=1, cpu=2, gpu=3) == {"ci": 1, "cpu": 2, "gpu": 3}[profile]
    assert profile in describe_profile()


def test_profile_default_follows_device(monkeypatch):
    monkeypatch.delenv("COURSE_PROFILE", raising=False)
    assert get_profile() == ("gpu" if torch.cuda.is_available() else "cpu")
    assert "default" in describe_profile()


def test_gpu_value_defaults_to_cpu_value(monkeypatch):
    monkeypatch.setenv("COURSE_PROFILE", "gpu")
    assert choose(ci=1, cpu=2) == 2


def test_bad_profile_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("COURSE_PROFILE", "laptop")
    with pytest.raises(ValueError, match="ci, cpu, gpu"):
        get_profile()


def test_start_prints_one_line_and_seeds(capsys, monkeypatch):
    monkeypatch.setenv("COURSE_PROFILE", "ci")
    device = start(seed=3)
    a = torch.rand(2)
    out = capsys.readouterr()
    assert out.err == ""
    assert out.out.count("\n") == 1 and "device:" in out.out and "profile: ci" in out.out and "seed: 3" in out.out
    assert isinstance(device, torch.device)
    start(seed=3, quiet=True)
    assert torch.equal(torch.rand(2), a)


def test_start_uses_one_thread_in_the_ci_profile_on_cpu(monkeypatch):
    before = torch.get_num_threads()
    try:
        monkeypatch.setenv("COURSE_PROFILE", "ci")
        monkeypatch.setenv("COURSE_DEVICE", "cpu")
        monkeypatch.delenv("COURSE_THREADS", raising=False)
        start(seed=0, quiet=True)
        assert torch.get_num_threads() == 1
        monkeypatch.setenv("COURSE_THREADS", "2")
        start(seed=0, quiet=True)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


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
