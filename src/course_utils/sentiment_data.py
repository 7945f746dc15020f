"""A generated sentiment set where word order matters (notebooks 07, 09, 10).

Sentences are lower-case, tokens separated by single spaces. ``label`` is 1 (positive) or
0 (negative). Five templates, the last two of which come in *contrast pairs* -- two sentences
with exactly the same bag of words and opposite labels, so only the position of "not"
decides::

    verb          "i enjoyed the film"                     / "i did not enjoy the film"
    adjective     "the plot was dull"                      / "the plot was not dull at all"
    contrast      "the film was not bad , it was great" (1) / "the film was bad , it was not great" (0)
    scope         "i did not expect that i would enjoy it" (1) / "i did expect that i would not enjoy it" (0)

:func:`make_sentiment` returns a :class:`datasets.DatasetDict` with three splits:

- ``train`` and ``test``: all templates, i.i.d. (test sentences never occur in train);
- ``contrast``: held-out contrast pairs whose bag of words never occurs in train or test,
  both members of every pair. **Any bag-of-words classifier scores exactly 50% on it**
  (both members get the same prediction), so accuracy above 50% there needs word order.

:class:`WordVocab` maps words to ids (``[PAD]`` = 0, ``[UNK]``, ``[CLS]``, ``[SEP]``,
``[MASK]``); :func:`sentiment_batches` gives padded tensors. :func:`load_imdb` is the real
(online) alternative; it is never used by tests.

Where pretraining should help (notebook 09): :func:`make_unseen_words` draws labelled sentences
whose sentiment is carried by words that :func:`make_sentiment` **never** uses -- synonyms
("superb", "dreadful", "despised") and paraphrases ("i wouldn't call it good", "far from
great") -- and :func:`make_reviews` draws *unlabelled* multi-sentence reviews, each of one
polarity, in which the seen and the unseen words occur together (a pretraining corpus: the
words may be learnt from it, their labels may not).
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Iterable, Iterator, Sequence

import torch
from datasets import Dataset, DatasetDict

__all__ = [
    "PAD", "UNK", "CLS", "SEP", "MASK", "SPECIALS",
    "TEMPLATES", "make_sentiment", "WordVocab", "encode_texts", "sentiment_batches",
    "bag_of_words_accuracy", "load_imdb",
    "UNSEEN_POSITIVE_ADJ", "UNSEEN_NEGATIVE_ADJ", "UNSEEN_VERBS", "UNSEEN_TEMPLATES",
    "make_unseen_words", "make_reviews", "labelled_vocabulary",
]

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIALS = (PAD, UNK, CLS, SEP, MASK)

SUBJECTS = ("i", "we", "she", "he", "they", "everyone")
OBJECTS = ("it", "the film", "the movie", "the show", "the book", "the play")
# (base form, past form, polarity)
VERBS = (
    ("like", "liked", 1), ("enjoy", "enjoyed", 1), ("love", "loved", 1), ("adore", "adored", 1),
    ("recommend", "recommended", 1),
    ("hate", "hated", 0), ("dislike", "disliked", 0), ("regret", "regretted", 0),
    ("loathe", "loathed", 0), ("resent", "resented", 0),
)
POSITIVE_ADJ = ("good", "great", "fun", "brilliant", "charming", "moving")
NEGATIVE_ADJ = ("bad", "boring", "awful", "dull", "terrible", "bland")
EXPECT = ("know", "think", "expect")
TEMPLATES = ("verb", "adjective", "contrast", "scope")


def _adjective(rng: random.Random) -> tuple[str, int]:
    if rng.random() < 0.5:
        return rng.choice(POSITIVE_ADJ), 1
    return rng.choice(NEGATIVE_ADJ), 0


def _verb_pair(rng: random.Random) -> tuple[tuple[str, int], tuple[str, int]]:
    s, obj = rng.choice(SUBJECTS), rng.choice(OBJECTS)
    base, past, pol = rng.choice(VERBS)
    return (f"{s} {past} {obj}", pol), (f"{s} did not {base} {obj}", 1 - pol)


def _adjective_pair(rng: random.Random) -> tuple[tuple[str, int], tuple[str, int]]:
    obj = rng.choice(OBJECTS)
    adj, pol = _adjective(rng)
    tail = " at all" if rng.random() < 0.5 else ""
    return (f"{obj} was {adj}", pol), (f"{obj} was not {adj}{tail}", 1 - pol)


def _contrast_pair(rng: random.Random) -> tuple[tuple[str, int], tuple[str, int]]:
    obj = rng.choice(OBJECTS)
    if rng.random() < 0.5:  # "not bad , it was great"
        a, b, pol_b = rng.choice(NEGATIVE_ADJ), rng.choice(POSITIVE_ADJ), 1
    else:  # "not great , it was bad"
        a, b, pol_b = rng.choice(POSITIVE_ADJ), rng.choice(NEGATIVE_ADJ), 0
    # the label follows the adjective that is *not* negated
    return (f"{obj} was not {a} , it was {b}", pol_b), (f"{obj} was {a} , it was not {b}", 1 - pol_b)


def _scope_pair(rng: random.Random) -> tuple[tuple[str, int], tuple[str, int]]:
    s, s2, obj = rng.choice(SUBJECTS), rng.choice(SUBJECTS), rng.choice(OBJECTS)
    think = rng.choice(EXPECT)
    base, _, pol = rng.choice(VERBS)
    # "did not expect that i would enjoy it": the negation scopes over "expect", not "enjoy"
    return (
        (f"{s} did not {think} that {s2} would {base} {obj}", pol),
        (f"{s} did {think} that {s2} would not {base} {obj}", 1 - pol),
    )


_MAKERS = {"verb": _verb_pair, "adjective": _adjective_pair, "contrast": _contrast_pair, "scope": _scope_pair}
_MIX = (("verb", 0.2), ("adjective", 0.15), ("contrast", 0.3), ("scope", 0.35))
_PAIRED = ("contrast", "scope")  # the two members share a bag of words


def _bag(text: str) -> str:
    return " ".join(sorted(text.split()))


def _held_out(text: str, fraction: float, seed: int) -> bool:
    """Deterministic, seed-dependent choice of the bags reserved for the contrast split."""
    digest = hashlib.sha256(f"{seed}:{_bag(text)}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


def make_sentiment(
    n_train: int = 4000,
    n_test: int = 1000,
    n_contrast: int = 1000,
    *,
    seed: int = 0,
    held_out_fraction: float = 0.2,
) -> DatasetDict:
    """Generate ``train`` / ``test`` / ``contrast`` splits; columns ``text``, ``label``, ``template``.

    Deterministic given ``seed``. ``n_contrast`` is rounded down to an even number (pairs).
    """
    rng = random.Random(seed)
    names = [name for name, _ in _MIX]
    weights = [weight for _, weight in _MIX]

    def draw_iid(n: int, avoid: set[str] | None) -> dict[str, list]:
        """``n`` rows outside the held-out bags; with ``avoid``, distinct and never in ``avoid``."""
        rows: dict[str, list] = {"text": [], "label": [], "template": []}
        budget = 200 * n + 1000
        while len(rows["text"]) < n and budget:
            budget -= 1
            name = rng.choices(names, weights)[0]
            text, label = rng.choice(_MAKERS[name](rng))
            if _held_out(text, held_out_fraction, seed) and name in _PAIRED:
                continue
            if avoid is not None:
                if text in avoid:
                    continue
                avoid.add(text)
            rows["text"].append(text)
            rows["label"].append(label)
            rows["template"].append(name)
        if len(rows["text"]) < n:
            raise ValueError("could not draw enough distinct sentences; ask for fewer")
        return rows

    train = draw_iid(n_train, None)
    test = draw_iid(n_test, set(train["text"]))

    contrast: dict[str, list] = {"text": [], "label": [], "template": []}
    seen_bags: set[str] = set()
    budget = 200 * n_contrast + 1000
    while len(contrast["text"]) + 1 < n_contrast and budget:
        budget -= 1
        name = rng.choice(_PAIRED)
        pair = _MAKERS[name](rng)
        bag = _bag(pair[0][0])
        if bag in seen_bags or not _held_out(pair[0][0], held_out_fraction, seed):
            continue
        seen_bags.add(bag)
        for text, label in pair:
            contrast["text"].append(text)
            contrast["label"].append(label)
            contrast["template"].append(name)
    return DatasetDict({k: Dataset.from_dict(v) for k, v in (("train", train), ("test", test), ("contrast", contrast))})


# --------------------------------------------------------------------------- vocabulary
@dataclass(frozen=True)
class WordVocab:
    """Words <-> ids. Ids 0..4 are ``[PAD]``, ``[UNK]``, ``[CLS]``, ``[SEP]``, ``[MASK]``."""

    words: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {w: i for i, w in enumerate(self.itos)})

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> "WordVocab":
        words = sorted({w for t in texts for w in t.split()} - set(SPECIALS))
        return cls(tuple(words))

    @property
    def itos(self) -> tuple[str, ...]:
        return SPECIALS + self.words

    pad_id, unk_id, cls_id, sep_id, mask_id = 0, 1, 2, 3, 4

    def __len__(self) -> int:
        return len(SPECIALS) + len(self.words)

    def encode(self, text: str, *, add_cls: bool = False) -> list[int]:
        index = self._index  # type: ignore[attr-defined]
        ids = [index.get(w, self.unk_id) for w in text.split()]
        return [self.cls_id] + ids if add_cls else ids

    def decode(self, ids: Sequence[int] | torch.Tensor) -> str:
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        return " ".join(self.itos[int(i)] for i in ids if int(i) != self.pad_id)


def encode_texts(texts: Sequence[str], vocab: WordVocab, *, add_cls: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ids ``(B, T_max)`` and a boolean ``(B, T_max)`` mask, True on real tokens."""
    seqs = [vocab.encode(t, add_cls=add_cls) for t in texts]
    T = max(len(s) for s in seqs)
    ids = torch.tensor([s + [vocab.pad_id] * (T - len(s)) for s in seqs], dtype=torch.long)
    return ids, ids != vocab.pad_id


