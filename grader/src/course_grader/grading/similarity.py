"""Similarity of answer cells: to the package's public reference and between students.

A submission whose answer cell scores at least :data:`THRESHOLD` (0.7) against the public
reference or against another student's answer is *held* until the instructor decides
(``course review``, :mod:`course_grader.grading.review`); a score is evidence to read, never
a grade.

Why 0.7 (5-grams, at least 30 of them): measured on the course itself (the 13 notebooks'
solutions and ``tests/mistakes/*.py``; :func:`calibration` recomputes it, and
``tests/course_grader/grading/test_review.py`` keeps it true), over the answer cells with at least 30 5-grams
beyond the stub (53 of the 68 code answer cells):

======================================================  ======  ======  ======  ======  ======
pairs (count)                                           median  >=0.6   >=0.7   >=0.8   >=0.9
======================================================  ======  ======  ======  ======  ======
solution vs a mistake or alternative made by editing    0.80    86 %    71 %    50 %    17 %
it (``replace=``: a near-copy with a real change; 210)
solution vs a mistake or alternative written whole      0.22    9.4 %   5.6 %   3.1 %   1.9 %
(``source=``; 319)
solution vs its public reference (46)                   0.44    33 %    24 %    15 %    13 %
======================================================  ======  ======  ======  ======  ======

0.7 keeps seven in ten near-copies that carry a real change (a renamed, reformatted copy
scores 1.0) while holding about one in eighteen answers written separately, and most of
those are not independent either: they are the solution retyped with a few names changed
(``greedy_decode`` "batched loop with a finished mask" 0.93, ``beam_step`` "flatten +
topk" 1.0). Lowering to 0.6 holds one in eleven separate answers for 15 % more near-copies;
0.8 lets half the near-copies through. The minimum size matters less than expected (the
separate answers' rate at 0.7 is 6.3 % from 15 5-grams, 5.6 % from 30, 6.4 % from 40) but
short cells collide by construction (``return Q @ K.transpose(-2, -1) / math.sqrt(d)``:
every right answer is that line), so cells under 30 5-grams -- about four statements, 15 of
the 68 cells -- are not compared at all.

The public reference: the solution itself scores 0.7 or more against it in 11 of the 46
cells whose reference is long enough to compare (6 are identical: ``beam_step``,
``attend``, ``top_k_gating``, ``load_balancing_loss``, ``capacity_keep``, ``mean_pool``):
there the canonical answer *is* the package's code, and a student who writes it
independently would score as high as one who copies it. Those cells (the model answer scores
``THRESHOLD`` or more against its reference: :attr:`ClassComparison.canonical`, named in
``course review``) are compared between students only; an honest canonical answer is no
longer held (the third blind red team's honest students were, on 03's ``stable_softmax``:
0.76-1.00).
Between students, the reference's n-grams and the class's common code (n-grams shared by
more than 10 answers and 10 % of the class, as MOSS's ``-m``) are left out, so two students
who both wrote the canonical answer are not paired; copying the reference is reported as
such instead.

How a cell is compared
----------------------
Only the code a student wrote in an answer cell (a code cell with nbgrader metadata
``solution: true``) is compared, per answer cell (``grade_id``):

1. **Normalised.** The cell is parsed (IPython syntax translated) and walked in order into a
   token sequence: the AST node types, with every local name (variables, arguments,
   functions, classes, attributes the code itself assigns such as ``self.query``) replaced
   by one placeholder, constants by their kind (``int``, ``float``, ``str`` ...), and
   docstrings, annotations, comments and formatting dropped. What stays is the structure and
   the API the code calls (``transpose``, ``softmax``, ``sum``, keyword names such as
   ``dim=``). Renaming, reformatting, re-commenting or changing numbers changes nothing.
2. **Given code removed.** The token 5-grams of the cell, less those of the released stub
   (the signature and docstring everyone is given, ``raise NotImplementedError()``).
3. **Trivial cells ignored.** A cell with fewer than :data:`MIN_GRAMS` 5-grams left (about
   four short statements) is not compared: independent authors write the same
   ``return sum(p.numel() for p in module.parameters() if p.requires_grad)``; a blank stub
   leaves nothing at all.
4. **Scored.** The Jaccard index of the two 5-gram sets (shared / all): 1.0 for the same code
   renamed and reformatted, 0 for nothing in common. Jaccard is symmetric, insensitive to
   the order of functions, and cheap enough for every pair of a large class (sets of a few
   hundred 5-grams).

The public reference of an answer cell is the ``course_utils`` object(s) its test cells
name in ``checks.own_work("course_utils.x.Y", name=...)`` (a whole module given there
stands for its objects named like the cell's definitions), else a ``course_utils`` object
of the same name as a definition of the cell; a reference class stands for itself and for
each of its methods (an exercise often writes one method's work as a function). Its source
(``inspect.getsource``) is normalised the same way and the highest score is kept.
"""

