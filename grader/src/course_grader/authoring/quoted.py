"""Numbers the prose quotes, checked against the line of the run they come from.

A notebook's prose quotes results of the ``cpu`` profile ("the encoder reaches 96.8% at 300
labels"). A quoted number is marked where it is written, with an HTML comment that Jupyter does
not render, naming the printed line it comes from by a few of its words (its *label*)::

    the pretrained encoder reaches 96.8%<!--q pretrained encoder--> at 300 labels

or, for a paragraph that sums up a printed line, with the line itself (the cell's id is for the
reader)::

    <!-- quoted cpu cell-042: "pretrained GPT         test 64.9 ± 11.8%" -->

The check (``course quoted``) reads every marked number of a solution notebook and looks for one
printed line that holds both its label and the number, spelled the same way (``96.8``, ``1,767``,
``-0.34``; spaces and case of the label aside), and for every quoted line within one printed line,
among the text outputs of the executed copy of that notebook (``build/executed/cpu/<A>.ipynb``,
written by ``make demo PROFILE=cpu``). A number found only on another line (the 90.3 of one
model where the prose means another's) is not printed. A bare ``<!--q-->`` names no line and is
reported as such. ``course quoted --record`` keeps those outputs as text in
``benchmarks/results/outputs-cpu/<A>.txt``, committed beside the timings, so the suite checks
the prose against the recorded run without running it (``tests/course/test_quoted.py``).

The other way round, :func:`unmarked_numbers` finds numbers the prose writes without a marker that
the run prints: a decimal (``45.7``, ``0.64``) outside code, maths, headings and comments, printed as
a number of its own, which is neither a literal of the notebook's code (a setting such as ``0.1``)
nor a section number (``section 7.2``). One that is not a quote (a definition that happens to be
printed, a rounded reading) says so with ``<!--nq-->`` right after it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

__all__ = ["MARK", "NOT_QUOTED", "Quote", "QuotedCheck", "quotes", "output_text", "missing_quotes",
           "unmarked_numbers", "record_outputs", "check_quoted"]

MARK = "<!--q-->"  # the bare marker: names no printed line (``course quoted`` reports it)
NOT_QUOTED = "<!--nq-->"
_NUMBER = r"[-+−]?\d[\d,]*(?:\.\d+)?"
# the number written right before the mark (a sign, digits with thousands commas, decimals), or before
# a percent sign (``96.8%`` or ``96.8 %``) and the mark; the mark may carry the label of the printed
# line (``<!--q transformer-->``); a unit goes after the mark: ``1,767<!--q train s--> s``
_QUOTED = re.compile(rf"({_NUMBER})(?: ?(?:%|\\%))?<!--q(?:\s+((?:(?!-->).)*?))?\s*-->")
_QUOTED_LINE = re.compile(r'<!--\s*quoted\s+cpu\s+[^:>]*:\s*"(.+?)"\s*-->')
# a decimal the prose writes (sign, thousands commas), not inside a longer number or a word
_DECIMAL = re.compile(r"(?<![\w.,\-−+])([-+−]?\d[\d,]*\.\d+)(?![\d]|[.,]\d)")
_AFTER_DECIMAL = re.compile(r"\s?(?:%|\\%)?\s?\**<!--n?q[\s-]")


@dataclass(frozen=True)
class Quote:
    """One marked number: the markdown cell it is in (index), its text as written and the label of the
    printed line it comes from ("" for none; a quoted line is its own label)."""

    cell: int
    number: str
    context: str  # a few words before it, to find it in the prose
    label: str = ""

    @property
    def is_line(self) -> bool:
        return self.context == "a printed line"

    def describe(self) -> str:
        on = f" on the line of '{self.label}'" if self.label and not self.is_line else ""
        return f"cell {self.cell}: {self.number}{on} (\"...{self.context}\")"


def quotes(notebook: nbformat.NotebookNode) -> list[Quote]:
    """Every marked number of ``notebook``'s markdown cells, in order."""
    found = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "markdown":
            continue
        for match in _QUOTED.finditer(cell.source):
            before = cell.source[max(0, match.start() - 40):match.start()].replace("\n", " ")
            label = " ".join((match.group(2) or "").split())
            found.append(Quote(index, match.group(1).replace("−", "-"), before.strip(), label))
        for match in _QUOTED_LINE.finditer(cell.source):
            found.append(Quote(index, match.group(1), "a printed line", match.group(1)))
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


