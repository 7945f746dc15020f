"""Offline English -> Portuguese / French translation from a small grammar (notebook 08).

Real translation reorders words and makes them agree; string reversal does neither. This
module generates sentence pairs that do both, deterministically and without any download:

- the adjective follows the noun: ``"the red car"`` -> ``"o carro vermelho"`` / ``"la voiture rouge"``;
- gender and number agreement of articles and adjectives with their noun (and the noun's
  gender may differ between the languages: *o carro*, *la voiture*), and of the verb with its
  subject (``"the cats see"`` -> ``"os gatos veem"`` / ``"les chats voient"``);
- negation: ``"does not see"`` -> ``"não vê"`` / ``"ne voit pas"`` (``n'`` before a vowel, and
  French ``un``/``une``/``des`` become ``de`` after a negated verb).

A sentence is ``subject verb object``, each noun phrase ``article [adjective] noun``. Tokens are
lower-case words separated by single spaces, so :class:`TranslationVocab` (same interface and special
ids as :class:`course_utils.seq2seq_data.CharVocab`) turns them into ids.

- :func:`make_translation` -- a ``DatasetDict`` with ``train`` and ``test`` splits whose test
  sentences each contain a (noun, adjective) combination that never occurs in ``train``.
- :func:`translation_vocab` -- every word the grammar can write, English and target language.
- :func:`translate_sentence` -- the grammar's own translation of a parsed sentence (the reference).

:func:`course_utils.seq2seq_data.load_translation_pairs` is the online alternative (OPUS-100 EN->PT).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Iterable, Sequence

from datasets import Dataset, DatasetDict

from course_utils.seq2seq_data import CharVocab

__all__ = [
    "LANGUAGES",
    "NOUNS",
    "ADJECTIVES",
    "VERBS",
    "Phrase",
    "Sentence",
    "TranslationVocab",
    "english",
    "translate_sentence",
    "random_sentence",
    "make_translation",
    "translation_vocab",
]

LANGUAGES = ("pt", "fr")

# English singular, English plural, then per language (gender, singular, plural).
NOUNS: dict[str, dict] = {
    "car": {"en": ("car", "cars"), "pt": ("m", "carro", "carros"), "fr": ("f", "voiture", "voitures")},
    "dog": {"en": ("dog", "dogs"), "pt": ("m", "cão", "cães"), "fr": ("m", "chien", "chiens")},
    "cat": {"en": ("cat", "cats"), "pt": ("m", "gato", "gatos"), "fr": ("m", "chat", "chats")},
    "house": {"en": ("house", "houses"), "pt": ("f", "casa", "casas"), "fr": ("f", "maison", "maisons")},
    "book": {"en": ("book", "books"), "pt": ("m", "livro", "livros"), "fr": ("m", "livre", "livres")},
    "cow": {"en": ("cow", "cows"), "pt": ("f", "vaca", "vacas"), "fr": ("f", "vache", "vaches")},
    "rabbit": {"en": ("rabbit", "rabbits"), "pt": ("m", "coelho", "coelhos"), "fr": ("m", "lapin", "lapins")},
    "flower": {"en": ("flower", "flowers"), "pt": ("f", "flor", "flores"), "fr": ("f", "fleur", "fleurs")},
    "table": {"en": ("table", "tables"), "pt": ("f", "mesa", "mesas"), "fr": ("f", "table", "tables")},
    "horse": {"en": ("horse", "horses"), "pt": ("m", "cavalo", "cavalos"), "fr": ("m", "cheval", "chevaux")},
    "key": {"en": ("key", "keys"), "pt": ("f", "chave", "chaves"), "fr": ("f", "clé", "clés")},
    "mouse": {"en": ("mouse", "mice"), "pt": ("m", "rato", "ratos"), "fr": ("f", "souris", "souris")},
}

# English, then per language the forms (masc. sg, fem. sg, masc. pl, fem. pl). All of them
# follow the noun in Portuguese and in French.
ADJECTIVES: dict[str, dict] = {
    "red": {"pt": ("vermelho", "vermelha", "vermelhos", "vermelhas"), "fr": ("rouge", "rouge", "rouges", "rouges")},
    "black": {"pt": ("preto", "preta", "pretos", "pretas"), "fr": ("noir", "noire", "noirs", "noires")},
    "white": {"pt": ("branco", "branca", "brancos", "brancas"), "fr": ("blanc", "blanche", "blancs", "blanches")},
    "green": {"pt": ("verde", "verde", "verdes", "verdes"), "fr": ("vert", "verte", "verts", "vertes")},
    "blue": {"pt": ("azul", "azul", "azuis", "azuis"), "fr": ("bleu", "bleue", "bleus", "bleues")},
    "yellow": {"pt": ("amarelo", "amarela", "amarelos", "amarelas"), "fr": ("jaune", "jaune", "jaunes", "jaunes")},
    "tired": {"pt": ("cansado", "cansada", "cansados", "cansadas"), "fr": ("fatigué", "fatiguée", "fatigués", "fatiguées")},
    "happy": {"pt": ("feliz", "feliz", "felizes", "felizes"), "fr": ("content", "contente", "contents", "contentes")},
}

# English (3rd sg, base), then per language (3rd sg, 3rd pl).
VERBS: dict[str, dict] = {
    "see": {"en": ("sees", "see"), "pt": ("vê", "veem"), "fr": ("voit", "voient")},
    "love": {"en": ("loves", "love"), "pt": ("ama", "amam"), "fr": ("aime", "aiment")},
    "want": {"en": ("wants", "want"), "pt": ("quer", "querem"), "fr": ("veut", "veulent")},
    "find": {"en": ("finds", "find"), "pt": ("encontra", "encontram"), "fr": ("trouve", "trouvent")},
    "follow": {"en": ("follows", "follow"), "pt": ("segue", "seguem"), "fr": ("suit", "suivent")},
    "have": {"en": ("has", "have"), "pt": ("tem", "têm"), "fr": ("a", "ont")},
}

# (definite, plural) -> article; gender index 0 = masculine, 1 = feminine
_ARTICLES = {
    "en": {(True, False): ("the", "the"), (True, True): ("the", "the"), (False, False): ("a", "a"), (False, True): ("some", "some")},
    "pt": {(True, False): ("o", "a"), (True, True): ("os", "as"), (False, False): ("um", "uma"), (False, True): ("uns", "umas")},
    "fr": {(True, False): ("le", "la"), (True, True): ("les", "les"), (False, False): ("un", "une"), (False, True): ("des", "des")},
}
_VOWELS = set("aeiouéèêh")


@dataclass(frozen=True)
class Phrase:
    """A noun phrase: ``article [adjective] noun``."""

    noun: str
    adjective: str | None = None
    plural: bool = False
    definite: bool = True


@dataclass(frozen=True)
class Sentence:
    """``subject verb object``, optionally negated."""

    subject: Phrase
    verb: str
    obj: Phrase
    negated: bool = False


def _phrase(p: Phrase, lang: str, *, negated_object: bool = False) -> list[str]:
    """Words of a noun phrase in ``lang`` (``"en"``, ``"pt"`` or ``"fr"``)."""
    if lang == "en":
        noun = NOUNS[p.noun]["en"][int(p.plural)]
        article = _ARTICLES["en"][(p.definite, p.plural)][0]
        return [article] + ([p.adjective] if p.adjective else []) + [noun]
    gender, sg, pl = NOUNS[p.noun][lang]
    g = int(gender == "f")
    article = _ARTICLES[lang][(p.definite, p.plural)][g]
    if lang == "fr" and negated_object and not p.definite:
        article = "de"  # "il ne voit pas de chien": un / une / des -> de after a negated verb
    words = [article, pl if p.plural else sg]
    if p.adjective:
        words.append(ADJECTIVES[p.adjective][lang][2 * int(p.plural) + g])  # after the noun
    return words


def english(s: Sentence) -> str:
    """The English sentence: ``"the red cars do not see a dog"``."""
    verb = VERBS[s.verb]["en"]
    if s.negated:
        verb_words = ["do" if s.subject.plural else "does", "not", verb[1]]
    else:
        verb_words = [verb[1] if s.subject.plural else verb[0]]
    return " ".join(_phrase(s.subject, "en") + verb_words + _phrase(s.obj, "en"))


def translate_sentence(s: Sentence, lang: str) -> str:
    """The grammar's translation of ``s`` into ``lang`` (``"pt"`` or ``"fr"``)."""
    if lang not in LANGUAGES:
        raise ValueError(f"unknown language {lang!r}; choose from {LANGUAGES}")
    verb = VERBS[s.verb][lang][int(s.subject.plural)]
    if not s.negated:
        verb_words = [verb]
    elif lang == "pt":
        verb_words = ["não", verb]
    else:
        verb_words = (["n'" + verb] if verb[0] in _VOWELS else ["ne", verb]) + ["pas"]
    return " ".join(_phrase(s.subject, lang) + verb_words + _phrase(s.obj, lang, negated_object=s.negated))