from __future__ import annotations

import ast
import builtins
import csv
import importlib
import importlib.util
import inspect
import math
import re
import textwrap
from collections import Counter
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from itertools import combinations
from pathlib import Path
from typing import TYPE_CHECKING, Any, Collection, Iterable, Mapping, Sequence

from nbformat import NotebookNode

from course_utils.cells import nbgrader_meta, read

if TYPE_CHECKING:
    from course_grader.course import Course

__all__ = [
    "THRESHOLD",
    "MIN_GRAMS",
    "NGRAM",
    "REFERENCE",
    "Pair",
    "ClassComparison",
    "normalise",
    "fingerprint",
    "similarity",
    "trivial",
    "answer_sources",
    "stub_sources",
    "reference_paths",
    "reference_sources",
    "compare_answers",
    "compare_class",
    "compare_class_saved",
    "saved_comparison_path",
    "write_similarity_csv",
    "calibration",
]

NGRAM = 5  # tokens per n-gram
MIN_GRAMS = 30  # fewer distinct 5-grams beyond the stub (about four statements): not compared
THRESHOLD = 0.7  # Jaccard from which a pair is reported and the submission held
# The package's own text in an answer, character for character: lines of at least VERBATIM_CHARS
# (stripped; not in the released stub) found in the reference's source. Held at VERBATIM_LINES such
# lines of which one carries the package's own comment or docstring text, or VERBATIM_CODE_LINES
# lines of code alone. Normalised scores cannot tell a pasted reference from an honest canonical
# answer (on cells whose model answer *is* the package's code, and on cells too short to compare);
# the package's comments, docstrings and exact spelling can, short cells included.
VERBATIM_CHARS = 12
VERBATIM_LINES = 2
VERBATIM_CODE_LINES = 4
COMMON_MIN, COMMON_SHARE = 10, 0.1  # n-grams in more answers than this are the class's common code
REFERENCE = "reference"  # Pair.other for a comparison with the package's public reference

_SOLUTION_BLOCK = re.compile(
    r"^(?P<indent>[ \t]*)### BEGIN[ ]SOLUTION[ \t]*\n.*?^[ \t]*### END[ ]SOLUTION[ \t]*(?:\n|$)", re.S | re.M
)
_BUILTINS = frozenset(dir(builtins))


@dataclass(frozen=True, order=True)
class Pair:
    """One comparison over the threshold: ``student``'s answer cell ``cell`` against
    ``other`` (another student, or :data:`REFERENCE` with ``reference`` its dotted path)."""

    assignment: str
    cell: str
    student: str
    other: str
    score: float
    reference: str = ""

    def describe(self, student: str | None = None) -> str:
        """One line, from ``student``'s side (default: the first)."""
        if self.reference.endswith(VERBATIM_NOTE):
            return f"cell {self.cell}: {int(self.score)} lines pasted from the public reference {self.reference}"
        if self.reference:
            return f"cell {self.cell}: similarity {self.score:.2f} to the public reference {self.reference}"
        whom = self.other if student in (None, self.student) else self.student
        return f"cell {self.cell}: similarity {self.score:.2f} to {whom}'s answer"

    @property
    def students(self) -> tuple[str, ...]:
        """The student(s) it concerns: one for the reference, two for a pair of students."""
        return (self.student,) if self.reference else (self.student, self.other)

    def involves(self, student: str) -> bool:
        return student in self.students


# ---------------------------------------------------------------------------------------------
# Normalisation


