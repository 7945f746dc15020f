"""Numbers the prose quotes, checked against the run they come from.

A notebook's prose quotes results of the ``cpu`` profile ("the encoder reaches 96.8% at 300
labels"). A quoted number is marked where it is written, with an HTML comment that Jupyter does
not render::

    the pretrained encoder reaches 96.8%<!--q--> at 300 labels in 161<!--q--> s

or, for a paragraph that sums up a printed line, with the line itself (the cell's id is for the
reader)::

    <!-- quoted cpu cell-042: "pretrained GPT         test 64.9 ± 11.8%" -->

The check (``course quoted``) reads every marked number of a solution notebook and looks for it,
spelled the same way (``96.8``, ``1,767``, ``-0.34``), and every quoted line (spaces aside),
among the text outputs of the executed
copy of that notebook (``build/executed/cpu/<A>.ipynb``, written by
``make demo PROFILE=cpu``). ``course quoted --record`` keeps those outputs as text in
``benchmarks/results/outputs-cpu/<A>.txt``, committed beside the timings, so the suite checks
the prose against the recorded run without running it (``tests/test_quoted.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

__all__ = ["MARK", "Quote", "QuotedCheck", "quotes", "output_text", "missing_quotes", "record_outputs", "check_quoted"]

MARK = "<!--q-->"
# the number written right before the mark (a sign, digits with thousands commas, decimals), or before
# a percent sign (``96.8%`` or ``96.8 %``) and the mark; a unit goes after the mark: ``1,767<!--q--> s``
_QUOTED = re.compile(r"([-+−]?\d[\d,]*(?:\.\d+)?)(?: ?(?:%|\\%))?" + re.escape(MARK))
_QUOTED_LINE = re.compile(r'<!--\s*quoted\s+cpu\s+[^:>]*:\s*"(.+?)"\s*-->')


@dataclass(frozen=True)
class Quote:
    """One marked number: the markdown cell it is in (index) and its text as written."""

    cell: int
    number: str
    context: str  # a few words before it, to find it in the prose

    def describe(self) -> str:
        return f"cell {self.cell}: {self.number} (\"...{self.context}\")"


def quotes(notebook: nbformat.NotebookNode) -> list[Quote]:
    """Every marked number of ``notebook``'s markdown cells, in order."""
    found = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "markdown":
            continue
        for match in _QUOTED.finditer(cell.source):
            before = cell.source[max(0, match.start() - 40):match.start()].replace("\n", " ")
            found.append(Quote(index, match.group(1).replace("−", "-"), before.strip()))
        for match in _QUOTED_LINE.finditer(cell.source):
            found.append(Quote(index, match.group(1), "a printed line"))
    return found


def output_text(notebook: nbformat.NotebookNode) -> str:
    """The text an executed notebook printed: streams, plain-text results and error messages."""
    parts = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                parts.append(output.get("text", ""))
            elif "data" in output:
                parts.append(output["data"].get("text/plain", ""))
    return "\n".join(parts)


def _printed(number: str, text: str) -> bool:
    """``number`` appears in ``text`` as a number of its own (``96.8`` not inside ``196.85``); a quoted
    line appears in it, runs of spaces aside."""
    if not re.fullmatch(r"[-+]?\d[\d,]*(?:\.\d+)?", number):
        return " ".join(number.split()) in " ".join(text.split())
    return re.search(rf"(?<![\d.,]){re.escape(number.lstrip('+'))}(?![\d]|[.,]\d)", text) is not None


def missing_quotes(notebook: nbformat.NotebookNode, printed: str) -> list[Quote]:
    """The marked numbers of ``notebook`` that ``printed`` (an executed run's output text) lacks."""
    return [q for q in quotes(notebook) if not _printed(q.number, printed)]


def record_outputs(executed: Path, out: Path) -> Path:
    """Write the output text of the executed notebook ``executed`` to ``out`` (for the suite)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(output_text(nbformat.read(str(executed), as_version=4)))
    return out


@dataclass(frozen=True)
class QuotedCheck:
    """One assignment's quoted numbers against a run: ``where`` the outputs came from (None: no
    run to compare with), and the marked quotes that run does not print."""

    assignment: str
    marked: int
    where: Path | None
    missing: tuple[Quote, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.missing and (self.where is not None or not self.marked)


def check_quoted(root: Path, assignment: str, executed: Path, *, record: bool = False, recorded: bool = False) -> QuotedCheck:
    """Compare ``assignment``'s marked numbers with its executed copy in ``executed/<A>/<A>.ipynb`` (or, where
    there is none or ``recorded``, with ``benchmarks/results/outputs-cpu/<A>.txt``); ``record`` keeps the
    executed copy's output text there first."""
    source = nbformat.read(str(root / "solutions" / assignment / f"{assignment}.ipynb"), as_version=4)
    marked = quotes(source)
    run = executed / assignment / f"{assignment}.ipynb"
    text_file = root / "benchmarks" / "results" / "outputs-cpu" / f"{assignment}.txt"
    if record and run.is_file():
        record_outputs(run, text_file)
    if run.is_file() and not recorded:
        printed, where = output_text(nbformat.read(str(run), as_version=4)), run
    elif text_file.is_file():
        printed, where = text_file.read_text(), text_file
    else:
        return QuotedCheck(assignment, len(marked), None)
    return QuotedCheck(assignment, len(marked), where, tuple(missing_quotes(source, printed)))
