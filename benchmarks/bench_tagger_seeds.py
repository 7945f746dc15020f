"""Notebook 09's tagger (section 7) over pretraining seeds: the ranges of cell 36's ``tag_ranges`` and cell 37's prose.

    COURSE_PROFILE=cpu python benchmarks/bench_tagger_seeds.py --seeds 0 1 2 --threads 1

For each pretraining seed: ``bench_seed_spread.run_09``'s setup (the notebook's own cells, the exercises replaced by
the course's functions, ``start`` replaced by the CPU device), MLM pretraining with the seed swapped into its weights,
masking and batch order (the data and the vocabulary stay the notebook's), then the tagger cells (the one that defines
``encode_tagged`` and the one that trains and scores the tagger, unchanged). Seed 0 is the notebook's run. Prints one
line per seed and writes ``results/tagger-seeds-<profile>.md``: MLM validation loss, and the tagger's accuracy on
every word, on the DATE/NUM words and on the four-digit numbers of the test split, with the lowest and highest.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("COURSE_PROFILE", "cpu")

import torch  # noqa: E402

import bench_seed_spread as b  # noqa: E402
from _common import write_result  # noqa: E402


def run(seeds: list[int]) -> list[dict]:
    """One row per pretraining seed (the code path of the script that docs/ranges/09_bert.md embedded)."""
    import matplotlib

    matplotlib.use("Agg")
    from course_utils.profiles import choose

    NB09 = b.NB09
    not_done = "def {0}(*args, **kwargs):\n    raise NotImplementedError\n"
    prelude = "".join(not_done.format(f) for f in ("mask_tokens", "bert_embeddings", "token_classification_loss",
                                                   "mean_pool", "convert_hf_names"))
    setup = b._swap(b._cell(NB09, "device = start(seed=0)"), "device = start(seed=0)", "device = torch.device('cpu')")
    data_cells = [b._cell(NB09, "splits = corpus_splits()"), b._cell(NB09, "TAGS = [\"O\""), b._cell(NB09, "tokenizer = WordPieceTokenizer("),
                  b._cell(NB09, "mask_tokens_ = yours_or_course("), b._cell(NB09, "def pretraining_examples(")]
    pretrain = b._swap(b._cell(NB09, "def mlm_batch("), "from course_utils.progress import LiveCurve, progress", "")
    tag_cells = [b._cell(NB09, "def encode_tagged("), b._cell(NB09, "tr_ids, tr_labels = encode_tagged(")]
    quiet = {"print": lambda *a, **k: None, "LiveCurve": b._NoCurve, "progress": lambda iterable, **kwargs: iterable}
    os.environ["NBGRADER_EXECUTION"] = "1"
    rows = []
    for seed in seeds:
        t0 = time.time()
        ns: dict = {}
        exec(compile(setup + "\n" + prelude, str(NB09), "exec"), ns)
        ns.update(choose=choose, **quiet)
        for source in data_cells:
            exec(compile(source, str(NB09), "exec"), ns)
        source = b._swap(pretrain, "torch.manual_seed(0)\nmlm =", f"torch.manual_seed({seed})\nmlm =")
        source = b._swap(source, "g = torch.Generator().manual_seed(0)\norder_rng = random.Random(0)",
                         f"g = torch.Generator().manual_seed({seed})\norder_rng = random.Random({seed})")
        exec(compile(source, str(NB09), "exec"), ns)
        exec("import copy, re, statistics", ns)
        for source in tag_cells:
            exec(compile(source, str(NB09), "exec"), ns)
        row = {"seed": seed, "mlm": ns["mlm_val_loss"], "words": 100 * ns["word_acc"], "entity": 100 * ns["entity_acc"],
               "four_digit": 100 * ns["ambiguous_acc"], "n_four_digit": int(ns["four_digit"].sum()), "seconds": time.time() - t0}
        rows.append(row)
        print(f"SEED {seed}: MLM validation loss {row['mlm']:.2f}; tagger word accuracy {row['words']:.1f}%, "
              f"DATE/NUM words {row['entity']:.1f}%, four-digit numbers {row['four_digit']:.1f}% "
              f"({row['n_four_digit']}); {row['seconds']:.0f} s, {torch.get_num_threads()} thread(s)", flush=True)
    return rows


def table(rows: list[dict]) -> str:
    n = rows[0]["n_four_digit"]
    lines = [f"| pretraining seed | MLM validation loss | words | DATE/NUM words | four-digit numbers ({n}) | run (s) |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['seed']} | {r['mlm']:.2f} | {r['words']:.1f} % | {r['entity']:.1f} % | {r['four_digit']:.1f} % | "
              f"{r['seconds']:.0f} |" for r in rows]

    def span(key: str) -> str:
        return f"{min(r[key] for r in rows):.1f}–{max(r[key] for r in rows):.1f} %"
    lines += ["", f"Lowest–highest over the {len(rows)} seeds: words {span('words')}, DATE/NUM words {span('entity')}, "
              f"four-digit numbers {span('four_digit')} (cell 36's `tag_ranges` and cell 37's prose)."]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the ranges were measured at one)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    profile = os.environ["COURSE_PROFILE"]
    rows = run(args.seeds)
    body = f"""
Command: `COURSE_PROFILE={profile} python benchmarks/bench_tagger_seeds.py --seeds {' '.join(map(str, args.seeds))} --threads {args.threads}`

Notebook 09's tagger (section 7) after MLM pretraining with each seed (the MLM's weights, masking and batch order; the
data and the vocabulary are the notebook's), `{profile}` profile settings, {torch.get_num_threads()} torch thread(s);
accuracy on the test split. Seed 0 is the notebook's run.

{table(rows)}
"""
    path = write_result(f"tagger-seeds-{profile}", f"Notebook 09: the tagger over pretraining seeds ({profile} profile)", body)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
