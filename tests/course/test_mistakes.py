"""Every curated mistake is rejected by the test cells it names (one kernel per notebook).

`make test` runs `pytest --nbval-lax` over every solution notebook; each notebook's kernel,
once nbval has run it top to bottom without an error, is handed to its case here (see
conftest.py), so the mistakes run in it and no notebook runs twice. Run alone (no nbval), a
case starts its own kernel and runs the solution first: any cell that raises fails the test.

See :mod:`course_grader.authoring.rejection`; the real nbgrader grading of the solutions, the blank
release and a student with one mistake per exercise is in test_grading.py.
"""

from __future__ import annotations

import pytest

from collections import Counter

from course_grader.authoring.mistakes import KINDS, Mistake, load_accepted, load_mistakes
from course_grader.authoring.rejection import check_rejections

from tests.conftest import ROOT, assignment_names, take_nbval_kernel

pytestmark = pytest.mark.slow

# kinds of curated mistake that the visible tests must catch (they break a convention section 6 of 00 states)
VISIBLE_KINDS = {"device", "dtype", "autograd"}


@pytest.mark.parametrize("assignment", assignment_names())
def test_every_curated_mistake_is_rejected_and_every_right_answer_accepted(assignment):
    mistakes = load_mistakes(ROOT, assignment)
    accepted = load_accepted(ROOT, assignment)
    kernel = take_nbval_kernel(assignment)  # nbval's, after it ran the whole solution; or None
    try:
        results = check_rejections(ROOT, assignment, [*mistakes, *accepted],
                                   running=kernel.km.get_connection_info() if kernel else None)
    finally:
        if kernel is not None:
            kernel.stop()
    problems = [r.describe() for r in results if not r.ok]
    assert not problems, "\n".join(problems)
    assert len(results) == 1 + len(mistakes) + len(accepted), "every mistake and right answer must be checked"
    # a rule a student can check before submitting (issue 34, item 5): the visible tests already reject every
    # mistake of these kinds, in the notebook and in `course check`, not only the hidden tests at grading
    unseen = [f"{r.mistake.name!r} [{r.mistake.kind}] is rejected only by the hidden tests" for r in results
              if isinstance(r.mistake, Mistake) and r.mistake.kind in VISIBLE_KINDS and not r.visible]
    assert not unseen, "\n".join(unseen)


def test_every_solution_notebook_is_run_here():
    """make test runs nbval over solutions/, and every notebook there has its mistakes case."""
    from course_utils.layout import notebook_paths

    recipe = (ROOT / "Makefile").read_text().split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "--nbval-lax" in recipe and "solutions" in recipe and "--dist loadgroup" in recipe, recipe
    run = {path.resolve() for assignment in assignment_names() for path in notebook_paths(ROOT, assignment)}
    on_disk = {path.resolve() for path in (ROOT / "solutions").rglob("*.ipynb") if ".ipynb_checkpoints" not in path.parts}
    assert on_disk and on_disk <= run, f"solution notebooks without a mistakes case: {sorted(map(str, on_disk - run))}"


def test_mistake_classes_per_notebook(capsys):
    """Every curated mistake names its class; print the count per class per notebook."""
    rows, unclassified = [], []
    for assignment in assignment_names():
        mistakes = load_mistakes(ROOT, assignment)
        unclassified += [f"{assignment}: {m.name}" for m in mistakes if m.kind is None]
        counts = Counter(m.kind for m in mistakes)
        rows.append((assignment, counts, len(load_accepted(ROOT, assignment))))
    with capsys.disabled():
        print("\nmistakes per class (and alternative right answers) per notebook:")
        print(f"  {'notebook':<24}" + "".join(f"{k[:6]:>7}" for k in KINDS) + f"{'total':>7}{'right':>7}")
        for assignment, counts, n_right in rows:
            print(f"  {assignment:<24}" + "".join(f"{counts.get(k, 0):>7}" for k in KINDS)
                  + f"{sum(counts.values()):>7}{n_right:>7}")
    assert not unclassified, "mistakes without a kind:\n" + "\n".join(unclassified)


def test_a_mistake_the_tests_cannot_see_is_reported():
    """The checker itself can fail: an 'answer' that only adds a comment is not rejected."""
    harmless = Mistake(cell="count_parameters", name="adds a comment", rejected_by=("test_count_parameters",),
                       source=None, replace=(("def ", "# a comment\ndef "),))
    solution, result = check_rejections(ROOT, "00_welcome", [harmless])
    assert solution.ok
    assert not result.ok and "passes ['test_count_parameters']" in result.describe()
