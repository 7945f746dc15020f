"""nbgrader configuration of the course (nbgrader 0.9.6).

The repository root is the course directory: ``solutions/`` is nbgrader's source
directory and ``notebooks/`` its release directory. Submissions, autograded copies,
feedback and ``gradebook.db`` land in git-ignored folders beside them.
"""

import os

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

# Per-cell time limit. Grading runs in the fast `ci` profile (the `course` command sets
# COURSE_PROFILE=ci), where 120 s leaves room for training cells on a slow CPU and still
# stops an infinite loop quickly. Without a profile the notebooks run at laptop size, so
# the limit grows. COURSE_CELL_TIMEOUT overrides both.
_ci = os.environ.get("COURSE_PROFILE", "") == "ci"
c.Execute.timeout = int(os.environ.get("COURSE_CELL_TIMEOUT") or (120 if _ci else 900))
c.Execute.interrupt_on_timeout = True

# A test cell that writes to stderr scores 0 even when the answer is right. Drop stderr
# that is only a warning or a progress bar before grading.
c.IgnorePattern.enabled = True
c.IgnorePattern.pattern = r"(Warning|warnings\.warn|it/s\]|s/it\]|\d+%\|)"

# A test cell the student deleted comes back from the source and is graded (score 0 if
# the exercise is not done) instead of going to manual grading.
c.OverwriteCells.add_missing_cells = True

# Feedback shows which exercises passed and failed with the tests' messages, but not the
# hidden tests' source or tracebacks (nbgrader's default feedback shows both).
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "course_utils.tooling.feedback.HideHiddenTests",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]
