"""Every rule a test enforces is stated where the student reads it (issue 24, item 1).

A hidden test that rejects a right answer for a rule the student could not read is a false
rejection. For each exercise (an autograded answer cell and its test cells), every check helper
its tests use, visible or hidden, maps to a rule; the exercise's prose (the markdown cells
after the previous exercise's tests, up to its own last test cell) must state the rule in
words, or link to the rule's paragraph in 00's "Conventions the tests check"
(``[device rule](../00_welcome/00_welcome.ipynb#Device-rule)``). Banned functions and the
exceptions a test expects are named in the prose itself.

Value checks (``check``, ``check_close``, ``check_scalar``, ``check_type``) and ``substitute``
state no rule of their own; a plain ``check`` does when it reads ``.training`` (mode), calls
``torch.is_grad_enabled`` (no-grad), compares a ``.dtype``, asks that something ``.requires_grad`` (gradient; not
``not x.requires_grad``), or its message says an argument was changed "in place" or "must stay as it was" (in-place),
that parameters "no longer require grad" or "cannot be trained" (gradient), or names a rule ("(gradient rule)").
Notebooks are parsed, never executed: the whole file takes about a second.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest

from tests.conftest import ROOT

WELCOME = "00_welcome"


@dataclass(frozen=True)
class Rule:
    anchor: str   # the heading's id in 00 ("### Device rule" -> "Device-rule")
    words: str    # a regular expression: the rule stated in the exercise's own words


RULES = {
    "device": Rule("Device-rule", r"device=|\.device\b|same device|input'?s'? device|on the device|another device"),
    "dtype": Rule("Dtype-rule", r"dtype=|\.dtype\b|input'?s'? dtype|\bdtype\b"),
    "gradient": Rule("Gradient-rule", r"gradient|backward|back-?propagat|differentiable|autograd|\.detach"),
    "no_grad": Rule("Gradient-rule", r"no_grad|no gradients|without gradients"),
    "in_place": Rule("In-place-rule", r"in[ -]place|unchanged|as you found|untouched|do not (modify|change|write)"),
    "mode": Rule("Mode-rule", r"train/eval|eval mode|training mode|\.eval\(\)|\.train\(|mode as you found"),
    "shape": Rule("Shape-rule", r"\bshapes?\b|\(B, |\(\.\.\., "),
    "banned": Rule("Banned-call-rule", r"(?!)"),  # the banned names themselves are required, see below
    "own_work": Rule("Own-work-rule", r"your own|yourself|own code|do not (import|call|use) the course|without (import|call)ing"),
    "generator": Rule("Generator-rule", r"generator"),
    "error": Rule("Error-rule", r"\braise|\berror\b"),
}

# helper name -> the rule it enforces (check_device_dtype also enforces dtype unless check_dtype=False)
HELPER_RULES = {
    "check_device_dtype": "device",
    "check_backward": "gradient",
    "leaves_unchanged": "in_place",
    "banned_calls": "banned",
    "own_work": "own_work",
    "check_defined_here": "own_work",
    "check_generator": "generator",
    "check_raises": "error",
    "check_shape": "shape",
}


# a test's message about an argument written in place ("changed its input x in place"), not advice to
# work in place ("initialise the existing parameters in place")
CHANGED_IN_PLACE = re.compile(r"\b(chang|modif|updat|overwr)\w*\b[^.]*\bin[ -]place")
# a test's message about a graph cut ("no gradient reaches ...", "no torch.no_grad(), .detach() or .data")
GRAPH_CUT = re.compile(r"no gradient reaches|no torch\.no_grad\(\)|\.detach\(\) or \.data")
# a test's message about parameters frozen by the answer ("no longer requires grad after loading: the layer cannot be trained")
FROZEN = re.compile(r"no longer requires? grad|(cannot|could not) be trained")
# a test's message about the caller's argument changed in another way than its values ("switched on requires_grad of
# the x it was given: the caller's tensor must stay as it was")
CALLER_CHANGED = re.compile(r"switched on requires_grad of|must stay as it was")
# a test's message that names the rule it checks ("... (gradient rule)", "the dtype rule says ...")
NAMED_RULE = re.compile(r"\b(device|dtype|gradient|no-grad|in-place|mode|shape|generator|own-work) rule\b", re.IGNORECASE)
NAMED_RULE_KEYS = {"device": "device", "dtype": "dtype", "gradient": "gradient", "no-grad": "no_grad", "in-place": "in_place",
                   "mode": "mode", "shape": "shape", "generator": "generator", "own-work": "own_work"}


@dataclass
class Exercise:
    name: str                                   # the answer cell's grade_id
    prose: list[str] = field(default_factory=list)
    tests: list[str] = field(default_factory=list)


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def exercises(nb) -> list[Exercise]:
    """The autograded exercises in order, each with its prose and the sources of its test cells."""
    found: list[Exercise] = []
    prose: list[str] = []          # markdown since the previous exercise's last test cell
    current: Exercise | None = None
    for cell in nb.cells:
        meta = _meta(cell)
        if cell.cell_type == "markdown" and not meta.get("solution"):   # a written answer is not prose
            prose.append(cell.source)
        elif cell.cell_type == "code" and meta.get("solution") and not meta.get("grade"):
            current = Exercise(meta.get("grade_id", "?"), prose)
            found.append(current)
            prose = []
        elif cell.cell_type == "code" and meta.get("grade") and not meta.get("solution") and current is not None:
            current.prose += prose
            current.tests.append(cell.source)
            prose = []
    return [e for e in found if e.tests]


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _reads_requires_grad(condition: ast.AST) -> bool:
    """Whether a check's condition asks that something requires grad (``p.requires_grad``, ``all(t.requires_grad
    for ...)``); ``not x.requires_grad`` (the caller's input left alone, a result detached) does not count."""
    negated: set[int] = set()
    for node in ast.walk(condition):
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            negated |= {id(inner) for inner in ast.walk(node.operand)}
    return any(isinstance(node, ast.Attribute) and node.attr == "requires_grad" and id(node) not in negated
               for node in ast.walk(condition))


def required(test_source: str) -> tuple[set[str], set[str]]:
    """(rules, words): the rules a test cell enforces, and the names its prose must contain
    (banned functions, expected exceptions)."""
    rules: set[str] = set()
    words: set[str] = set()
    tree = ast.parse(test_source)
    tuples = {target.id: node.value for node in ast.walk(tree) if isinstance(node, ast.Assign)   # _BANNED = (...)
              for target in node.targets if isinstance(target, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "is_grad_enabled":
            rules.add("no_grad")
        if isinstance(node, ast.Attribute) and node.attr == "training":
            rules.add("mode")
        if isinstance(node, ast.Compare) and any(isinstance(n, ast.Attribute) and n.attr == "dtype"
                                                 for n in (node.left, *node.comparators)):
            rules.add("dtype")   # check(out.dtype == torch.float64, ...)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and CHANGED_IN_PLACE.search(node.value):
            rules.add("in_place")   # check(torch.equal(x, x_before), "... changed x in place")
        if (isinstance(node, ast.Call) and _name(node.func) == "to" and node.args
                and isinstance(node.args[0], ast.Constant) and node.args[0].value == "meta"):
            rules.add("device")   # f(x.to("meta")): the output must stay on the input's device
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and GRAPH_CUT.search(node.value):
            rules.add("gradient")   # check(all grads reached, "no gradient reaches the parameter ...")
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and FROZEN.search(node.value):
            rules.add("gradient")   # check(not frozen, "... no longer require gradients: the model could not be trained")
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and CALLER_CHANGED.search(node.value):
            rules.add("in_place")   # check(not x.requires_grad, "f switched on requires_grad of the x it was given ...")
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            rules |= {NAMED_RULE_KEYS[name.lower()] for name in NAMED_RULE.findall(node.value)}   # "... (gradient rule)"
        if (isinstance(node, ast.Call) and _name(node.func) == "check" and node.args
                and _reads_requires_grad(node.args[0])):
            rules.add("gradient")   # check(p.requires_grad, "ours.weight no longer requires grad after loading")
        if not isinstance(node, ast.Call) or _name(node.func) not in HELPER_RULES:
            continue
        helper = _name(node.func)
        rules.add(HELPER_RULES[helper])
        keywords = {k.arg: k.value for k in node.keywords}
        if helper == "check_device_dtype":
            flag = keywords.get("check_dtype")
            if not (isinstance(flag, ast.Constant) and flag.value is False):
                rules.add("dtype")
        elif helper == "banned_calls":
            for arg in node.args:
                if isinstance(arg, ast.Starred) and isinstance(arg.value, ast.Name):   # banned_calls(*_BANNED)
                    arg = tuples.get(arg.value.id, arg)
                listed = arg.elts if isinstance(arg, (ast.Tuple, ast.List)) else [arg]
                words |= {a.value for a in listed if isinstance(a, ast.Constant) and isinstance(a.value, str)}
        elif helper == "check_raises":
            exception = node.args[1] if len(node.args) > 1 else keywords.get("exception")
            if exception is not None and _name(exception):
                words.add(_name(exception))
    return rules, words


def _links_to(anchor: str, text: str, in_welcome: bool) -> bool:
    target = rf"\(#{anchor}\)" if in_welcome else rf"\((\.\./{WELCOME}/)?{WELCOME}\.ipynb#{anchor}\)"
    return re.search(target, text) is not None


def unstated(path: Path) -> list[str]:
    """One message per rule an exercise of the notebook at ``path`` enforces without stating it."""
    nb = nbformat.read(str(path), as_version=4)
    in_welcome = path.stem == WELCOME
    problems = []
    for exercise in exercises(nb):
        text = "\n".join(exercise.prose)
        rules: set[str] = set()
        words: set[str] = set()
        for source in exercise.tests:
            more_rules, more_words = required(source)
            rules |= more_rules
            words |= more_words
        for key in sorted(rules):
            rule = RULES[key]
            if key == "banned":
                continue  # stated by naming what is banned (below); a link alone does not say what
            if not re.search(rule.words, text, re.IGNORECASE) and not _links_to(rule.anchor, text, in_welcome):
                problems.append(f"{path.name}: exercise {exercise.name!r}: its tests check the {key.replace('_', ' ')} "
                                f"rule, but its prose neither states it nor links to {WELCOME}.ipynb#{rule.anchor}")
        named = {word for word in words if re.search(rf"\b{re.escape(word)}\b", text)}
        for word in sorted(words - named):
            if any(other in word for other in named):
                continue  # an internal spelling of a named function: native_layer_norm, _convolution, cross_entropy_loss
            problems.append(f"{path.name}: exercise {exercise.name!r}: its tests reject {word!r}, "
                            f"but its prose never names {word!r}")
    return problems


def _solution_notebooks() -> list[Path]:
    return sorted(p for p in (ROOT / "solutions").glob("*/*.ipynb") if ".ipynb_checkpoints" not in p.parts)


@pytest.mark.parametrize("path", _solution_notebooks(), ids=lambda p: p.stem)
def test_every_rule_a_test_checks_is_stated_in_the_exercise(path):
    problems = unstated(path)
    assert not problems, "\n".join(problems)


def test_the_conventions_section_has_every_anchor():
    """The links point somewhere: 00 has one heading per rule (its JupyterLab anchor)."""
    nb = nbformat.read(str(ROOT / "solutions" / WELCOME / f"{WELCOME}.ipynb"), as_version=4)
    headings = {line.lstrip("#").strip().replace(" ", "-")
                for cell in nb.cells if cell.cell_type == "markdown"
                for line in cell.source.splitlines() if line.startswith("#")}
    missing = sorted({rule.anchor for rule in RULES.values()} - headings)
    assert not missing, f"00_welcome has no heading for {missing}"


# --------------------------------------------------------------------------- a test of the test
def _synthetic(tmp_path: Path, prose: str, test: str, name: str = "05_synthetic") -> Path:
    nb = nbformat.v4.new_notebook()
    answer = nbformat.v4.new_code_cell("def f(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION")
    answer.metadata["nbgrader"] = {"grade": False, "solution": True, "locked": False, "grade_id": "f", "schema_version": 3}
    tests = nbformat.v4.new_code_cell(test)
    tests.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "grade_id": "test_f",
                                  "points": 1, "schema_version": 3}
    written = nbformat.v4.new_markdown_cell("The device is irrelevant here, and so is the dtype.")  # an answer, not prose
    written.metadata["nbgrader"] = {"grade": True, "solution": True, "locked": False, "grade_id": "w", "points": 1,
                                    "schema_version": 3}
    nb.cells = [written, nbformat.v4.new_markdown_cell(prose), answer, tests]
    path = tmp_path / f"{name}.ipynb"
    nbformat.write(nb, str(path))
    return path


HIDDEN = """check(f(1) == 1, "f(1) is 1")
### BEGIN HIDDEN TESTS
from course_utils.checks import banned_calls, check_device_dtype
with banned_calls("softmax", name="f"):
    f(x)
check_device_dtype(f, x, name="f", check_dtype=False)
### END HIDDEN TESTS
"""


def test_a_removed_rule_sentence_fails(tmp_path):
    stated = ("**Exercise.** Write `f(x)` without `softmax`. "
              "Create every tensor on the input's device (`device=x.device`).")
    assert unstated(_synthetic(tmp_path, stated, HIDDEN)) == []
    linked = "**Exercise.** Write `f(x)` without `softmax` ([device rule](../00_welcome/00_welcome.ipynb#Device-rule))."
    assert unstated(_synthetic(tmp_path, linked, HIDDEN)) == []

    problems = unstated(_synthetic(tmp_path, "**Exercise.** Write `f(x)` without `softmax`.", HIDDEN))
    assert len(problems) == 1
    assert "05_synthetic.ipynb" in problems[0] and "'f'" in problems[0] and "device rule" in problems[0]

    problems = unstated(_synthetic(tmp_path, "**Exercise.** Write `f(x)` on the input's device.", HIDDEN))
    assert problems == ["05_synthetic.ipynb: exercise 'f': its tests reject 'softmax', but its prose never names 'softmax'"]


def test_dtype_is_required_unless_the_test_turns_it_off(tmp_path):
    test = "check_device_dtype(f, x, name='f')\ncheck_raises(lambda: f(None), ValueError, 'f(None)')\n"
    problems = unstated(_synthetic(tmp_path, "Write `f(x)` on `x.device`.", test))
    assert any("dtype rule" in p for p in problems) and any("'ValueError'" in p for p in problems)
    assert unstated(_synthetic(tmp_path, "Write `f(x)` on `x.device`, in `x.dtype`; raise a `ValueError` on None.", test)) == []


PRINTED = {"device": "device", "dtype": "dtype", "gradient": "gradient", "no_grad": "gradient", "in_place": "in-place",
           "mode": "mode", "shape": "shape", "banned": "banned calls", "own_work": "own work", "generator": "generator",
           "error": "error"}


def unlisted(path: Path, release: Path | None = None) -> list[str]:
    """One message per rule an exercise of the solution notebook at ``path`` enforces that ``course check --rules``
    does not list for it, reading the links of ``release`` (the student's notebook; by default ``path`` itself, whose
    text is the same)."""
    from course_utils.selfcheck import exercise_rules

    listed = {e.grade_id: set(e.rules) for e in exercise_rules(path if release is None else release)}
    problems = []
    for exercise in exercises(nbformat.read(str(path), as_version=4)):
        enforced = {PRINTED[rule] for source in exercise.tests for rule in required(source)[0]}
        missing = enforced - listed.get(exercise.name, set())
        if missing:
            problems.append(f"{path.stem}: exercise {exercise.name!r}: course check --rules does not list "
                            f"{sorted(missing)}: link each to 00's rule in the exercise's text")
    return problems


@pytest.mark.parametrize("path", _solution_notebooks(), ids=lambda p: p.stem)
def test_course_check_rules_lists_every_rule_a_test_checks(path):
    """`course check --rules` on the student's release lists, for each exercise, every rule its tests (hidden ones
    included) enforce: the student can read them before submitting (issue 34 item 5)."""
    problems = unlisted(path, ROOT / "notebooks" / path.parent.name / path.name)
    assert not problems, "\n".join(problems)


# one synthetic test cell per pattern of `required`, modelled on the checks that first escaped it (04 load_torch_weights,
# 05 dependence_matrix, 10 init_gpt2_)
PATTERNS = {
    "a check that a parameter still requires grad":
        ("for key, p in ours.named_parameters():\n    check(p.requires_grad, f'ours.{key} is frozen.')\n", {"gradient"}),
    "a requires_grad inside a filter":
        ("check(sum(p.numel() for p in m.parameters() if p.requires_grad) == 40, 'trainable count')\n", {"gradient"}),
    "a message about frozen parameters":
        ("frozen = [n for n, p in m.named_parameters() if not p.requires_grad]\n"
         "check(not frozen, f'after f, {len(frozen)} parameters no longer require gradients: the model could not be "
         "trained.')\n", {"gradient"}),
    "a message about the caller's argument":
        ("check(not x.requires_grad, 'f switched on requires_grad of the x it was given: the caller\\'s tensor must "
         "stay as it was.')\n", {"in_place"}),
    "a message naming the rule":
        ("check(ok, f'f returned {y.dtype} (the dtype rule); its output is cut from the graph (gradient rule).')\n",
         {"dtype", "gradient"}),
    "a detached result, not the gradient rule":
        ("check(not chosen.requires_grad, 'the rewards returned by f require grad: detach them.')\n", set()),
    "a mention of rules in general, not one of them":
        ("check(ok, 'f broke one of the rules of section 6.')\n", set()),
}


@pytest.mark.parametrize("what", PATTERNS)
def test_each_pattern_finds_its_rule(what):
    source, rules = PATTERNS[what]
    assert required(source)[0] == rules


FROZEN_TEST = "check(p.requires_grad, 'ours.weight no longer requires grad after loading: the layer cannot be trained.')\n"


def test_a_rule_stated_in_words_only_is_not_listed_by_course_check(tmp_path):
    """The prose may state a rule in words (test_every_rule...); `course check --rules` lists only what it links."""
    words = "**Exercise.** Write `f(m)`: every parameter must still require gradients."
    assert unstated(_synthetic(tmp_path, words, FROZEN_TEST)) == []
    assert unlisted(_synthetic(tmp_path, words, FROZEN_TEST)) == [
        "05_synthetic: exercise 'f': course check --rules does not list ['gradient']: link each to 00's rule in the "
        "exercise's text"]
    linked = words + " ([gradient rule](../00_welcome/00_welcome.ipynb#Gradient-rule))"
    assert unlisted(_synthetic(tmp_path, linked, FROZEN_TEST)) == []
    problems = unstated(_synthetic(tmp_path, "**Exercise.** Write `f(m)`.", FROZEN_TEST))
    assert len(problems) == 1 and "'f'" in problems[0] and "gradient rule" in problems[0]
