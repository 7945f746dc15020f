"""Unit tests of course_utils.translation: the grammar's agreement, word order, negation and splits."""

import pytest
import torch

from course_utils import translation as tr
from course_utils.translation import Phrase, Sentence


def _s(subj, verb, obj, negated=False):
    return Sentence(Phrase(*subj), verb, Phrase(*obj), negated)


def test_adjective_follows_the_noun_and_agrees():
    s = _s(("car", "red", False, True), "see", ("house", "white", True, False))
    assert tr.english(s) == "the red car sees some white houses"
    assert tr.translate_sentence(s, "pt") == "o carro vermelho vê umas casas brancas"
    # the car is feminine in French: the article and the adjective follow
    assert tr.translate_sentence(s, "fr") == "la voiture rouge voit des maisons blanches"


def test_verb_agrees_with_plural_subject():
    s = _s(("cat", None, True, True), "have", ("book", "green", False, False))
    assert tr.english(s) == "the cats have a green book"
    assert tr.translate_sentence(s, "pt") == "os gatos têm um livro verde"
    assert tr.translate_sentence(s, "fr") == "les chats ont un livre vert"


def test_negation():
    s = _s(("dog", "black", False, True), "love", ("flower", None, False, False), negated=True)
    assert tr.english(s) == "the black dog does not love a flower"
    assert tr.translate_sentence(s, "pt") == "o cão preto não ama uma flor"
    # n' before a vowel, and "une" -> "de" after a negated verb
    assert tr.translate_sentence(s, "fr") == "le chien noir n'aime pas de fleur"
    s2 = _s(("horse", None, True, False), "see", ("key", "blue", True, True), negated=True)
    assert tr.english(s2) == "some horses do not see the blue keys"
    assert tr.translate_sentence(s2, "fr") == "des chevaux ne voient pas les clés bleues"
    assert tr.translate_sentence(s2, "pt") == "uns cavalos não veem as chaves azuis"


def test_unknown_language():
    with pytest.raises(ValueError):
        tr.translate_sentence(_s(("car", None, False, True), "see", ("cat", None, False, True)), "de")
    with pytest.raises(ValueError):
        tr.make_translation(10, 0, lang="xx")


@pytest.mark.parametrize("lang", tr.LANGUAGES)
def test_make_translation_splits_hold_out_combinations(lang):
    data = tr.make_translation(600, 100, lang=lang, seed=3)
    train, test = data["train"], data["test"]
    assert len(train) == 600 and len(test) == 100
    assert set(train.column_names) == {"source", "target", "length", "negated", "pairs"}
    train_pairs = {p for ps in train["pairs"] for p in ps}
    for ps in test["pairs"]:
        assert ps and any(p not in train_pairs for p in ps)  # each test sentence has an unseen combination
    assert not set(test["source"]) & set(train["source"])
    assert all(n == len(s.split()) for n, s in zip(train["length"], train["source"]))
    # deterministic
    again = tr.make_translation(600, 100, lang=lang, seed=3)
    assert list(again["train"]["target"]) == list(train["target"])
    assert list(tr.make_translation(600, 100, lang=lang, seed=4)["train"]["source"]) != list(train["source"])


def test_the_source_determines_the_target():
    data = tr.make_translation(3000, 0, lang="pt", seed=0)["train"]
    seen = {}
    for s, t in zip(data["source"], data["target"]):
        assert seen.setdefault(s, t) == t


@pytest.mark.parametrize("lang", tr.LANGUAGES)
def test_vocab_covers_every_word_and_round_trips(lang):
    vocab = tr.translation_vocab(lang)
    assert (vocab.pad_id, vocab.bos_id, vocab.eos_id, vocab.unk_id) == (0, 1, 2, 3)
    data = tr.make_translation(2000, 200, lang=lang, seed=1)
    for split in ("train", "test"):
        for text in list(data[split]["source"]) + list(data[split]["target"]):
            ids = vocab.encode(text)
            assert vocab.unk_id not in ids and ids[-1] == vocab.eos_id
            assert vocab.decode(ids) == text
            assert vocab.decode(torch.tensor([vocab.bos_id] + ids + [vocab.pad_id])) == text


def test_word_vocab_unknown_and_from_texts():
    vocab = tr.TranslationVocab.from_texts(["a b", "b c"])
    assert len(vocab) == 4 + 3
    assert vocab.encode("a zz", add_eos=False) == [4, vocab.unk_id]
    with pytest.raises(ValueError):
        tr.TranslationVocab(("a", "a"))


def test_word_vocab_shares_char_vocab_code():
    from course_utils.seq2seq_data import CharVocab

    vocab = tr.TranslationVocab(("a", "b"))
    assert isinstance(vocab, CharVocab) and vocab.words == ("a", "b") and vocab == tr.TranslationVocab(["a", "b"])
    assert repr(vocab) == "TranslationVocab(words=('a', 'b'))"
    assert vocab.tokens("a  b ") == ["a", "b"]
    # ids outside the vocabulary read as <unk>; words joined by spaces; decoding stops at <eos>
    assert vocab.decode([vocab.bos_id, 4, 99, 5, vocab.eos_id, 4]) == "a <unk> b"
    chars = CharVocab(("a", "b"))
    assert chars.decode([4, 99, vocab.unk_id, 5]) == "a??b" and chars.encode("ab c") == [4, 5, 3, 3, 2]
