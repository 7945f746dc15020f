"""Unit tests of course_utils.sentiment_data: determinism, the contrast split's promise, vocab and batches."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from course_utils.sentiment_data import (
    SPECIALS,
    WordVocab,
    bag_of_words_accuracy,
    encode_texts,
    make_sentiment,
    sentiment_batches,
)


@pytest.fixture(scope="module")
def data():
    return make_sentiment(n_train=800, n_test=200, n_contrast=200, seed=0)


def test_deterministic_given_seed(data):
    again = make_sentiment(n_train=800, n_test=200, n_contrast=200, seed=0)
    for split in data:
        assert data[split]["text"] == again[split]["text"]
        assert data[split]["label"] == again[split]["label"]
    other = make_sentiment(n_train=800, n_test=200, n_contrast=200, seed=1)
    assert other["train"]["text"] != data["train"]["text"]


def test_split_sizes_and_labels(data):
    assert (len(data["train"]), len(data["test"]), len(data["contrast"])) == (800, 200, 200)
    for split in data:
        assert set(data[split]["label"]) <= {0, 1}


def test_contrast_pairs_share_bag_of_words_with_opposite_labels(data):
    texts, labels = data["contrast"]["text"], data["contrast"]["label"]
    assert len(texts) % 2 == 0
    for i in range(0, len(texts), 2):
        assert Counter(texts[i].split()) == Counter(texts[i + 1].split()), (texts[i], texts[i + 1])
        assert texts[i] != texts[i + 1]
        assert labels[i] != labels[i + 1]


def test_contrast_bags_never_seen_in_train_or_test(data):
    bag = lambda t: " ".join(sorted(t.split()))  # noqa: E731
    seen = {bag(t) for split in ("train", "test") for t in data[split]["text"]}
    assert not any(bag(t) in seen for t in data["contrast"]["text"])


def test_test_texts_not_in_train(data):
    assert not set(data["test"]["text"]) & set(data["train"]["text"])


def test_bag_of_words_is_exactly_half_on_contrast(data):
    assert bag_of_words_accuracy(data["train"], data["contrast"], epochs=50) == 0.5


def test_word_vocab_and_encoding(data):
    vocab = WordVocab.from_texts(data["train"]["text"])
    assert vocab.itos[: len(SPECIALS)] == SPECIALS and vocab.pad_id == 0
    text = data["train"]["text"][0]
    assert vocab.decode(vocab.encode(text)) == text
    assert vocab.encode(text, add_cls=True)[0] == vocab.cls_id
    assert vocab.encode("zzzunknown")[0] == vocab.unk_id
    ids, real = encode_texts(["i liked it", "it was not good at all"], vocab)
    assert ids.shape == (2, 6) and real.dtype == torch.bool
    assert real.sum(1).tolist() == [3, 6] and (ids[~real] == vocab.pad_id).all()


def test_sentiment_batches_cover_the_split_once(data):
    vocab = WordVocab.from_texts(data["train"]["text"])
    batches = list(sentiment_batches(data["test"], vocab, 64, seed=3))
    assert sum(len(y) for _, _, y in batches) == len(data["test"])
    ids, real, y = batches[0]
    assert ids.shape == real.shape and ids.shape[0] == y.shape[0] == 64
    first = list(sentiment_batches(data["test"], vocab, 64, seed=3))[0][0]
    assert torch.equal(first, ids)


# --------------------------------------------------------------------------- unseen words (notebook 09)
def test_unseen_words_never_occur_in_labelled_data():
    from course_utils.sentiment_data import (UNSEEN_NEGATIVE_ADJ, UNSEEN_POSITIVE_ADJ, UNSEEN_VERBS,
                                             labelled_vocabulary, make_unseen_words)

    labelled = {w for seed in (0, 1) for split in make_sentiment(n_train=2000, n_test=300, n_contrast=300, seed=seed).values()
                for t in split["text"] for w in t.split()}
    assert labelled <= labelled_vocabulary()
    unseen_lexicon = set(UNSEEN_POSITIVE_ADJ + UNSEEN_NEGATIVE_ADJ) | {w for b, p, _ in UNSEEN_VERBS for w in (b, p)}
    assert not unseen_lexicon & labelled
    ds = make_unseen_words(400, seed=1)
    assert len(ds) == 400 and len(set(ds["text"])) == 400
    assert sum(ds["label"]) == 200 and ds["template"].count("paraphrase") == 200
    for text in ds["text"]:
        assert set(text.split()) - labelled, text          # every sentence has a word the labels never show
    assert make_unseen_words(400, seed=1)["text"] == ds["text"]


def test_unseen_words_labels_follow_the_words():
    from course_utils.sentiment_data import UNSEEN_NEGATIVE_ADJ, UNSEEN_POSITIVE_ADJ, make_unseen_words

    ds = make_unseen_words(200, seed=3)
    for text, label in zip(ds["text"], ds["label"]):
        words = text.split()
        negated = "not" in words or "far" in words or "hardly" in words or "wouldn't" in words
        if words[-1] in UNSEEN_POSITIVE_ADJ:
            assert label == (0 if negated else 1), text
        if words[-1] in UNSEEN_NEGATIVE_ADJ:
            assert label == (1 if negated else 0), text


def test_reviews_are_unlabelled_one_polarity_and_avoid_a_split():
    from course_utils.sentiment_data import (UNSEEN_NEGATIVE_ADJ, UNSEEN_POSITIVE_ADJ, make_reviews,
                                             make_unseen_words)

    unseen = make_unseen_words(200, seed=1)
    reviews = make_reviews(300, seed=2, avoid=unseen["text"])
    assert reviews.column_names == ["text"] and len(reviews) == 300
    sentences = {s.strip() for r in reviews["text"] for s in r.split(" .") if s.strip()}
    assert not sentences & set(unseen["text"])
    words = {w for r in reviews["text"] for w in r.split()}
    assert set(UNSEEN_POSITIVE_ADJ + UNSEEN_NEGATIVE_ADJ) <= words and {"great", "boring"} <= words
    for review in reviews["text"]:   # plain "was <adj>" sentences of one review agree in polarity
        plain = [s.split()[-1] for s in review.split(" .") if " was " in s and not any(
            m in s for m in (" not ", " far ", " hardly "))]
        pol = {w in UNSEEN_POSITIVE_ADJ + ("good", "great", "fun", "brilliant", "charming", "moving") for w in plain}
        assert len(pol) <= 1, review


def test_reviews_plain_fraction():
    from course_utils.sentiment_data import make_reviews

    plain = make_reviews(200, seed=3, plain=1.0)
    sentences = [s for r in plain["text"] for s in r.split(" .") if s.strip()]
    assert not any(m in s for s in sentences for m in (" not ", " far from ", " hardly ", "wouldn't"))
    mixed = make_reviews(200, seed=3, plain=0.0)
    negated = [s for r in mixed["text"] for s in r.split(" .") if s.strip() and " was " in s and "," in s and " and " in s]
    assert not negated   # the list form "was a , b and c" only comes from plain sentences
    assert make_reviews(50, seed=4)["text"] == make_reviews(50, seed=4)["text"]
