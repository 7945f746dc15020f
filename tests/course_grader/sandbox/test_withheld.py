"""The graded notebook's own references are withheld from its kernel (issue 33).

``course_grader.sandbox.withheld`` rewrites ``course_utils`` for one assignment: the functions and
classes that answer its exercises raise ``course_utils.withheld.ReferenceWithheld`` and hold no
source of their bodies; everything else (what earlier notebooks built) works. The sandbox mounts
that copy over the package while the assignment is graded (tests/course/test_attacks.py grades through it).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from course_grader.sandbox.withheld import rewrite_module, withheld_package, withheld_paths
from course_utils.withheld import ReferenceWithheld

from tests.conftest import ROOT

SOURCE = '''"""A module."""
import torch


def answer(x: torch.Tensor) -> torch.Tensor:
    """Doubles x."""
    secret_step = x * 2  # the model answer
    return secret_step


def helper(x):
    return answer(x) + 1


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.secret_layer = torch.nn.Linear(2, 2)

    def forward(self, x):
        return self.secret_layer(x)
'''


def test_rewrite_withholds_functions_and_whole_classes_and_keeps_the_rest():
    text = rewrite_module(SOURCE, "course_utils.toy", ["course_utils.toy.answer", "course_utils.toy.Model"], "03_x")
    assert text is not None
    assert "secret_step" not in text and "return self.secret_layer" not in text, "a withheld body's source must be gone"
    assert '"""Doubles x."""' in text, "the docstring stays (the student may read what it does)"
    namespace: dict = {}
    exec(compile(text, "toy", "exec"), namespace)  # noqa: S102 - our own rewritten source
    with pytest.raises(ReferenceWithheld, match="course_utils.toy.answer is not available while 03_x is graded"):
        namespace["answer"](1)
    with pytest.raises(ReferenceWithheld):
        namespace["helper"](1)  # what calls a withheld answer is withheld with it
    model = namespace["Model"]()  # built (a test may load weights into one) ...
    with pytest.raises(ReferenceWithheld, match="Model.forward"):
        model(__import__("torch").ones(2))  # ... never run
    assert issubclass(namespace["Model"], __import__("torch").nn.Module), "a withheld class keeps its bases"
    assert rewrite_module(SOURCE, "course_utils.other", ["course_utils.toy.answer"], "03_x") is None


def test_a_withheld_method_only():
    text = rewrite_module(SOURCE, "course_utils.toy", ["course_utils.toy.Model.forward"], "x")
    assert "secret_layer = torch.nn.Linear" in text and "return self.secret_layer(x)" not in text


def test_each_notebook_withholds_its_own_answers_only():
    paths = withheld_paths(ROOT / "solutions" / "05_masking" / "05_masking.ipynb")
    assert "course_utils.masking.causal_mask" in paths
    assert not any(p.startswith("course_utils.attention.") for p in paths), "03's answers stay usable in 05"
    paths03 = withheld_paths(ROOT / "solutions" / "03_self_attention" / "03_self_attention.ipynb")
    assert "course_utils.attention.scaled_dot_product_attention" in paths03


def test_the_withheld_package_imports_and_raises_where_it_should(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_WITHHELD_CACHE", str(tmp_path / "cache"))
    paths = withheld_paths(ROOT / "solutions" / "05_masking" / "05_masking.ipynb")
    package = withheld_package("05_masking", paths)
    assert package == withheld_package("05_masking", paths), "built once, then reused"
    assert (package / "__pycache__").is_dir(), "compiled: the kernel cannot write bytecode in a read-only mount"
    probe = ("import torch\nfrom course_utils.masking import causal_mask\nfrom course_utils.attention import "
             "scaled_dot_product_attention as sdpa\nq = torch.randn(1, 3, 4)\nprint(tuple(sdpa(q, q, q)[0].shape))\n"
             "try:\n    causal_mask(3)\nexcept Exception as e:\n    print(type(e).__name__)\n")
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         env={"PYTHONPATH": str(Path(package).parent), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert run.stdout.split() == ["(1,", "3,", "4)", "ReferenceWithheld"], run.stdout + run.stderr
    assert "tril" not in (package / "masking.py").read_text().split("def causal_mask", 1)[1].split("def ", 1)[0]


def test_grading_a_notebook_withholds_later_notebooks_answers_where_they_are_defined():
    """Blind red team, issue 33: 13's online_softmax answered 03's stable_softmax, and sampling's filters
    (10's answers, imported into gpt) were reachable under their defining module's name."""
    from course_grader.sandbox.withheld import course_withheld_paths

    paths = course_withheld_paths(ROOT / "solutions" / "03_self_attention" / "03_self_attention.ipynb")
    assert "course_utils.attention.softmax" in paths
    assert "course_utils.flash.online_softmax" in paths, "a later notebook's answer answers this one too"
    assert "course_utils.sampling.top_p_filter" in paths, "withheld where it is defined, not only where imported"
    assert not any(p.startswith("course_utils.lora.") and "count_parameters" in p for p in paths), \
        "00's answer (an earlier notebook) stays usable in 03"


def test_a_later_notebooks_module_is_withheld_whole_while_an_earlier_one_is_graded(tmp_path, monkeypatch):
    """Second blind red team: masking.masked_attention (05's module) is 03's attention verbatim, and
    flash.softmax_state / naive_attention (13's) answer 03 through a softmax with no softmax call; none
    was a named reference, so a one-line alias scored 7/16 on 03."""
    from course_grader.sandbox.withheld import course_withheld_paths, import_closure

    source = ROOT / "solutions" / "03_self_attention" / "03_self_attention.ipynb"
    paths = course_withheld_paths(source)
    assert {"course_utils.masking.*", "course_utils.flash.*"} <= set(paths)
    closure = import_closure(sorted((ROOT / "solutions").glob("0[0-3]_*/*.ipynb")))
    assert {"course_utils.attention", "course_utils.protocol.agent", "course_utils.checks.assertions"} <= closure
    assert not any(p.endswith(".*") and p[:-2] in closure for p in paths), "what 00-03 import stays whole"
    later = course_withheld_paths(ROOT / "solutions" / "05_masking" / "05_masking.ipynb")
    assert "course_utils.masking.*" not in later and "course_utils.masking.masked_attention" not in later, \
        "05 imports masking: in 05 (and after) its helpers are usable"
    monkeypatch.setenv("COURSE_WITHHELD_CACHE", str(tmp_path / "cache"))
    package = withheld_package("03_self_attention", paths)
    probe = ("import torch\nfrom course_utils.seeding import seed_everything\nseed_everything(0)\nprint('seeded')\n"
             "from course_utils.masking import masked_attention\nfrom course_utils.flash import softmax_state, naive_attention\n"
             "from course_utils.checks import check_close\nimport course_utils.protocol.agent\n"
             "x = torch.ones(1, 2, 2)\n"
             "for f, args in ((masked_attention, (x, x, x)), (softmax_state, (x, x)), (naive_attention, (x, x, x))):\n"
             "    try:\n        f(*args)\n"
             "    except Exception as e:\n        print(type(e).__name__)\n")
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         env={"PYTHONPATH": str(Path(package).parent), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert run.stdout.split() == ["seeded", *["ReferenceWithheld"] * 3], run.stdout + run.stderr
    body = (package / "masking.py").read_text().split("def masked_attention", 1)[1].split("\ndef ", 1)[0]
    assert "ReferenceWithheld" in body and "return" not in body, "no source of the body is left"
