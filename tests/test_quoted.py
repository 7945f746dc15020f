"""The numbers the prose quotes (marked ``<!--q-->``) are printed by the cpu run they come from."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
from course_grader import cli
from course_utils.layout import assignments
from course_grader.authoring.quoted import missing_quotes, output_text, quotes

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "benchmarks" / "results" / "outputs-cpu"
# anything that looks like a quote marker, spelled right or not: each must be one that quotes() reads
LOOSE_MARKER = re.compile(r"<!--\s*q\s*-->|<!--\s*quoted\b", re.I)


def _notebook(markdown: str, printed: str) -> nbformat.NotebookNode:
    run = nbformat.v4.new_code_cell("print(...)")
    run.outputs = [nbformat.v4.new_output("stream", name="stdout", text=printed)]
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(markdown), run])


def test_marked_numbers_are_read_as_written():
    nb = _notebook("reaches 96.8%<!--q--> at 300 labels, 1,767<!--q--> s; a slope of −0.34<!--q-->, "
                   "| 21.3 %<!--q--> | and 12 unmarked", "")
    assert [q.number for q in quotes(nb)] == ["96.8", "1,767", "-0.34", "21.3"]
    assert quotes(nb)[0].cell == 0 and quotes(nb)[0].context.endswith("reaches")


def test_a_quote_must_be_printed_as_a_number_of_its_own():
    nb = _notebook("96.8%<!--q--> and 80.0%<!--q--> and 5<!--q-->", "accuracy 196.85%\nheld-out 80.0% | 5 epochs")
    assert [q.number for q in missing_quotes(nb, output_text(nb))] == ["96.8"]  # not inside 196.85
    assert missing_quotes(nb, "96.8 80.0 5") == []


def test_a_quoted_line_must_be_printed_spaces_aside():
    nb = _notebook('sums up <!-- quoted cpu cell-042: "pretrained GPT   test 64.9 ± 11.8%" --> and '
                   '<!-- quoted cpu cell-043: "control test 48.9%" -->', "")
    assert [q.number for q in quotes(nb)] == ["pretrained GPT   test 64.9 ± 11.8%", "control test 48.9%"]
    printed = "pretrained GPT test 64.9 ± 11.8%   contrast 62.9%\ncontrol test 48.0%"
    assert [q.number for q in missing_quotes(nb, printed)] == ["control test 48.9%"]


def test_course_quoted_reports_what_the_run_does_not_print(tmp_path, monkeypatch, capsys):
    name = "00_welcome"
    (tmp_path / "solutions" / name).mkdir(parents=True)
    nbformat.write(_notebook("took 3.1<!--q--> s and 42<!--q-->", ""), str(tmp_path / "solutions" / name / f"{name}.ipynb"))
    (tmp_path / "build" / "executed" / "cpu" / name).mkdir(parents=True)
    nbformat.write(_notebook("", "took 3.1 s"), str(tmp_path / "build" / "executed" / "cpu" / name / f"{name}.ipynb"))
    monkeypatch.setenv("COURSE_ROOT", str(tmp_path))
    monkeypatch.setattr(cli, "_names", lambda root, requested: [name])
    assert cli.main(["quoted", "--record"]) == 1
    out = capsys.readouterr().out
    assert "1 of 2 quoted number(s)" in out and "NOT PRINTED cell 0: 42" in out
    assert (tmp_path / "benchmarks" / "results" / "outputs-cpu" / f"{name}.txt").read_text().strip() == "took 3.1 s"


def test_quoted_numbers_are_in_the_recorded_cpu_run():
    """Every marked number of every notebook is printed by its recorded cpu run (`course quoted --record`
    after `make demo PROFILE=cpu`); a notebook that marks numbers must have a recorded run."""
    problems = []
    for assignment in assignments(ROOT):
        source = nbformat.read(str(ROOT / "solutions" / assignment / f"{assignment}.ipynb"), as_version=4)
        marked = quotes(source)
        markers = sum(len(LOOSE_MARKER.findall(cell.source)) for cell in source.cells if cell.cell_type == "markdown")
        if markers != len(marked):  # an unread marker is a number nobody checks
            problems.append(f"{assignment} has {markers} quote markers but only {len(marked)} are read "
                            "(a misspelt marker, a space before it, a marked word?)")
        recorded = RECORDED / f"{assignment}.txt"
        if marked and not recorded.is_file():
            problems.append(f"{assignment} marks {len(marked)} quoted numbers but has no recorded cpu run "
                            "(make demo PROFILE=cpu, then course quoted --record)")
        elif marked:
            problems += [f"{assignment} {q.describe()}" for q in missing_quotes(source, recorded.read_text())]
    assert not problems, "quoted but not printed by the cpu run:\n" + "\n".join(problems)