def _parse(source: str) -> ast.Module | None:
    try:
        from course_grader.grading.scan import _code  # IPython syntax (magics, !cmd) translated
    except ImportError:  # pragma: no cover - the scan is part of the tooling
        try:
            return ast.parse(source)
        except (SyntaxError, ValueError):
            return None
    return _code(source)


def _bound_names(tree: ast.AST) -> set[str]:
    """Names the code binds itself: assignment and loop targets, arguments, definitions,
    imports, and attributes it assigns (``self.query = ...``)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
    return names


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


class _Tokens:
    def __init__(self, local: set[str]):
        self.local = local
        self.out: list[str] = []

    def visit(self, node: ast.AST) -> None:
        child: ast.AST
        if isinstance(node, (ast.expr_context, ast.Load, ast.Store, ast.Del)):
            return
        kind = type(node).__name__
        if isinstance(node, ast.Name):
            self.out.append(node.id if node.id in _BUILTINS and node.id not in self.local else "_")
            return
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)) \
                and isinstance(node.operand, ast.Constant):
            node = node.operand  # -1 is a number like 1
        if isinstance(node, ast.Constant):
            self.out.append(f"<{type(node.value).__name__}>")
            return
        if isinstance(node, ast.JoinedStr):
            self.out.append("<str>")
            return
        self.out.append(kind)
        if isinstance(node, ast.Attribute):
            self.visit(node.value)
            self.out.append("." + ("_" if node.attr in self.local else node.attr))
            return
        if isinstance(node, ast.keyword):
            self.out.append(f"{node.arg}=" if node.arg else "**")  # the callee's parameter: its API
            self.visit(node.value)
            return
        if isinstance(node, ast.alias):
            self.out.append(node.name)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if isinstance(node, ast.ImportFrom):
                self.out.append(node.module or ".")
            for alias in node.names:
                self.visit(alias)
            return
        if isinstance(node, ast.arg):
            return  # its name and annotation are dropped
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for child in node.decorator_list:
                self.visit(child)
            self.visit(node.args)
            self.body(node.body)
            return
        if isinstance(node, ast.ClassDef):
            for child in [*node.decorator_list, *node.bases, *node.keywords]:
                self.visit(child)
            self.body(node.body)
            return
        if isinstance(node, ast.AnnAssign):
            self.visit(node.target)
            if node.value is not None:
                self.visit(node.value)
            return
        for child in ast.iter_child_nodes(node):
            self.visit(child)

    def body(self, statements: list[ast.stmt]) -> None:
        for index, statement in enumerate(statements):
            if index == 0 and _is_docstring(statement):
                continue
            self.visit(statement)


@lru_cache(maxsize=8192)
def normalise(source: str) -> tuple[str, ...]:
    """The cell's code as a token sequence without names, literals, docstrings, annotations
    or formatting (see the module docstring); empty when it does not parse."""
    tree = _parse(source)
    if tree is None:
        return ()
    tokens = _Tokens(_bound_names(tree))
    tokens.body(tree.body)
    return tuple(tokens.out)


def fingerprint(source: str, given: str = "", n: int = NGRAM) -> frozenset[tuple[str, ...]]:
    """The token ``n``-grams of ``source`` less those of ``given`` (the released stub)."""
    grams = _grams(normalise(source), n)
    return frozenset(grams - _grams(normalise(given), n)) if given else frozenset(grams)


def _grams(tokens: Sequence[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(tokens[i:i + n]) for i in range(max(len(tokens) - n + 1, 0))}


def similarity(a: frozenset, b: frozenset) -> float:
    """Jaccard index of two fingerprints (0 when either is empty)."""
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def similar_pairs(prints: Mapping[str, frozenset], threshold: float) -> list[tuple[str, str, float]]:
    """Every pair ``(a, b, score)``, ``a < b``, of ``prints`` whose :func:`similarity` is at least
    ``threshold``: exactly the pairs comparing every pair finds, without comparing every pair.

    Prefix filtering (Chaudhuri et al. 2006; Bayardo et al.'s *All-Pairs*, 2007): with the n-grams of
    every fingerprint in one order, rarest first, two fingerprints whose Jaccard index reaches ``t``
    share at least ``t x`` the larger one's size, so each one's first ``size - ceil(t size) + 1``
    n-grams already meet. Only fingerprints that share one of those (and whose sizes are within the
    ratio ``t``) are compared: a class's answers mostly differ in their rare n-grams, so a student is
    compared with a handful of classmates, not with the whole class (1,000 students: about half a
    million pairs per cell otherwise).
    """
    if threshold <= 0:  # every pair qualifies
        return [(a, b, similarity(prints[a], prints[b])) for a, b in combinations(sorted(prints), 2)]
    frequency = Counter(g for grams in prints.values() for g in grams)
    index: dict[tuple[str, ...], list[str]] = {}
    found: list[tuple[str, str, float]] = []
    for student in sorted(prints, key=lambda s: (len(prints[s]), s)):  # smallest first: earlier ones are no larger
        grams = prints[student]
        if not grams:
            continue
        ordered = sorted(grams, key=lambda g: (frequency[g], g))
        prefix = len(ordered) - math.ceil(threshold * len(ordered) - 1e-9) + 1
        candidates: set[str] = set()
        for gram in ordered[:max(prefix, 1)]:
            bucket = index.setdefault(gram, [])
            candidates.update(bucket)
            bucket.append(student)
        for other in candidates:
            if len(prints[other]) < threshold * len(grams) - 1e-9:  # too small to reach the threshold
                continue
            score = similarity(grams, prints[other])
            if score >= threshold:
                found.append((min(student, other), max(student, other), score))
    return sorted(found)


def trivial(grams: frozenset) -> bool:
    """Too little code (after the given stub is removed) for a similarity to mean anything."""
    return len(grams) < MIN_GRAMS


# ---------------------------------------------------------------------------------------------
# What is compared: answer cells, stubs, references


def _code_answer_cells(nb: NotebookNode) -> list[NotebookNode]:
    return [c for c in nb.cells if c.cell_type == "code" and nbgrader_meta(c).get("solution")
            and nbgrader_meta(c).get("grade_id")]


def answer_sources(nb: NotebookNode) -> dict[str, str]:
    """``grade_id -> source`` of every code answer cell of a (submitted) notebook."""
    return {nbgrader_meta(c)["grade_id"]: c.source for c in _code_answer_cells(nb)}


def stub_sources(source_nb: NotebookNode) -> dict[str, str]:
    """``grade_id -> released stub`` of the source notebook's code answer cells: each solution
    block replaced by ``raise NotImplementedError()`` as nbgrader's release does."""
    return {
        nbgrader_meta(c)["grade_id"]: _SOLUTION_BLOCK.sub(lambda m: f"{m.group('indent')}raise NotImplementedError()\n",
                                                          c.source)
        for c in _code_answer_cells(source_nb)
    }


def _defined_names(source: str) -> list[str]:
    tree = _parse(source)
    return [n.name for n in (tree.body if tree else [])
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]


def _words(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))


