"""The numbers the prose quotes (marked ``<!--q LABEL-->``) are printed, on the line their label names, by the
cpu run they come from; and the prose writes no number of that run unmarked."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
from course_grader import cli
from course_utils.layout import assignments
from course_grader.authoring.quoted import missing_quotes, output_text, quotes, unmarked_numbers

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "benchmarks" / "results" / "outputs-cpu"
# anything that looks like a quote marker, spelled right or not: each must be one that quotes() reads
LOOSE_MARKER = re.compile(r"<!--\s*q\b|<!--\s*quoted\b", re.I)


def _notebook(markdown: str, printed: str) -> nbformat.NotebookNode:
    run = nbformat.v4.new_code_cell("print(...)")
    run.outputs = [nbformat.v4.new_output("stream", name="stdout", text=printed)]
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(markdown), run])


def test_marked_numbers_are_read_as_written():
    nb = _notebook("reaches 96.8%<!--q held-out--> at 300 labels, 1,767<!--q train s--> s; a slope of −0.34<!--q slope-->, "
                   "| 21.3 %<!--q  RNN   no-->** | and 12 unmarked, 4.5<!--nq--> not a quote", "")
    assert [(q.number, q.label) for q in quotes(nb)] == [("96.8", "held-out"), ("1,767", "train s"), ("-0.34", "slope"),
                                                        ("21.3", "RNN no")]
    assert quotes(nb)[0].cell == 0 and quotes(nb)[0].context.endswith("reaches")


def test_a_quote_must_be_printed_as_a_number_of_its_own_on_its_line():
    nb = _notebook("96.8%<!--q accuracy--> and 80.0%<!--q held-out--> and 5<!--q epochs--> and 2.09<!--q slope-->",
                   "accuracy 196.85%\nheld-out 80.0% | 5 epochs\nslope 2.09e-07")
    assert [q.number for q in missing_quotes(nb, output_text(nb))] == ["96.8", "2.09"]  # not inside 196.85, 2.09e-07
    assert missing_quotes(nb, "accuracy 96.8\nheld-out 80.0 5 epochs\nslope 2.09") == []


def test_a_number_printed_on_another_line_is_not_printed():
    """The check is per line: the RNN's 90.3 is not the transformer's, though both lines are in the output."""
    printed = "RNN + attention  all lengths 90.3 ± 1.9\ntransformer      all lengths 99.0 ± 0.3"
    right = _notebook("the RNN with attention reached 90.3<!--q RNN + attention--> ± 1.9<!--q rnn +  attention--> %", "")
    wrong = _notebook("the transformer reached 90.3<!--q transformer--> % and the RNN 99.0<!--q RNN--> %", "")
    assert missing_quotes(right, printed) == []
    assert [(q.number, q.label) for q in missing_quotes(wrong, printed)] == [("90.3", "transformer"), ("99.0", "RNN")]


def test_a_bare_marker_names_no_line_and_is_reported():
    nb = _notebook("reaches 96.8%<!--q--> at 300 labels", "")
    assert [(q.number, q.label) for q in missing_quotes(nb, "held-out 96.8%")] == [("96.8", "")]


def test_a_quoted_line_must_be_printed_within_one_line_spaces_aside():
    nb = _notebook('sums up <!-- quoted cpu cell-042: "pretrained GPT   test 64.9 ± 11.8%" --> and '
                   '<!-- quoted cpu cell-043: "control test 48.9%" --> and <!-- quoted cpu cell-044: "contrast 62.9% loss" -->', "")
    assert [q.number for q in quotes(nb)] == ["pretrained GPT   test 64.9 ± 11.8%", "control test 48.9%", "contrast 62.9% loss"]
    printed = "pretrained GPT test 64.9 ± 11.8%   contrast 62.9%\nloss 1.2\ncontrol test 48.0%"
    assert [q.number for q in missing_quotes(nb, printed)] == ["control test 48.9%", "contrast 62.9% loss"]


def test_an_unmarked_number_the_run_prints_is_caught():
    """A number of the run written without a marker is a quote nobody checks: found, wherever the prose writes
    it (a sentence, a table, a range); settings, section numbers, maths, code and ``<!--nq-->`` are not."""
    printed = "transformer  exact match 98.8%  char 99.9%\nrange [89.0-92.5]\nfloor H(q) = 0.643\nsmoothing 0.1\n7.2 s"
    prose = ("In section 7.2 the transformer was exact on 98.8 % of the strings (characters: **99.9%**), "
             "over seeds [89.0–92.5]; its floor is $0.643$, `0.643` in code, 0.643<!--nq--> by definition, "
             "label smoothing 0.1, and 98.8%<!--q exact match--> once marked.\n\n### 7.2 Equal training")
    nb = _notebook(prose, printed)
    nb.cells.append(nbformat.v4.new_code_cell("train(label_smoothing=0.1)"))
    assert [q.number for q in unmarked_numbers(nb, printed)] == ["98.8", "99.9", "89.0", "92.5"]
    assert unmarked_numbers(nb, "nothing of the sort") == []


def test_course_quoted_reports_what_the_run_does_not_print(tmp_path, monkeypatch, capsys):
    name = "00_welcome"
    (tmp_path / "solutions" / name).mkdir(parents=True)
    nbformat.write(_notebook("took 3.1<!--q took--> s and 42<!--q took--> and 2.5 unmarked and 7<!--q-->", ""),
                   str(tmp_path / "solutions" / name / f"{name}.ipynb"))
    (tmp_path / "build" / "executed" / "cpu" / name).mkdir(parents=True)
    nbformat.write(_notebook("", "took 3.1 s\n42 steps, 7 epochs in 2.5 s"),
                   str(tmp_path / "build" / "executed" / "cpu" / name / f"{name}.ipynb"))
    monkeypatch.setenv("COURSE_ROOT", str(tmp_path))
    monkeypatch.setattr(cli, "_names", lambda root, requested: [name])
    assert cli.main(["quoted", "--record"]) == 1
    out = capsys.readouterr().out
    assert "1 of 3 quoted number(s)" in out and "NOT PRINTED cell 0: 42 on the line of 'took'" in out
    assert "NO LINE NAMED (<!--q LABEL-->) cell 0: 7" in out and "UNMARKED cell 0: 2.5" in out
    assert (tmp_path / "benchmarks" / "results" / "outputs-cpu" / f"{name}.txt").read_text().strip().startswith("took 3.1 s")


def test_course_quoted_reads_an_executed_folder_outside_the_repository(tmp_path, monkeypatch, capsys):
    """A reviewer's own run kept elsewhere (`course quoted --executed /tmp/run`) is named by its path, not refused."""
    name = "00_welcome"
    root, elsewhere = tmp_path / "course", tmp_path / "run"
    (root / "solutions" / name).mkdir(parents=True)
    nbformat.write(_notebook("took 3.1<!--q took--> s", ""), str(root / "solutions" / name / f"{name}.ipynb"))
    (elsewhere / name).mkdir(parents=True)
    nbformat.write(_notebook("", "took 3.1 s"), str(elsewhere / name / f"{name}.ipynb"))
    monkeypatch.setenv("COURSE_ROOT", str(root))
    monkeypatch.setattr(cli, "_names", lambda root, requested: [name])
    assert cli.main(["quoted", "--executed", str(elsewhere)]) == 0
    assert f"1 of 1 quoted number(s) printed by {elsewhere / name / name}.ipynb" in capsys.readouterr().out


def test_quoted_numbers_are_in_the_recorded_cpu_run():
    """Every marked number of every notebook is printed, on the line its label names, by its recorded cpu run
    (`course quoted --record` after `make demo PROFILE=cpu`); a notebook that marks numbers must have a recorded
    run; and no notebook's prose writes a number of that run unmarked."""
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
        if recorded.is_file():
            problems += [f"{assignment} unmarked {q.describe()}" for q in unmarked_numbers(source, recorded.read_text())]
    assert not problems, "quoted but not printed by the cpu run:\n" + "\n".join(problems)
