"""The benchmark scripts run and write their tables (tiny sizes; results go to a temporary folder)."""

from __future__ import annotations

import re
import json
import os
import subprocess
import sys

from tests.conftest import ROOT


def _run(tmp_path, *args):
    env = dict(os.environ, BENCH_RESULTS=str(tmp_path), COURSE_DEVICE="cpu")
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / args[0]), *args[1:]], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_attention_benchmark_writes_a_table(tmp_path):
    _run(tmp_path, "bench_attention.py", "--lengths", "16", "32", "--repeats", "1", "--batch", "1", "--d-model", "32", "--heads", "4")
    text = (tmp_path / "attention-cpu.md").read_text()
    assert "| 32 |" in text and "course fused" in text and "Machine:" in text


def test_gpt_benchmark_reports_identical_tokens(tmp_path):
    _run(tmp_path, "bench_gpt.py", "--repeats", "1", "--small")
    text = (tmp_path / "gpt-cpu.md").read_text()
    assert "identical tokens with and without the cache in every configuration: **yes**" in text.lower()


def test_lms_benchmark_checks_the_round_trip_and_writes_a_table(tmp_path):
    _run(tmp_path, "bench_lms.py", "--students", "30", "--assignments", "2", "--repeats", "1")
    text = (tmp_path / "lms.md").read_text()
    assert "| canvas round trip |" in text and "every round trip checked" in text and "Machine:" in text


def test_flash_benchmark_writes_the_memory_table(tmp_path):
    _run(tmp_path, "bench_flash.py", "--lengths", "64", "256", "--repeats", "1", "--block", "32",
         "--backward", "--backward-lengths", "64")
    text = (tmp_path / "flash-cpu.md").read_text()
    assert "| 256 |" in text and "naive / tiled peak" in text and "tiled / SDPA time" in text and "Machine:" in text


def test_depth_sweep_benchmark_runs_the_notebooks_sweep_over_seeds(tmp_path):
    """Notebook 07's own train_counting over seeds: the ranges its prose quotes and the claims its verdicts print."""
    _run(tmp_path, "bench_depth_sweep.py", "--seeds", "0", "1", "--depths", "1", "4", "--steps", "3")
    text = (tmp_path / "depth-sweep-cpu.md").read_text()
    assert "| residual + LayerNorm |" in text and "seeds [0, 1]" in text
    assert "| residual + LayerNorm learns at every depth | " in text and " of 2 |" in text


def test_seed_spread_benchmark_writes_notebooks_02_and_08_over_seeds(tmp_path):
    """Notebooks 01, 02, 03, 04, 06, 07 (ladder and warm-up), 08, 09, 10 and 12 over seeds: the ranges their prose states and, per conclusion, the seeds where it held."""
    _run(tmp_path, "bench_seed_spread.py", "--seeds", "0", "1", "--small")
    text02 = (tmp_path / "seed-spread-02-cpu.md").read_text()
    assert "| attention |" in text02 and "model seeds [0, 1]" in text02 and " of 2 |" in text02
    text08 = (tmp_path / "seed-spread-08-cpu.md").read_text()
    assert "| transformer |" in text08 and "| the transformer is ahead of the RNN + attention" in text08 and " of 2 |" in text08
    text01 = (tmp_path / "seed-spread-01-cpu.md").read_text()
    assert "| per-character (%) |" in text01 and "| from 14 letters on, no string is exactly right | " in text01
    text03 = (tmp_path / "seed-spread-03-cpu.md").read_text()
    assert "First step with a loss under 0.01:" in text03 and " of 2 |" in text03
    text04 = (tmp_path / "seed-spread-04-cpu.md").read_text()
    assert "| h = 2 |" in text04 and "| the two heads look to opposite sides | " in text04
    text06 = (tmp_path / "seed-spread-06-cpu.md").read_text()
    assert "| rope |" in text06 and "| without positions, test accuracy is within 5 points of chance" in text06
    text07 = (tmp_path / "seed-spread-07-cpu.md").read_text()
    assert "| Q3 + positions |" in text07 and "| Q1 and Q2 are at exactly 50 % on contrast | 2 of 2 |" in text07
    text07w = (tmp_path / "seed-spread-07w-cpu.md").read_text()
    assert "| post-LN, warm-up |" in text07w and "| pre-LN learns (test above 80 %) | " in text07w
    text09 = (tmp_path / "seed-spread-09-cpu.md").read_text()
    assert "| seed | MLM loss |" in text09 and "| 32 | test |" in text09 and " labels: the gap on test is under 2 points | " in text09
    text10 = (tmp_path / "seed-spread-10-cpu.md").read_text()
    assert "| GPT validation loss (bits per character) |" in text10 and "| GPT with the prompt picks the true continuation |" in text10
    assert "| the pretrained model is ahead of its control on test in every fine-tuning seed | " in text10 and " of 2 |" in text10
    text12 = (tmp_path / "seed-spread-12-cpu.md").read_text()
    assert re.search(r"\| test accuracy after \d+ epochs \(%\) \|", text12) and "| MoE 4 x 2d, top-2, balanced |" in text12
    assert "| 1 | no balancing |" in text12 and "| the MoE without balancing is behind the balanced one | " in text12


def test_preference_collapse_table_from_a_saved_run(tmp_path):
    measures = {"acc": 1.0, "margin": 7.5, "chosen": -0.2, "pairs": 9, "exact": 0.0, "fmt": 1 / 12, "sample": ["20190101", "2022"]}
    start = dict(measures, acc=0.0, margin=0.0, chosen=0.0)
    saved = tmp_path / "run.json"
    saved.write_text(json.dumps({"n_train": 28, "results": {"0|base, lr 1e-3": {"0": start, "24": measures},
                                                             "1|base, lr 1e-3": {"0": start, "24": measures}}}))
    _run(tmp_path, "bench_preference_seeds.py", "--collapse-from", str(saved), "--checkpoints", "24")
    text = (tmp_path / "preference-collapse-cpu.md").read_text()
    assert "| 1 | base, lr 1e-3 | 24 | 9 | 1.00 | +7.50 | -0.20 | 0% | 8% |" in text
    assert "- base, lr 1e-3, step 24 (2 seeds): pref. accuracy 1.00–1.00" in text and "28 training pairs" in text


def test_the_targets_are_modelled_from_the_per_task_seconds_when_measured(tmp_path):
    """`--part targets` reads each notebook's seconds per task and the recording cost that `--part tasks` wrote,
    ahead of the older per-notebook line of the Dask section."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_grading", ROOT / "benchmarks" / "bench_grading.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    results = tmp_path / "grading.md"
    results.write_text("Seconds per notebook: its ci execution time (...): 00 12.0, 01 18.7.\n\n"
                       "**0.00 s per batch + 0.055 s per submission**\n\n"
                       f"{bench.TASKS_LINE} 00_welcome 2.1, 01_rnn_bottleneck 5.6; recording 0.031 s per submission "
                       "(the mean over the notebooks)\n")
    durations, record = bench.measured_costs(results)
    assert durations == {"00_welcome": 2.1, "01_rnn_bottleneck": 5.6} and record == (0.0, 0.031)
    hours = bench.model(durations, 1000, 32, record)
    assert abs(hours["bound"] - 1000 * (2.1 + 5.6) / 32 / 3600) < 0.01 * hours["bound"]
