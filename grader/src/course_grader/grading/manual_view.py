"""The instructor's manual-grading view: each written answer beside the student's own run.

Autograding re-executes a submission in the ``ci`` profile, so the formgrader shows barely
trained numbers beside an answer that quotes the student's ``cpu`` run. This view keeps what the
student saw: for every written (manually graded) answer, the outputs of the cells the question
is about, *as submitted*, marked as the student's own, unverified run.

Which cells a question is about: the code cells listed in the written-answer cell's
``metadata.course.run_cells`` (cell ids, in ``solutions/``) or, by default, the code cells of the
question's section after its last test cell (where the notebook prints what the question asks
for). Cells are found in the submission by id, else by their source.

Beside each answer: the model answer (the written cell of ``solutions/``), the points and the rubric
(the cell's ``metadata.course.rubric``, ``[[points, "what earns them"], ...]``, else three levels
from the points), and a warning when the run is in a smaller profile than the question asks for
(``metadata.course.profile``, else the prompt's "the `cpu` profile or larger" or "*your* run in the
`cpu` profile"; profiles ordered
ci < cpu < gpu), read from the run's setup line and from the header the answer pastes.

Only plain text and PNG/JPEG images are shown: a submission is untrusted, so its HTML and
JavaScript outputs are shown as text. Test cells are never shown (their outputs may carry
checker messages), and nothing is read from the autograded copy.

    build/manual/<assignment>/<student>.html   written by `course grade`, listed by `course review`
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from nbformat import NotebookNode

from course_utils.cells import nbgrader_meta, read

if TYPE_CHECKING:
    from course_grader.course import Course

__all__ = ["PROFILE_ORDER", "WrittenQuestion", "profile_warning", "written_questions", "view_path", "write_view",
           "write_views"]

_HEADING = re.compile(r"#{1,2} ")
_RUN_HEADER = re.compile(r"seed:|profile", re.IGNORECASE)
_PROFILE_IN_HEADER = re.compile(r"profile:\s*(\w+)")
# the points rubric a model answer ends with: "**Rubric (2 points).** 1 point: ..."
_RUBRIC = re.compile(r"^\s*\*\*Rubric\b[^*]*\*\*[ \t]*\n?", re.M)
_ASKED_PROFILE = re.compile(r"`(ci|cpu|gpu)` profile or larger|your\*? run in the `(ci|cpu|gpu)` profile")
PROFILE_ORDER = ("ci", "cpu", "gpu")  # smaller to larger: a run in a larger profile than asked is fine


@dataclass
class WrittenQuestion:
    grade_id: str
    points: float
    prompt: str                 # the markdown just above the answer cell (the question itself)
    run_cells: list[tuple[str, str]]  # (cell id, source) of the cells whose outputs the answer uses
    model_answer: str = ""      # the written cell of solutions/ (the release has the stub instead)
    rubric: list[tuple[float, str]] | None = None  # the cell's metadata.course.rubric; None: the default
    profile: str | None = None  # the smallest profile the question's numbers must come from; None: any
    rubric_text: str = ""       # the rubric the model answer's own text ends with ("**Rubric (N points).** ...")

    def rubric_levels(self) -> list[tuple[float, str]]:
        """The rubric as levels: the cell's own, else full / half / none of the points (shown only where the
        model answer states no rubric of its own: one rubric per answer)."""
        if self.rubric:
            return self.rubric
        return [(self.points, "the reasoning uses the student's own printed numbers and reaches the model answer's "
                              "conclusion (or a different one the numbers support)"),
                (self.points / 2, "part of it: the conclusion without the numbers that show it, or the numbers "
                                  "without the reasoning"),
                (0.0, "no answer, or one the printed numbers contradict")]


def _is_test(cell: NotebookNode) -> bool:
    meta = nbgrader_meta(cell)
    return bool(meta.get("grade")) and not meta.get("solution")


def _is_written(cell: NotebookNode) -> bool:
    meta = nbgrader_meta(cell)
    return cell.cell_type == "markdown" and bool(meta.get("grade")) and bool(meta.get("solution"))


def written_questions(source_nb: NotebookNode) -> list[WrittenQuestion]:
    """The written questions of a solution notebook, each with the cells its answer draws on."""
    cells = source_nb.cells
    by_id = {cell.get("id"): cell for cell in cells}
    questions = []
    for index, cell in enumerate(cells):
        if not _is_written(cell):
            continue
        listed = cell.metadata.get("course", {}).get("run_cells")
        if listed:
            chosen = [by_id[i] for i in listed if i in by_id]
        else:
            start = max((i for i in range(index) if cells[i].cell_type == "markdown"
                         and _HEADING.match(cells[i].source.lstrip())), default=0)
            after_test = max((i for i in range(start, index) if _is_test(cells[i])), default=start)
            chosen = [c for c in cells[after_test + 1:index] if c.cell_type == "code" and not nbgrader_meta(c)]
        prompt = cells[index - 1].source if index and cells[index - 1].cell_type == "markdown" else ""
        meta = nbgrader_meta(cell)
        course = cell.metadata.get("course", {})
        asked = _ASKED_PROFILE.search(prompt)
        rubric = [(float(points), str(text)) for points, text in course.get("rubric", [])] or None
        split = _RUBRIC.search(cell.source)
        model, rubric_text = (cell.source[:split.start()].strip(), cell.source[split.end():].strip()) if split else (cell.source, "")
        questions.append(WrittenQuestion(str(meta.get("grade_id")), float(meta.get("points", 0) or 0), prompt,
                                         [(str(c.get("id", "")), c.source) for c in chosen], model, rubric,
                                         course.get("profile") or (asked.group(1) or asked.group(2) if asked else None),
                                         rubric_text))
    return questions


def _find(submission: NotebookNode, cell_id: str, source: str) -> NotebookNode | None:
    for cell in submission.cells:
        if cell.cell_type == "code" and cell_id and cell.get("id") == cell_id and not _is_test(cell):
            return cell
    for cell in submission.cells:
        if cell.cell_type == "code" and cell.source.strip() == source.strip() and not _is_test(cell):
            return cell
    return None


def _outputs_html(cell: NotebookNode) -> str:
    parts = []
    for output in cell.get("outputs", []):
        kind = output.get("output_type")
        if kind == "stream":
            parts.append(f"<pre>{html.escape(''.join(output.get('text', '')))}</pre>")
        elif kind in ("execute_result", "display_data"):
            data = output.get("data", {})
            image = next((m for m in ("image/png", "image/jpeg") if m in data), None)
            if image and re.fullmatch(r"[A-Za-z0-9+/=\s]+", "".join(data[image])):
                parts.append(f'<img alt="figure" src="data:{image};base64,{"".join(data[image]).strip()}">')
            elif "text/plain" in data:
                parts.append(f"<pre>{html.escape(''.join(data['text/plain']))}</pre>")
        elif kind == "error":
            parts.append(f"<pre class=error>{html.escape(str(output.get('ename')))}: "
                         f"{html.escape(str(output.get('evalue')))}</pre>")
    return "\n".join(parts) or "<p class=none>(no output in the submitted notebook)</p>"


def _run_header(submission: NotebookNode) -> str:
    """The line the notebook's setup cell printed (device, profile, seed), if the student ran it."""
    for cell in submission.cells[:8]:
        for output in cell.get("outputs", []):
            for line in "".join(output.get("text", "")).splitlines():
                if _RUN_HEADER.search(line):
                    return line.strip()
    return ""


