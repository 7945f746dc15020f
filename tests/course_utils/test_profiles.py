"""course_utils.profiles: ci, cpu, gpu."""

from __future__ import annotations

import pytest
import torch

from course_utils.profiles import choose, describe_profile, get_profile


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