def _own_work_calls(source: str) -> list[tuple[list[str], str]]:
    """``(dotted paths, name=)`` of every ``own_work(...)`` call in a test cell."""
    tree = _parse(source)
    calls = []
    for node in ast.walk(tree) if tree else []:
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called == "own_work":
                paths = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
                name = next((k.value.value for k in node.keywords if k.arg == "name"
                             and isinstance(k.value, ast.Constant) and isinstance(k.value.value, str)), "")
                calls.append((paths, name))
    return calls


def _resolve(path: str) -> Any:
    """The object ``path`` names (a module, or an attribute of one), None when nothing does."""
    obj: Any
    parts = path.split(".")
    for end in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:end]))
        except ImportError:
            continue
        for attr in parts[end:]:
            obj = getattr(obj, attr, None)
            if obj is None:
                return None
        return obj
    return None


_CACHES = ("cache", "lru_cache")  # functools decorators whose result is no function (``_course_objects`` leaves it out)


@lru_cache(maxsize=None)
def _course_objects() -> dict[str, list[str]]:
    """``name -> dotted paths`` of the functions and classes defined in the package's
    public modules (``course_utils.*``, not the tooling or the tests' helpers).

    Read from the modules' source (their top-level ``def`` and ``class`` statements), not by
    importing them: importing every module (torch, matplotlib, datasets, ...) cost seconds of every
    `course grade`, `export`, `review` and `feedback` that compares a class, for a list of names. A
    function wrapped in a functools cache is no function at run time and is left out, as is a
    module whose source does not parse; tests/course_grader/grading/test_review.py checks that this equals what
    importing every module finds."""
    import pkgutil

    import course_utils

    found: dict[str, list[str]] = {}
    for info in pkgutil.iter_modules(course_utils.__path__):
        if info.ispkg or info.name in ("checks", "session", "plotting", "profiles", "seeding", "device"):
            continue
        spec = importlib.util.find_spec(f"course_utils.{info.name}")  # the package is imported, not the module
        if spec is None or spec.origin is None:
            continue
        try:
            tree = ast.parse(Path(spec.origin).read_text())
        except (OSError, SyntaxError, ValueError):
            continue
        for node in tree.body:
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            decorators = {ast.unparse(d.func if isinstance(d, ast.Call) else d).rsplit(".", 1)[-1]
                          for d in node.decorator_list}
            if isinstance(node, ast.ClassDef) or not decorators & set(_CACHES):
                found.setdefault(node.name, []).append(f"course_utils.{info.name}.{node.name}")
    return found


