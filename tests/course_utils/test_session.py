"""course_utils.session: a notebook's first line."""

from __future__ import annotations

import torch

from course_utils.session import start


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
