"""``python -m course_grader.grading.checker``: a checker process, or (``--fork-server FD``) the
fork server checkers are forked from (see :mod:`.process`)."""

import sys

from course_grader.grading.checker.process import serve_fork_server, serve_requests

if len(sys.argv) == 3 and sys.argv[1] == "--fork-server":
    serve_fork_server(int(sys.argv[2]))
else:
    serve_requests()