def sentiment_batches(
    ds: Dataset,
    vocab: WordVocab,
    batch_size: int,
    *,
    shuffle: bool = True,
    seed: int = 0,
    add_cls: bool = False,
    device: torch.device | str = "cpu",
) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Yield ``(ids (B, T), real (B, T) bool, labels (B,))`` over ``ds`` once."""
    order = list(range(len(ds)))
    if shuffle:
        random.Random(seed).shuffle(order)
    texts, labels = list(ds["text"]), list(ds["label"])  # plain lists: indexing a Column row by row is slow
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        ids, real = encode_texts([texts[i] for i in idx], vocab, add_cls=add_cls)
        y = torch.tensor([labels[i] for i in idx], dtype=torch.long)
        yield ids.to(device), real.to(device), y.to(device)


def bag_of_words_accuracy(train: Dataset, evaluate: Dataset, *, epochs: int = 200, seed: int = 0) -> float:
    """Train a logistic regression on word counts (full batch, Adam) and return its accuracy on ``evaluate``.

    The order-blind baseline of the notebook 07 ladder.
    """
    vocab = WordVocab.from_texts(train["text"])
    def counts(texts: Sequence[str]) -> torch.Tensor:
        rows = [row for row, t in enumerate(texts) for _ in t.split()]
        cols = [i for t in texts for i in vocab.encode(t)]
        x = torch.zeros(len(texts), len(vocab))
        x.index_put_((torch.tensor(rows, dtype=torch.long), torch.tensor(cols, dtype=torch.long)),
                     torch.ones(len(cols)), accumulate=True)
        return x
    gen = torch.Generator().manual_seed(seed)
    x, y = counts(train["text"]), torch.tensor(train["label"], dtype=torch.float32)
    w = (0.01 * torch.randn(len(vocab), generator=gen)).requires_grad_()
    b = torch.zeros((), requires_grad=True)
    opt = torch.optim.Adam([w, b], lr=0.1)
    for _ in range(epochs):
        opt.zero_grad()
        torch.nn.functional.binary_cross_entropy_with_logits(x @ w + b, y).backward()
        opt.step()
    with torch.no_grad():
        pred = (counts(evaluate["text"]) @ w + b > 0).long()
    return float((pred == torch.tensor(evaluate["label"])).float().mean())


# --------------------------------------------------------------------------- unseen words
UNSEEN_POSITIVE_ADJ = ("superb", "wonderful", "excellent", "delightful", "splendid", "marvellous")
UNSEEN_NEGATIVE_ADJ = ("dreadful", "horrible", "dismal", "tedious", "mediocre", "atrocious")
UNSEEN_VERBS = (
    ("cherish", "cherished", 1), ("admire", "admired", 1), ("treasure", "treasured", 1),
    ("despise", "despised", 0), ("detest", "detested", 0), ("abhor", "abhorred", 0),
)
UNSEEN_TEMPLATES = ("synonym", "paraphrase")
_PARAPHRASES = ("i wouldn't call {obj} {adj}", "{obj} was far from {adj}", "{obj} was hardly {adj}")


def labelled_vocabulary() -> set[str]:
    """Every word :func:`make_sentiment` can produce, whatever its sizes and seed."""
    words = {w for group in (SUBJECTS, OBJECTS, POSITIVE_ADJ, NEGATIVE_ADJ, EXPECT) for item in group for w in item.split()}
    words |= {w for base, past, _ in VERBS for w in (base, past)}
    return words | {"did", "not", "was", "at", "all", ",", "it", "that", "would"}


def _unseen_sentence(rng: random.Random, template: str, polarity: int, *, seen_ok: bool = False) -> str:
    """One sentence of ``polarity``; with ``seen_ok`` it may also use the labelled lexicon."""
    pos = UNSEEN_POSITIVE_ADJ + (POSITIVE_ADJ if seen_ok else ())
    neg = UNSEEN_NEGATIVE_ADJ + (NEGATIVE_ADJ if seen_ok else ())
    verbs = UNSEEN_VERBS + (VERBS if seen_ok else ())
    obj = rng.choice(OBJECTS)
    if template == "paraphrase":   # a negating construction the labelled data never uses
        adj = rng.choice(UNSEEN_NEGATIVE_ADJ + NEGATIVE_ADJ if polarity else UNSEEN_POSITIVE_ADJ + POSITIVE_ADJ)
        return rng.choice(_PARAPHRASES).format(obj=obj, adj=adj)
    form = rng.randrange(4)
    if form == 0:
        return f"{obj} was {rng.choice(pos if polarity else neg)}"
    if form == 1:
        return f"{obj} was not {rng.choice(neg if polarity else pos)}"
    base, past, pol = rng.choice([v for v in verbs if v[2] == polarity] if form == 2 else
                                 [v for v in verbs if v[2] != polarity])
    s = rng.choice(SUBJECTS)
    return f"{s} {past} {obj}" if form == 2 else f"{s} did not {base} {obj}"


def make_unseen_words(n: int = 500, *, seed: int = 1) -> Dataset:
    """``n`` distinct labelled sentences (columns ``text``, ``label``, ``template``) whose sentiment
    words never occur in :func:`make_sentiment`'s output.

    ``synonym``: the labelled templates with unseen adjectives and verbs ("the film was superb",
    "she did not despise it"); ``paraphrase``: unseen negating constructions around any adjective
    ("i wouldn't call the film good", "the play was far from superb"). Every sentence has at least
    one word outside :func:`labelled_vocabulary`, and its label depends on such a word.
    Balanced labels, half of each template (``n`` rounded down to a multiple of 4).
    """
    rng = random.Random(seed)
    rows: dict[str, list] = {"text": [], "label": [], "template": []}
    seen: set[str] = set()
    for i in range(n - n % 4):
        template, label = UNSEEN_TEMPLATES[i % 2], (i // 2) % 2
        for _ in range(1000):
            text = _unseen_sentence(rng, template, label)
            if text not in seen:
                break
        else:
            raise ValueError("could not draw enough distinct sentences; ask for fewer")
        seen.add(text)
        rows["text"].append(text)
        rows["label"].append(label)
        rows["template"].append(template)
    return Dataset.from_dict(rows)


def _plain_sentence(rng: random.Random, polarity: int) -> str:
    """An affirmative sentence of ``polarity`` mixing seen and unseen words: "the film was superb and great"."""
    pos, neg = UNSEEN_POSITIVE_ADJ + POSITIVE_ADJ, UNSEEN_NEGATIVE_ADJ + NEGATIVE_ADJ
    adjs = pos if polarity else neg
    verbs = [v for v in UNSEEN_VERBS + VERBS if v[2] == polarity]
    obj, s = rng.choice(OBJECTS), rng.choice(SUBJECTS)
    form = rng.randrange(4)
    if form == 0:
        return f"{obj} was {rng.choice(adjs)}"
    if form == 1:
        a, b, c = rng.sample(adjs, 3)
        return f"{obj} was {a} , {b} and {c}"
    if form == 2:
        return f"{s} {rng.choice(verbs)[1]} {obj}"
    return f"{s} {rng.choice(verbs)[1]} {obj} , it was {rng.choice(adjs)}"


def make_reviews(n: int = 2000, *, seed: int = 2, sentences: tuple[int, int] = (3, 5), plain: float = 0.7,
                 avoid: Iterable[str] = ()) -> Dataset:
    """``n`` unlabelled reviews (column ``text``): each joins 3 to 5 sentences of ONE polarity, mixing
    the labelled lexicon with the unseen synonyms and paraphrases, so that "superb" keeps company with
    "great" and "loved". A fraction ``plain`` of the sentences are affirmative ("the film was superb and
    great", "she cherished it , it was brilliant"), the rest use negation or a paraphrase ("i did not
    detest the play", "the show was far from dull"). Sentences in ``avoid`` (e.g. an evaluation split)
    are never used."""
    rng = random.Random(seed)
    avoid = set(avoid)
    texts: list[str] = []
    while len(texts) < n:
        polarity = rng.randrange(2)
        parts: list[str] = []
        while len(parts) < rng.randint(*sentences):
            if rng.random() < plain:
                text = _plain_sentence(rng, polarity)
            else:
                template = rng.choice(("synonym", "paraphrase"))
                text = _unseen_sentence(rng, template, polarity, seen_ok=True)
            if text not in avoid:
                parts.append(text)
        texts.append(" . ".join(parts) + " .")
    return Dataset.from_dict({"text": texts})


def load_imdb(split: str = "train", n: int | None = None) -> Dataset:  # pragma: no cover - needs the hub
    """IMDB reviews through ``datasets`` (online only), with the columns ``text`` and ``label``."""
    from datasets import load_dataset

    ds = load_dataset("imdb", split=split)
    if n is not None:
        ds = ds.shuffle(seed=0).select(range(min(n, len(ds))))
    return ds.map(lambda row: {"text": " ".join(row["text"].lower().split())})