def random_sentence(rng: random.Random, *, p_adjective: float = 0.7, p_plural: float = 0.4, p_negation: float = 0.3) -> Sentence:
    """One sentence drawn uniformly over words and with the given probabilities of features."""
    nouns, adjectives = sorted(NOUNS), sorted(ADJECTIVES)

    def phrase() -> Phrase:
        return Phrase(
            noun=rng.choice(nouns),
            adjective=rng.choice(adjectives) if rng.random() < p_adjective else None,
            plural=rng.random() < p_plural,
            definite=rng.random() < 0.6,
        )

    return Sentence(phrase(), rng.choice(sorted(VERBS)), phrase(), rng.random() < p_negation)


def _pairs(s: Sentence) -> set[tuple[str, str]]:
    return {(p.noun, p.adjective) for p in (s.subject, s.obj) if p.adjective}


def make_translation(
    n_train: int,
    n_test: int = 0,
    *,
    lang: str = "pt",
    seed: int = 0,
    held_out: float = 0.15,
    p_adjective: float = 0.7,
    p_plural: float = 0.4,
    p_negation: float = 0.3,
) -> DatasetDict:
    """English -> ``lang`` sentence pairs from the grammar, as ``train`` and ``test`` splits.

    Columns: ``source`` (English), ``target`` (``lang``), ``length`` (source words),
    ``negated`` (bool), ``pairs`` (the sentence's ``"noun+adjective"`` combinations).
    A fraction ``held_out`` of the (noun, adjective) combinations is reserved for the test
    split: every test sentence contains at least one of them and no train sentence contains
    any, so the test measures whether agreement and word order *generalise* to new
    combinations (both words were seen in training, never together). Test sentences never
    occur in train. Deterministic given ``seed``.
    """
    if lang not in LANGUAGES:
        raise ValueError(f"unknown language {lang!r}; choose from {LANGUAGES}")
    if not 0.0 < held_out < 1.0 and n_test:
        raise ValueError("held_out must be in (0, 1) when a test split is asked for")
    rng = random.Random(seed)
    combos = sorted((n, a) for n in NOUNS for a in ADJECTIVES)
    rng.shuffle(combos)
    reserved = set(combos[: max(1, round(held_out * len(combos)))]) if n_test else set()
    kw = dict(p_adjective=p_adjective, p_plural=p_plural, p_negation=p_negation)

    def rows(n: int, want_reserved: bool, exclude: set[str]) -> dict[str, list]:
        out: dict[str, list] = {"source": [], "target": [], "length": [], "negated": [], "pairs": []}
        budget = 200 * n + 1000
        while len(out["source"]) < n and budget:
            budget -= 1
            s = random_sentence(rng, **kw)
            hits = _pairs(s) & reserved
            if bool(hits) != want_reserved:
                continue
            src = english(s)
            if src in exclude:
                continue
            out["source"].append(src)
            out["target"].append(translate_sentence(s, lang))
            out["length"].append(len(src.split()))
            out["negated"].append(s.negated)
            out["pairs"].append(sorted(f"{a}+{b}" for a, b in _pairs(s)))
        if len(out["source"]) < n:
            raise ValueError("could not draw enough sentences; lower n or raise p_adjective")
        return out

    test = rows(n_test, True, set()) if n_test else None
    train = rows(n_train, False, set(test["source"]) if test else set())
    empty: dict[str, list] = {k: [] for k in train}
    return DatasetDict({
        "train": Dataset.from_dict(train),
        "test": Dataset.from_dict(test if test else empty, features=Dataset.from_dict(train).features),
    })


