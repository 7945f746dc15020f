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


def test_the_first_line_gives_the_thread_count_a_notebook_pins_and_course_threads_overrides_it(capsys, monkeypatch):
    """A notebook measured at one thread says so on its first line; COURSE_THREADS=2 really runs two."""
    before = torch.get_num_threads()
    try:
        monkeypatch.setenv("COURSE_PROFILE", "cpu")
        monkeypatch.setenv("COURSE_DEVICE", "cpu")
        monkeypatch.delenv("COURSE_THREADS", raising=False)
        torch.set_num_threads(2)
        start(seed=0, threads=1)
        assert torch.get_num_threads() == 1
        assert "cpu (1 thread)" in capsys.readouterr().out
        monkeypatch.setenv("COURSE_THREADS", "2")
        start(seed=0, threads=1)
        assert torch.get_num_threads() == 2
        assert "cpu (2 threads)" in capsys.readouterr().out
        monkeypatch.delenv("COURSE_THREADS")
        torch.set_num_threads(2)
        start(seed=0)  # the cpu profile without a pin: torch's count, unchanged
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_experiment_threads_lets_course_threads_win(monkeypatch):
    from course_utils.device import experiment_threads

    monkeypatch.delenv("COURSE_THREADS", raising=False)
    assert experiment_threads(1) == 1 and experiment_threads(None) is None
    monkeypatch.setenv("COURSE_THREADS", "3")
    assert experiment_threads(1) == 3 and experiment_threads(None) == 3
