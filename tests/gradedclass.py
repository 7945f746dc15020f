"""One graded 00_welcome class, shared by the end-to-end tests of feedback and review.

tests/course_grader/grading/test_feedback.py (students who print the hidden tests) and tests/course_grader/grading/test_review.py (a flagged
student held until accepted) each used to release 00_welcome in a scratch course of their own,
grade a class of two or three through `course grade` (sandboxed where the sandbox works) and ask
`course feedback` once before deciding anything. Here one class holds both sets of students, is
released, graded and given feedback once (the session fixture ``welcome_class`` in conftest.py);
the tests read what those commands said and left, and each continues in a copy of the course of
its own (``GradedClass.copy``): the class itself is never changed after the fixture.

Both tests carry ``xdist_group(GROUP)``, so under `make test` one worker builds the class once.

The students do not disturb one another: the similarity comparison leaves 00's one-line answer
alone (too short to compare), so ``ada`` and ``history`` (both the model answer) are not paired,
and every flag raised here is raised by a student's own code.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell

from course_grader.course import Course
from course_utils.cells import fill_answers, read, solution_code
from course_grader.authoring.release import generate_release, prepare_scratch_course

GROUP = "welcome-class"  # the xdist group of the tests that read the class
A = "00_welcome"
# the cell limit of every command on the class (the slower of the two tests' former limits)
CELL_TIMEOUT = "60"

# test_review.py: the model answer, and the same behind a read of the environment (flagged: held)
ADA_EVE_EXTRA = {"ada": "", "eve": "import os\nSEEN = os.environ.get('HOME')\n"}
# test_feedback.py: students who print the hidden tests (frames, linecache, In/_ih: all flagged)
FRAME_LEAK = '''import sys, linecache
def count_parameters(module):
    caller = sys._getframe(1)
    print("LEAK-FRAME", "".join(linecache.getlines(caller.f_code.co_filename)))
    return sum(p.numel() for p in module.parameters() if p.requires_grad)
'''
RAISE_LEAK = '''import sys, linecache
def count_parameters(module):
    if isinstance(module, torch.nn.GRU):
        raise ValueError("LEAK-RAISE " + "".join(linecache.getlines(sys._getframe(1).f_code.co_filename)))
    return sum(p.numel() for p in module.parameters() if p.requires_grad)
'''
HISTORY_LEAK = '''import html
from IPython.display import HTML, display
print("LEAK-IN", "\\n".join(In))
display(HTML("<pre>" + html.escape(repr(_ih)) + "</pre>"))
'''
LEAKERS = ("frame", "raise", "history")


def sandbox_args() -> list[str]:
    """`course grade` in the sandbox where it works, else ``--no-sandbox`` (the course's own code)."""
    try:
        from course_grader.sandbox.bubblewrap import sandbox_problem
    except ImportError:
        return ["--no-sandbox"]
    return [] if sandbox_problem() is None else ["--no-sandbox"]


def course_cli(*args: str, course: Path, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COURSE_ROOT=str(course), COURSE_CELL_TIMEOUT=CELL_TIMEOUT, COURSE_PROFILE="ci")
    return subprocess.run([sys.executable, "-m", "course_utils.cli", *args], cwd=course, env=env,
                          capture_output=True, text=True, timeout=timeout)


@dataclass(frozen=True)
class GradedClass:
    course: Path  # read it; run further commands in ``copy()``
    sandboxed: bool
    graded: subprocess.CompletedProcess[str]  # `course grade 00_welcome`
    feedback: subprocess.CompletedProcess[str]  # the first `course feedback 00_welcome`, before any decision

    def copy(self, to: Path) -> Path:
        """A copy of the graded course (its sqlite gradebook included) at ``to``, for a test to go on in."""
        shutil.copytree(self.course, to, symlinks=True)
        return to


def build_welcome_class(course: Path) -> GradedClass:
    prepare_scratch_course(Path(__file__).resolve().parents[1], course, [A])
    generate_release(Course.open(course), [A], verbose=False)
    release = read(course / "notebooks" / A / f"{A}.ipynb")
    answer = solution_code(read(course / "solutions" / A / f"{A}.ipynb"))["count_parameters"]
    students = {student: fill_answers(release, {"count_parameters": extra + answer})
                for student, extra in ADA_EVE_EXTRA.items()}
    students["frame"] = fill_answers(release, {"count_parameters": FRAME_LEAK})
    students["raise"] = fill_answers(release, {"count_parameters": RAISE_LEAK})
    students["history"] = fill_answers(release, {"count_parameters": answer})
    students["history"].cells.append(new_code_cell(HISTORY_LEAK))
    for student, nb in students.items():
        folder = course / "submitted" / student / A
        folder.mkdir(parents=True)
        nbformat.write(nb, str(folder / f"{A}.ipynb"))
    args = sandbox_args()
    graded = course_cli("grade", A, "--workers", "1", *args, course=course)
    assert graded.returncode == 0, graded.stdout[-3000:] + graded.stderr[-3000:]
    feedback = course_cli("feedback", A, course=course)
    assert feedback.returncode == 0, feedback.stdout[-3000:] + feedback.stderr[-3000:]
    return GradedClass(course, not args, graded, feedback)