@lru_cache(maxsize=None)
def _reference_source(path: str) -> str:
    obj = _resolve(path)
    if obj is None or inspect.ismodule(obj):
        return ""
    try:
        return textwrap.dedent(inspect.getsource(obj))
    except (OSError, TypeError):
        return ""


def _with_methods(path: str) -> list[str]:
    """``path`` and, for a class, each function defined in its body (an exercise often
    reimplements one method of a reference class: ``MoEFeedForward.gate``)."""
    obj = _resolve(path)
    paths = [path]
    if inspect.isclass(obj):
        paths += [f"{path}.{name}" for name, member in vars(obj).items()
                  if inspect.isfunction(member) and getattr(member, "__module__", "") == obj.__module__]
    return paths


def reference_paths(source_nb: NotebookNode, only: Collection[str] | None = None) -> dict[str, list[str]]:
    """``grade_id -> dotted paths`` of the public reference(s) each code answer cell (of
    ``only``, default all) reimplements (see the module docstring). Resolving a path imports
    its module."""
    cells = [c for c in source_nb.cells if c.cell_type == "code"]
    answers = [(i, nbgrader_meta(c)["grade_id"], _defined_names(c.source)) for i, c in enumerate(cells)
               if nbgrader_meta(c).get("solution") and nbgrader_meta(c).get("grade_id")
               and not nbgrader_meta(c).get("grade")]
    found: dict[str, list[str]] = {gid: [] for _, gid, _ in answers}
    for position, cell in enumerate(cells):
        meta = nbgrader_meta(cell)
        if not (meta.get("grade") and not meta.get("solution")):
            continue
        for paths, name in _own_work_calls(cell.source):
            owners = [(gid, names) for _, gid, names in answers if set(names) & _words(name)]
            if not owners:  # the answer cell right before the test
                before = [(gid, names) for i, gid, names in answers if i < position]
                owners = before[-1:]
            for gid, names in owners:
                if only is not None and gid not in only:
                    continue
                for path in paths:
                    obj = _resolve(path)
                    if inspect.ismodule(obj):
                        targets = [f"{path}.{n}" for n in names if hasattr(obj, n)]
                    else:
                        targets = [path] if obj is not None else []
                    found[gid] += [t for t in targets if t not in found[gid]]
    for _, gid, names in answers:
        if only is not None and gid not in only:
            del found[gid]
            continue
        if not found[gid]:
            found[gid] = [p for n in names for p in _course_objects().get(n, [])]
        found[gid] = list(dict.fromkeys(m for p in found[gid] for m in _with_methods(p)))
    return found


def reference_sources(source_nb: NotebookNode, only: Collection[str] | None = None) -> dict[str, dict[str, str]]:
    """``grade_id -> {dotted path: source}`` of each code answer cell's (of ``only``)
    public reference(s)."""
    return {gid: {p: s for p in paths if (s := _reference_source(p))}
            for gid, paths in reference_paths(source_nb, only).items()}


# ---------------------------------------------------------------------------------------------
# A class