def profile_warning(question: WrittenQuestion, header: str, answer: str | None) -> str:
    """A line when the run the answer draws on is in a smaller profile than the question asks for
    (from the setup line the notebook printed, and from a header pasted in the answer); '' otherwise."""
    if question.profile not in PROFILE_ORDER:
        return ""
    runs = {m.group(1) for text in (header, answer or "") for m in _PROFILE_IN_HEADER.finditer(text)}
    if not runs:
        return (f"This question asks for the {question.profile} profile or larger; neither the submitted run nor "
                "the answer says which profile its numbers came from.")
    smaller = sorted(p for p in runs if p in PROFILE_ORDER and PROFILE_ORDER.index(p) < PROFILE_ORDER.index(question.profile))
    if smaller:
        return (f"This question asks for the {question.profile} profile or larger; the submission's run was in the "
                f"{' and '.join(smaller)} profile: its numbers are not the ones the question discusses.")
    return ""


def view_path(course: Course, assignment: str, student: str) -> Path:
    return course.build_dir("manual") / assignment / f"{student}.html"


_STYLE = """body{font-family:sans-serif;max-width:60em;margin:2em auto;line-height:1.4}
.q{border-top:2px solid #446;margin-top:2em;padding-top:.5em}
.answer{background:#f4f7ff;border-left:4px solid #446;padding:.5em 1em;white-space:pre-wrap}
.run{border:1px dashed #b60;padding:.5em 1em;margin:.8em 0}
.run h4{color:#b60;margin:.2em 0}
pre{background:#f6f6f6;padding:.4em;overflow-x:auto}
img{max-width:100%}
.none,.error{color:#a00}
.model{background:#f3fbf3;border-left:4px solid #484;padding:.5em 1em;white-space:pre-wrap}
.warn{background:#fff3e0;border:1px solid #b60;padding:.4em 1em;font-weight:bold}
table.rubric td{padding:.2em .6em;vertical-align:top}"""


