"""Instructor tooling: nbgrader pipeline, demo class, student self-check, the ``course`` command.

Notebooks never import this package; it needs nbgrader, which students do not.

By verb (the ``course`` command, :mod:`~course_utils.tooling.cli`):

- authoring: :mod:`~.release` (``notebooks/`` from ``solutions/``), :mod:`~.execute`,
  :mod:`~.mistakes` and :mod:`~.rejection` (curated wrong answers, proven rejected),
  :mod:`~.quoted` (numbers the prose quotes, against the cpu run),
  :mod:`~.cells` and :mod:`~.layout` (nbgrader cells; where things are), :mod:`~.distribution`;
- grading: :mod:`~.submissions` (inspect before nbgrader), :mod:`~.grading`,
  :mod:`~.nbgrader_runner`, :mod:`~.parallel` (every core), :mod:`~.dask_grading` (a cluster; its client records
  through :mod:`~.recording`),
  :mod:`~.gradebook`, :mod:`~.democlass` (the main job's class);
- the untrusted submission: :mod:`~.sandbox`, :mod:`~.sandbox_execute`, :mod:`~.cgroup`
  (bubblewrap, limits per notebook), :mod:`~.checker` (hidden tests, outside the kernel);
- judging: :mod:`~.scan` (flags), :mod:`~.similarity`, :mod:`~.review` (held until decided),
  :mod:`~.manual_view` (written answers beside the student's own run);
- returning: :mod:`~.feedback`; the student's side: :mod:`~.selfcheck` (``course check``);
  the machine: :mod:`~.doctor`.
"""
