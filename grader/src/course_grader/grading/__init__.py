"""Grading: one pipeline (:mod:`.pipeline`, ``grade(course, ...)``) over nbgrader (:mod:`.runner`,
:mod:`.scores`, :mod:`.gradebook`), on every core (:mod:`.parallel`) or a Dask cluster
(:mod:`.dask_grading`, recording through :mod:`.recording`); submissions inspected first
(:mod:`.submissions`); hidden tests run outside the student's kernel (:mod:`.checker`); flags
(:mod:`.scan`), similarity (:mod:`.similarity`), held work (:mod:`.review`), written answers beside
the student's run (:mod:`.manual_view`), feedback (:mod:`.feedback`) and grades into the LMS (:mod:`.lms`)."""
