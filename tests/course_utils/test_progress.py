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


def test_live_curve_draws_nothing_in_ci(monkeypatch):
    from course_utils import progress as progress_module

    monkeypatch.setenv("COURSE_PROFILE", "ci")
    monkeypatch.setattr(progress_module, "_in_kernel", lambda: True)
    curve = progress_module.LiveCurve()
    curve.add("training", 1, 2.0)
    curve.close()
    assert not curve.enabled and curve.series == {}


def test_live_curve_updates_one_display_in_a_kernel(monkeypatch):
    import IPython.display

    from course_utils import progress as progress_module

    class Handle:
        updates = 0

        def update(self, figure):
            Handle.updates += 1

    shown = []
    monkeypatch.setenv("COURSE_PROFILE", "cpu")
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.setattr(progress_module, "_in_kernel", lambda: True)
    monkeypatch.setattr(IPython.display, "display", lambda figure, display_id: shown.append(figure) or Handle())
    curve = progress_module.LiveCurve(title="t", every=0.0)
    for step in range(3):
        curve.add("training", step, 1.0 / (step + 1))
    curve.add("validation", 2, 0.5)
    curve.close()
    assert len(shown) == 1 and Handle.updates == 5
    assert curve.series["training"] == ([0.0, 1.0, 2.0], [1.0, 0.5, 1 / 3])


def test_a_loop_left_early_ends_as_a_finished_bar(monkeypatch):
    monkeypatch.setenv("COURSE_PROFILE", "cpu")
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    bar = progress(range(10), desc="training")
    for step in bar:
        if step == 3:
            break  # a time budget spent
    del step
    import gc

    gc.collect()
    assert bar.n == 4 and bar.total == 4
