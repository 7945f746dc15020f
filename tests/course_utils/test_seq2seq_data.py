"""Unit tests of course_utils.seq2seq_data (fast, offline)."""

import datetime as dt

import pytest
import torch
from datasets import Dataset, DatasetDict

from course_utils import seq2seq_data as sd


def test_char_vocab_roundtrip_and_specials():
    vocab = sd.CharVocab(tuple("abc"))
    assert len(vocab) == 7 and vocab.itos[:4] == sd.SPECIALS
    ids = vocab.encode("cab")
    assert ids == [6, 4, 5, vocab.eos_id]
    assert vocab.decode(ids + [vocab.pad_id, 4]) == "cab"  # stops at <eos>
    assert vocab.decode(torch.tensor([vocab.bos_id, 4, 5])) == "ab"
    assert vocab.encode("z", add_eos=False) == [vocab.unk_id]
    with pytest.raises(ValueError):
        sd.CharVocab(tuple("aa"))


def test_pad_sequences():
    padded, lengths = sd.pad_sequences([[5, 6, 7], [8]], pad_id=0)
    assert padded.tolist() == [[5, 6, 7], [8, 0, 0]] and lengths.tolist() == [3, 1]


@pytest.mark.parametrize(
    "fmt, text",
    [
        ("en_long", "22 November 2026"),
        ("en_us_short", "Nov 22, 2026"),
        ("en_weekday", "Sunday, November 22, 2026"),
        ("fr_long", "22 novembre 2026"),
        ("fr_weekday", "dimanche 22 novembre 2026"),
        ("pt_long", "22 de novembro de 2026"),
        ("pt_weekday", "domingo, 22 de novembro de 2026"),
        ("num_dmy_short", "22/11/26"),
        ("num_dots", "22.11.2026"),
    ],
)
def test_date_formats(fmt, text):
    assert sd.format_date(dt.date(2026, 11, 22), fmt) == text


def test_french_first_of_month():
    assert sd.format_date(dt.date(2026, 3, 1), "fr_long") == "1er mars 2026"


def test_make_dates_deterministic_held_out_and_in_vocab():
    a = sd.make_dates(300, 100, seed=3)
    b = sd.make_dates(300, 100, seed=3)
    assert isinstance(a, DatasetDict) and isinstance(a["train"], Dataset)
    assert a["train"]["source"] == b["train"]["source"] and a["test"]["target"] == b["test"]["target"]
    assert sd.make_dates(300, 100, seed=4)["train"]["source"] != a["train"]["source"]
    assert not set(a["train"]["target"]) & set(a["test"]["target"])  # test dates never seen in training
    assert set(a["train"]["language"]) == {"en", "fr", "pt", "num"}
    vocab = sd.date_vocab()
    for row in a["train"]:
        assert dt.date.fromisoformat(row["target"]).isoformat() == row["target"]
        assert vocab.unk_id not in vocab.encode(row["source"]) + vocab.encode(row["target"])


def test_make_dates_rejects_unknown_format():
    with pytest.raises(ValueError):
        sd.make_dates(5, formats=["klingon"])


@pytest.mark.parametrize("task, fn", [("reverse", lambda s: s[::-1]), ("copy", lambda s: s), ("sort", lambda s: "".join(sorted(s)))])
def test_string_task(task, fn):
    d = sd.make_string_task(200, 50, task=task, min_len=3, max_len=40, seed=1)
    assert d["train"]["source"] == sd.make_string_task(200, 50, task=task, min_len=3, max_len=40, seed=1)["train"]["source"]
    for split in ("train", "test"):
        for row in d[split]:
            assert row["target"] == fn(row["source"]) and row["length"] == len(row["source"])
            assert 3 <= row["length"] <= 40
    assert not set(d["train"]["source"]) & set(d["test"]["source"])
    lengths = d["train"]["length"]
    assert min(lengths) <= 8 and max(lengths) >= 35  # the range is really covered


def test_string_task_test_range_and_errors():
    d = sd.make_string_task(10, 20, min_len=2, max_len=5, test_min_len=30, test_max_len=31, seed=0)
    assert all(30 <= n <= 31 for n in d["test"]["length"])
    with pytest.raises(ValueError):
        sd.make_string_task(10, task="shuffle")
    with pytest.raises(ValueError):
        sd.make_string_task(10, 5, min_len=1, max_len=1, alphabet="a")  # the only string is held out


def test_encode_and_loader():
    vocab = sd.string_vocab()
    d = sd.encode_dataset(sd.make_string_task(10, task="reverse", min_len=2, max_len=6, seed=0)["train"], vocab)
    batch = next(iter(sd.make_loader(d, 4, shuffle=False)))
    assert batch["src"].shape[0] == 4 and batch["src"].dtype == torch.long
    for row in range(4):
        n = int(batch["src_len"][row])
        assert batch["src"][row, n - 1] == vocab.eos_id and (batch["src"][row, n:] == vocab.pad_id).all()
        assert vocab.decode(batch["tgt"][row]) == d[row]["target"]
    with pytest.raises(ValueError):
        sd.make_loader(d.remove_columns(["src_ids"]), 4)


def test_translation_path_offline(monkeypatch):
    """The online loader's conversion, with load_dataset replaced by a local table."""
    import datasets

    fake = Dataset.from_dict({"translation": [
        {"en": "The cat.", "pt": "O gato."},
        {"en": "A" * 100, "pt": "B"},
        {"en": "Good morning", "pt": "Bom dia"},
    ]})
    calls = {}

    def fake_load(name, config, split):
        calls.update(name=name, config=config, split=split)
        return fake

    monkeypatch.setattr(datasets, "load_dataset", fake_load)
    pairs = sd.load_translation_pairs("en", "pt", max_chars=20)
    assert calls == {"name": "Helsinki-NLP/opus-100", "config": "en-pt", "split": "train"}
    assert pairs["source"] == ["the cat.", "good morning"] and pairs["target"] == ["o gato.", "bom dia"]
    assert pairs["length"] == [8, 12]