@dataclass
class ClassComparison:
    """Every score of one assignment: ``pairs`` over ``threshold`` (sorted by score, highest
    first), ``compared``/``trivial`` counts per cell, and the ``canonical`` cells, whose answers
    were not compared with the reference (see :func:`compare_answers`)."""

    assignment: str
    threshold: float
    pairs: list[Pair] = field(default_factory=list)
    compared: dict[str, int] = field(default_factory=dict)
    trivial: dict[str, int] = field(default_factory=dict)
    canonical: dict[str, float] = field(default_factory=dict)  # cell -> the model answer's score to its reference

    def for_student(self, student: str) -> list[Pair]:
        return [p for p in self.pairs if p.involves(student)]

    @property
    def students(self) -> set[str]:
        return {s for p in self.pairs for s in p.students}


def compare_answers(
    assignment: str,
    answers: Mapping[str, Mapping[str, str]],
    stubs: Mapping[str, str],
    references: Mapping[str, Mapping[str, str]],
    threshold: float = THRESHOLD,
    solutions: Mapping[str, str] | None = None,
) -> ClassComparison:
    """Compare ``answers`` (``student -> grade_id -> source``) cell by cell with the references
    (``grade_id -> {path: source}``) and with each other (see the module docstring: the
    released ``stubs`` are removed from every comparison; the references and the class's
    common code from the comparisons between students).

    A cell whose model answer (``solutions``: ``grade_id -> source``) itself scores ``threshold``
    or more against its reference is *canonical*: there the right answer is the package's code,
    a student who writes it alone scores as high as one who copies it, and a score says nothing.
    Its answers are compared between students only (``result.canonical``)."""
    result = ClassComparison(assignment, threshold)
    cells = sorted({gid for cells in answers.values() for gid in cells})
    for gid in cells:
        given = stubs.get(gid, "")
        prints = {s: fingerprint(cells_[gid], given) for s, cells_ in answers.items() if gid in cells_}
        kept = {s: g for s, g in prints.items() if not trivial(g)}
        result.compared[gid] = len(kept)
        result.trivial[gid] = len(prints) - len(kept)
        refs = {p: g for p, src in references.get(gid, {}).items() if not trivial(g := fingerprint(src, given))}
        model = fingerprint(solutions[gid], given) if solutions and gid in solutions else None
        if refs and model is not None and not trivial(model):
            own = max(similarity(model, ref) for ref in refs.values())
            if own >= threshold:
                result.canonical[gid] = round(own, 3)
        for student, cells_ in sorted(answers.items()):  # the package pasted: every cell, short or canonical
            if gid not in cells_:
                continue
            found = [(pasted(cells_[gid], src, given), path) for path, src in references.get(gid, {}).items()]
            count, path = max(found, default=(0, ""))
            if count:
                result.pairs.append(Pair(assignment, gid, student, REFERENCE, float(count), path + VERBATIM_NOTE))
        for student, grams in sorted(kept.items()) if gid not in result.canonical else ():
            scored = [(similarity(grams, ref), path) for path, ref in refs.items()]
            if scored:
                score, path = max(scored)
                if score >= threshold:
                    result.pairs.append(Pair(assignment, gid, student, REFERENCE, round(score, 3), path))
        base = frozenset().union(*refs.values(), _common(kept.values()))
        between = {s: g - base for s, g in kept.items()}
        between = {s: g for s, g in between.items() if not trivial(g)}
        for a, b, score in similar_pairs(between, threshold):
            result.pairs.append(Pair(assignment, gid, a, b, round(score, 3)))
    result.pairs.sort(key=lambda p: (-p.score, p.cell, p.student, p.other))
    return result


VERBATIM_NOTE = " (verbatim)"
_PROSE = re.compile(r"[A-Za-z]{3,} [A-Za-z]{3,} [A-Za-z]{3,}")  # three words in a row: a docstring's text


def _text_lines(source: str) -> list[str]:
    return [line.strip() for line in source.splitlines() if len(line.strip()) >= VERBATIM_CHARS]


def verbatim_lines(answer: str, reference: str, given: str = "") -> tuple[int, int]:
    """``(lines, commented)``: how many lines of ``answer`` (not in the stub ``given``) appear,
    character for character once stripped, in ``reference``'s source, and how many of those hold
    text an author writes for readers (a comment or a docstring line)."""
    known = set(_text_lines(reference))
    stub = set(_text_lines(given))
    found = [line for line in dict.fromkeys(_text_lines(answer)) if line in known and line not in stub]
    commented = sum(1 for line in found if "#" in line or _PROSE.search(line) is not None)
    return len(found), commented


