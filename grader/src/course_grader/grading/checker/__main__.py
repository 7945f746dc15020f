"""``python -m course_grader.grading.checker``: a checker process (see :mod:`.process`)."""

from course_grader.grading.checker.process import serve_requests

serve_requests()