def _squeezed(text: str) -> str:
    return " ".join(text.split()).casefold()


def _has_number(number: str, text: str) -> bool:
    """``number`` appears in ``text`` as a number of its own (``96.8`` not inside ``196.85``)."""
    return re.search(rf"(?<![\d.,]){re.escape(number.lstrip('+'))}(?![\d]|[.,]\d|[eE][-+]?\d)", text) is not None


def _printed(number: str, text: str) -> bool:
    """``number`` appears in ``text`` as a number of its own; a quoted line appears in it, runs of spaces
    aside (anywhere: :func:`_on_its_line` asks for one line)."""
    if not re.fullmatch(r"[-+]?\d[\d,]*(?:\.\d+)?", number):
        return _squeezed(number) in _squeezed(text)
    return _has_number(number, text)


def _on_its_line(quote: Quote, printed: str) -> bool:
    """One printed line holds the quote: a quoted line within it, or a number together with its label."""
    for line in printed.splitlines():
        if quote.is_line:
            if _squeezed(quote.number) in _squeezed(line):
                return True
        elif quote.label and _squeezed(quote.label) in _squeezed(line) and _has_number(quote.number, line):
            return True
    return False


def missing_quotes(notebook: nbformat.NotebookNode, printed: str) -> list[Quote]:
    """The marked numbers of ``notebook`` that ``printed`` (an executed run's output text) does not print
    on their own line: with their label, or (a quoted line) within one line; a bare ``<!--q-->``, which
    names no line, is always among them."""
    return [q for q in quotes(notebook) if not _on_its_line(q, printed)]


def _prose(source: str) -> str:
    """A markdown cell's prose, with code, maths, link targets, headings and comments other than
    markers blanked (same length: positions still point into the source)."""
    blank = lambda m: " " * len(m.group(0))  # noqa: E731
    for pattern, flags in ((r"```.*?```", re.S), (r"\$\$.*?\$\$", re.S), (r"\$[^$\n]*\$", 0), (r"`[^`\n]*`", 0),
                           (r"\]\([^)]*\)", 0), (r"^#+ .*$", re.M), (r"<!--(?!n?q[\s-]).*?-->", re.S)):
        source = re.sub(pattern, blank, source, flags=flags)
    # a marker's label is not prose either (``<!--q factor 0.3-->``)
    return re.sub(r"(<!--n?q)((?:(?!-->).)*)(?=-->)", lambda m: m.group(1) + " " * len(m.group(2)), source)


def unmarked_numbers(notebook: nbformat.NotebookNode, printed: str) -> list[Quote]:
    """The decimals ``notebook``'s prose writes without a marker that ``printed`` (the run's output text)
    prints as numbers of their own: quotes nobody checks. Settings (a literal of the notebook's code),
    section numbers (``section 7.2``) and numbers followed by ``<!--nq-->`` are not quotes."""
    code = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "code")
    found = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "markdown":
            continue
        prose = _prose(cell.source)
        for match in _DECIMAL.finditer(prose):
            number = match.group(1).replace("−", "-")
            before = prose[max(0, match.start() - 40):match.start()]
            if (_AFTER_DECIMAL.match(prose, match.end()) or re.search(r"(?:section|§)\s*$", before, re.I)
                    or _has_number(number.lstrip("+-"), code) or not _has_number(number, printed)):
                continue
            found.append(Quote(index, number, " ".join(before.split())))
    return found


def record_outputs(executed: Path, out: Path) -> Path:
    """Write the output text of the executed notebook ``executed`` to ``out`` (for the suite)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(output_text(nbformat.read(str(executed), as_version=4)))
    return out


@dataclass(frozen=True)
class QuotedCheck:
    """One assignment's quoted numbers against a run: ``where`` the outputs came from (None: no
    run to compare with), the marked quotes that run does not print on their line, and the numbers
    the prose writes unmarked that it prints."""

    assignment: str
    marked: int
    where: Path | None
    missing: tuple[Quote, ...] = ()
    unmarked: tuple[Quote, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.missing and not self.unmarked and (self.where is not None or not self.marked)


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
    return QuotedCheck(assignment, len(marked), where, tuple(missing_quotes(source, printed)),
                       tuple(unmarked_numbers(source, printed)))