def pasted(answer: str, reference: str, given: str = "") -> int:
    """The number of pasted lines when ``answer`` holds enough of ``reference`` verbatim to be held, else 0."""
    lines, commented = verbatim_lines(answer, reference, given)
    return lines if (lines >= VERBATIM_LINES and commented) or lines >= VERBATIM_CODE_LINES else 0


def _common(prints: Iterable[frozenset]) -> frozenset:
    """The n-grams more than ``max(COMMON_MIN, COMMON_SHARE x class)`` answers share (MOSS's
    ``-m``): code most of the class converges on says nothing about who copied from whom."""
    prints = list(prints)
    limit = max(COMMON_MIN, COMMON_SHARE * len(prints))
    counts = Counter(g for grams in prints for g in grams)
    return frozenset(g for g, count in counts.items() if count > limit)


def _submitted_answers(course: Course, assignment: str, sources: Mapping[str, NotebookNode],
                       students: Iterable[str] | None) -> dict[str, dict[str, str]]:
    """``student -> grade_id -> source`` (grade ids made unique per notebook when an
    assignment has several) from ``submitted/<student>/<assignment>/*.ipynb``."""
    wanted = set(students) if students else None
    answers: dict[str, dict[str, str]] = {}
    submitted = course.path("submitted")
    folders = sorted(p for p in submitted.glob(f"*/{assignment}") if p.is_dir()) if submitted.is_dir() else []
    for folder in folders:
        student = folder.parent.name
        if wanted is not None and student not in wanted:
            continue
        cells: dict[str, str] = {}
        for path in sorted(folder.glob("*.ipynb")):
            name = path.name if path.name in sources else (next(iter(sources)) if len(sources) == 1 else None)
            if name is None:
                continue
            try:
                nb = read(path)
            except Exception:  # noqa: BLE001 - a malformed notebook is reported by inspect_submissions
                continue
            cells.update({_cell_key(sources, name, gid): src for gid, src in answer_sources(nb).items()})
        answers[student] = cells
    return answers


def _cell_key(sources: Mapping[str, NotebookNode], notebook: str, grade_id: str) -> str:
    return grade_id if len(sources) == 1 else f"{Path(notebook).stem}:{grade_id}"


def compare_class(course: Course, assignment: str, students: Iterable[str] | None = None,
                  threshold: float = THRESHOLD) -> ClassComparison:
    """Compare every submission of ``assignment`` (``submitted/``) with the public reference
    and with every other submission, answer cell by answer cell (``students``: only pairs
    among these)."""
    sources = {p.name: read(p) for p in sorted(course.path("source", assignment=assignment).glob("*.ipynb"))}
    stubs: dict[str, str] = {}
    for name, nb in sources.items():
        stubs.update({_cell_key(sources, name, g): s for g, s in stub_sources(nb).items()})
    answers = _submitted_answers(course, assignment, sources, students)
    # the references of the cells someone answered at length (resolving them imports their modules)
    needed = {gid for cells in answers.values() for gid, source in cells.items()
              if not trivial(fingerprint(source, stubs.get(gid, "")))}
    references: dict[str, dict[str, str]] = {}
    for name, nb in sources.items():
        only = {g for g in stub_sources(nb) if _cell_key(sources, name, g) in needed}
        if only:
            references.update({_cell_key(sources, name, g): r for g, r in reference_sources(nb, only).items()})
    solutions = {_cell_key(sources, name, g): src for name, nb in sources.items() for g, src in answer_sources(nb).items()}
    return compare_answers(assignment, answers, stubs, references, threshold, solutions)


