"""Progress bars: shown in the cpu and gpu profiles, silent in ci and while nbgrader executes."""

from __future__ import annotations

import torch
from tqdm.std import tqdm

from course_utils.gpt import GPT, GPTConfig, train_lm
from course_utils.progress import progress, progress_enabled


def test_ci_profile_returns_the_iterable_itself(monkeypatch, capsys):
    monkeypatch.setenv("COURSE_PROFILE", "ci")
    items = range(3)
    assert progress(items, desc="training") is items
    assert list(progress(items)) == [0, 1, 2]
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_cpu_and_gpu_profiles_show_a_tqdm_bar(monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    for profile in ("cpu", "gpu"):
        monkeypatch.setenv("COURSE_PROFILE", profile)
        bar = progress(range(3), desc="training")
        assert isinstance(bar, tqdm)   # tqdm.auto's class is a subclass of tqdm.std's
        assert list(bar) == [0, 1, 2]


def test_grading_is_silent_in_any_profile(monkeypatch):
    monkeypatch.setenv("COURSE_PROFILE", "cpu")
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert not progress_enabled()
    items = [1, 2]
    assert progress(items) is items


def test_a_training_loop_writes_nothing_in_ci(monkeypatch, capsys):
    monkeypatch.setenv("COURSE_PROFILE", "ci")
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, d_model=16))
    data = torch.randint(0, 11, (200,))
    history = train_lm(model, data, data, steps=3, batch_size=4, eval_every=2, eval_batches=1)
    assert len(history["train_batch"]) == 3 and history["steps"] == [0, 2, 3]
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""