def render_view(assignment: str, student: str, source_nb: NotebookNode, submission: NotebookNode) -> str:
    """The HTML page (a string) for one student's written answers."""
    answers = {nbgrader_meta(c).get("grade_id"): c.source for c in submission.cells if _is_written(c)}
    header = _run_header(submission)
    body = [f"<h1>{html.escape(assignment)}: written answers of {html.escape(student)}</h1>",
            "<p>Each answer is shown beside the outputs of the cells it draws on, <b>as the student submitted "
            "them</b>: the student's own run, <b>unverified</b> (autograding re-ran the notebook in the "
            "<code>ci</code> profile; these are not those outputs). Grade the reasoning against these "
            "numbers.</p>",
            f"<p>The submitted notebook's setup line: <code>{html.escape(header or 'not found (setup cell not run?)')}</code></p>"]
    for q in written_questions(source_nb):
        body.append(f"<div class=q><h2>{html.escape(q.grade_id)} ({q.points:g} points)</h2>")
        body.append(f"<details><summary>the question</summary><pre>{html.escape(q.prompt)}</pre></details>")
        answer = answers.get(q.grade_id)
        warning = profile_warning(q, header, answer)
        if warning:
            body.append(f"<p class=warn>{html.escape(warning)}</p>")
        body.append(f"<h3>The answer</h3><div class=answer>{html.escape(answer) if answer is not None else '(no answer cell)'}</div>")
        body.append(f"<h3>The model answer</h3><div class=model>{html.escape(q.model_answer) or '(none in the source)'}</div>")
        if q.rubric_text and not q.rubric:  # the model answer's own rubric, alone (two rubrics could disagree)
            body.append(f"<h3>Rubric ({q.points:g} points)</h3><div class=model>{html.escape(q.rubric_text)}</div>")
        else:
            rows = "".join(f"<tr><td>{points:g}</td><td>{html.escape(text)}</td></tr>" for points, text in q.rubric_levels())
            body.append(f"<h3>Rubric ({q.points:g} points)</h3><table class=rubric>{rows}</table>")
        for cell_id, source in q.run_cells:
            found = _find(submission, cell_id, source)
            first = source.strip().splitlines()[0] if source.strip() else ""
            body.append(f"<div class=run><h4>the student's own run, unverified: <code>{html.escape(first[:100])}</code></h4>")
            body.append(_outputs_html(found) if found is not None else "<p class=none>(cell not found in the submission)</p>")
            body.append("</div>")
        body.append("</div>")
    return (f"<!doctype html><html><head><meta charset=utf-8><title>{html.escape(assignment)} / {html.escape(student)}"
            f"</title><style>{_STYLE}</style></head><body>{''.join(body)}</body></html>")


def write_view(course: Course, assignment: str, student: str) -> Path | None:
    """Write the view from ``submitted/<student>/<assignment>/``; None when there is nothing to show."""
    sources = sorted(course.path("source", assignment=assignment).glob("*.ipynb"))
    if not sources:
        return None
    source_nb = read(sources[0])
    if not written_questions(source_nb):
        return None
    submitted = course.path("submitted", student, assignment) / sources[0].name
    try:
        submission = read(submitted)
    except Exception:  # noqa: BLE001 - a malformed submission: grading reports it; no view
        return None
    path = view_path(course, assignment, student)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_view(assignment, student, source_nb, submission), encoding="utf-8")
    return path


def write_views(course: Course, assignment: str, students: Sequence[str]) -> list[Path]:
    return [p for p in (write_view(course, assignment, s) for s in students) if p is not None]
