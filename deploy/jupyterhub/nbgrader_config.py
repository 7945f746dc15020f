"""nbgrader configuration for a large class on JupyterHub (the instructor's course account).

Install it as the course's nbgrader_config.py on the hub (see README.md beside it). It
extends the repository's configuration with the exchange (release / fetch / submit /
collect) and a PostgreSQL gradebook, which, unlike sqlite, several graders can write at once.
"""

import os

c = get_config()  # noqa: F821

# Everything the repository configures (source = solutions, release = notebooks, time
# limits, IgnorePattern, add_missing_cells, feedback without hidden tests) still holds.
load_subconfig(os.environ.get("COURSE_BASE_CONFIG", "/srv/attention-course/nbgrader_config.base.py"))  # noqa: F821

c.CourseDirectory.root = os.environ.get("COURSE_ROOT", "/srv/attention-course")
c.CourseDirectory.course_id = "attention-transformers"

# The exchange: a shared folder every student's server can read and write (world-writable
# inbound, readable outbound), as nbgrader's exchange needs.
c.Exchange.root = os.environ.get("NBGRADER_EXCHANGE", "/srv/nbgrader/exchange")
c.Exchange.path_includes_course = True

# PostgreSQL gradebook for concurrent graders (sqlite is fine for one grader at a time).
c.CourseDirectory.db_url = os.environ.get(
    "COURSE_DB_URL", "postgresql+psycopg2://nbgrader@localhost:5432/attention_transformers"
)