def _inputs_key(course: Course, assignment: str, threshold: float) -> str:
    """What a class comparison depends on: the threshold, this module, ``course_utils`` (the references),
    the source notebooks and every submitted notebook of the assignment (their contents); a hash of them."""
    import hashlib
    import json

    import course_utils

    files = sorted(course.path("source", assignment=assignment).glob("*.ipynb"))
    submitted = course.path("submitted")
    if submitted.is_dir():
        files += sorted(submitted.glob(f"*/{assignment}/*.ipynb"))
    package = sorted(Path(course_utils.__file__).parent.rglob("*.py"))  # the references' sources
    stats: list[list[object]] = []
    for path in [Path(__file__), *package]:
        stat = path.stat()
        stats.append([str(path), stat.st_size, stat.st_mtime_ns])
    for path in files:  # contents, not times: two writes within one clock tick have the same time
        try:
            stats.append([str(path), hashlib.sha256(path.read_bytes()).hexdigest()])
        except OSError:
            continue
    return hashlib.sha256(json.dumps([assignment, threshold, stats]).encode()).hexdigest()


def saved_comparison_path(course: Course, assignment: str) -> Path:
    return course.build_dir("flags") / f"{assignment}-similarity.json"


def compare_class_saved(course: Course, assignment: str, threshold: float = THRESHOLD) -> ClassComparison:
    """:func:`compare_class` of the whole class, computed once and saved
    (``build/flags/<assignment>-similarity.json``): read back while no submitted notebook, source
    notebook, threshold or this module has changed since (`course grade` computes it; `course review`,
    `course export` and the LMS exports then read it), computed and saved again otherwise."""
    import json

    key = _inputs_key(course, assignment, threshold)
    path = saved_comparison_path(course, assignment)
    try:
        saved = json.loads(path.read_text())
        if saved.get("key") == key:
            data = saved["comparison"]
            return ClassComparison(data["assignment"], data["threshold"], [Pair(**p) for p in data["pairs"]],
                                   data["compared"], data["trivial"], data["canonical"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    comparison = compare_class(course, assignment, threshold=threshold)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps({"key": key, "comparison": asdict(comparison)}))
    partial.replace(path)
    return comparison


def write_similarity_csv(comparison: ClassComparison, path: Path) -> Path:
    """``build/flags/<assignment>-similarity.csv``: one row per pair over the threshold."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["assignment", "cell", "student", "other", "score", "reference", "threshold"])
        for p in comparison.pairs:
            writer.writerow([p.assignment, p.cell, p.student, p.other, f"{p.score:.3f}", p.reference,
                             f"{comparison.threshold:g}"])
    return path


# ---------------------------------------------------------------------------------------------
# Where the threshold comes from


def calibration(root: Path, names: Sequence[str] | None = None) -> dict[str, list[float]]:
    """The scores behind :data:`THRESHOLD`, per kind of pair, over the course's own answers
    (answer cells of at least :data:`MIN_GRAMS` 5-grams on both sides):

    - ``near-copy``: the solution vs each curated mistake or accepted alternative made by
      editing it (``replace=``);
    - ``separate``: the solution vs each mistake or accepted alternative written whole
      (``source=``);
    - ``reference``: the solution vs its public reference (the best of its references).
    """
    from course_utils.layout import assignments
    from course_grader.authoring.mistakes import Accepted, Mistake, load_accepted, load_mistakes

    scores: dict[str, list[float]] = {"near-copy": [], "separate": [], "reference": []}
    for name in names or assignments(root):
        for path in sorted((Path(root) / "solutions" / name).glob("*.ipynb")):
            nb = read(path)
            solutions = {g: re.sub(r"^[ \t]*### (BEGIN|END)[ ]SOLUTION[ \t]*\n", "", s, flags=re.M)
                         for g, s in answer_sources(nb).items()}
            stubs = stub_sources(nb)
            for gid, refs in reference_sources(nb).items():
                ours = fingerprint(solutions[gid], stubs[gid])
                theirs = [fingerprint(src, stubs[gid]) for src in refs.values()]
                theirs = [g for g in theirs if not trivial(g)]
                if theirs and not trivial(ours):
                    scores["reference"].append(max(similarity(ours, g) for g in theirs))
            candidates: list[Mistake | Accepted] = [*load_mistakes(root, name), *load_accepted(root, name)]
            for item in candidates:
                if item.cell not in stubs:
                    continue
                ours = fingerprint(solutions[item.cell], stubs[item.cell])
                other = fingerprint(item.apply(solutions[item.cell]), stubs[item.cell])
                if not (trivial(ours) or trivial(other)):
                    scores["near-copy" if item.source is None else "separate"].append(similarity(ours, other))
    return scores
