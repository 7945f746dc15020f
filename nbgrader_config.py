"""nbgrader configuration of the course (nbgrader 0.9.6).

The repository root is the course directory: ``solutions/`` is nbgrader's source
directory and ``notebooks/`` its release directory. Submissions, autograded copies,
feedback and ``gradebook.db`` land in git-ignored folders beside them.
"""

import os

from course_utils.limits import grading_cell_timeout

c = get_config()  # noqa: F821 - provided by nbgrader when it loads this file

c.CourseDirectory.course_id = "attention-transformers"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "notebooks"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"
# Executed copies, demo classes and caches live in build/; never release them.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "build"]

c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# Per-cell time limit, from course_utils.limits (the one place it is set; `course check` uses it too):
# 120 s in the `ci` profile grading runs in (the `course` command sets COURSE_PROFILE=ci), 900 s at
# laptop size; COURSE_CELL_TIMEOUT overrides both.
c.Execute.timeout = grading_cell_timeout(os.environ.get("COURSE_PROFILE"))
c.Execute.interrupt_on_timeout = True

# Every submission's kernel runs in a bubblewrap sandbox (grader/src/course_grader/sandbox/bubblewrap.py):
# it sees a private copy of its own notebook and the read-only environment, not the course
# directory, the gradebook, other submissions, the network or the grader's environment, under
# limits on memory, processes, CPU, file size and wall time (COURSE_SANDBOX_* override them).
# This list is nbgrader 0.9.6's own with Execute replaced, so serial `nbgrader autograde` and
# every worker of the parallel grader (which loads this file) are sandboxed alike; config
# for `Execute` (timeout, `--Execute.enabled=False`) applies to the subclass. Without bwrap,
# autograding stops and says what to install; only COURSE_SANDBOX=off (`course grade
# --no-sandbox`) grades unsandboxed.
c.Autograde.autograde_preprocessors = [
    "course_grader.sandbox.execute.SandboxedExecute",
    "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor",
    "nbgrader.preprocessors.LimitOutput",
    "course_grader.grading.verdict.SaveVerdicts",  # a test cell scores the checker's verdict alone
    "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata",
]

# A test cell that writes to stderr scores 0 even when the answer is right. Drop stderr
# that is only a warning or a progress bar before grading.
c.IgnorePattern.enabled = True
c.IgnorePattern.pattern = r"(Warning|warnings\.warn|it/s\]|s/it\]|\d+%\|)"

# The release's markdown without the authors' marks (<!--q ...-->, <!--nq-->: what `course quoted` reads in
# solutions/), before nbgrader computes its checksums. The rest is nbgrader 0.9.6's own list.
c.GenerateAssignment.preprocessors = [
    "course_grader.authoring.author_marks.StripAuthorMarks",
    "nbgrader.preprocessors.IncludeHeaderFooter",
    "nbgrader.preprocessors.InstantiateTests",
    "nbgrader.preprocessors.LockCells",
    "nbgrader.preprocessors.ClearSolutions",
    "nbgrader.preprocessors.ClearOutput",
    "nbgrader.preprocessors.CheckCellMetadata",
    "nbgrader.preprocessors.ComputeChecksums",
    "nbgrader.preprocessors.SaveCells",
    "nbgrader.preprocessors.ClearHiddenTests",
    "nbgrader.preprocessors.ClearMarkScheme",
    "nbgrader.preprocessors.ComputeChecksums",
    "nbgrader.preprocessors.CheckCellMetadata",
]

# A test cell the student deleted comes back from the source and is graded (score 0 if
# the exercise is not done) instead of going to manual grading.
c.OverwriteCells.add_missing_cells = True

# The formgrader renders a submission's markdown and outputs as HTML in the instructor's Jupyter:
# a student's <img onerror=...> or <script> there runs with the instructor's rights. nbconvert's
# sanitizer (bleach) keeps the text and drops the script, for feedback pages too.
c.HTMLExporter.sanitize_html = True

# Feedback shows which exercises passed and failed with the tests' messages, but not the
# hidden tests' source or tracebacks (nbgrader's default feedback shows both).
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "course_grader.grading.feedback.HideHiddenTests",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]