# --------------------------------------------------------------------------- vocabulary
class TranslationVocab(CharVocab):
    """Words <-> ids: :class:`~course_utils.seq2seq_data.CharVocab` with words as tokens (same
    interface and special ids, ``<pad>`` = 0, ``<bos>`` = 1, ``<eos>`` = 2, ``<unk>`` = 3).
    Texts are split on spaces and decoded words joined by one space."""

    def __init__(self, words: Sequence[str]) -> None:
        super().__init__(tuple(words))

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> "TranslationVocab":
        return cls(tuple(sorted({w for t in texts for w in t.split()})))

    @property
    def words(self) -> tuple[str, ...]:
        return self.chars

    def __repr__(self) -> str:
        return f"TranslationVocab(words={self.words!r})"

    def _tokens(self, text: str) -> list[str]:
        return text.split()

    def _join(self, tokens: list[str]) -> str:
        return " ".join(tokens)

    def tokens(self, text: str) -> list[str]:
        """The words of ``text``."""
        return self._tokens(text)


def translation_vocab(lang: str | Sequence[str] = LANGUAGES) -> TranslationVocab:
    """Every word of the grammar: English plus the target language(s). One vocabulary for both
    sides, as the transformer of notebook 08 shares (and ties) one embedding table."""
    langs = [lang] if isinstance(lang, str) else list(lang)
    words: set[str] = set()
    for forms in NOUNS.values():
        words.update(forms["en"])
        for lg in langs:
            words.update(forms[lg][1:])
    words.update(ADJECTIVES)
    for forms in ADJECTIVES.values():
        for lg in langs:
            words.update(forms[lg])
    for forms in VERBS.values():
        words.update(forms["en"])
        for lg in langs:
            words.update(forms[lg])
            if lg == "fr":
                words.update("n'" + v for v in forms[lg] if v[0] in _VOWELS)
    words.update({"do", "does", "not"})
    for lg in ["en", *langs]:
        for pair in _ARTICLES[lg].values():
            words.update(pair)
    if "pt" in langs:
        words.add("não")
    if "fr" in langs:
        words.update({"ne", "pas", "de"})
    return TranslationVocab(tuple(sorted(words)))
