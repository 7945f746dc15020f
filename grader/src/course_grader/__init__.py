"""The grader: the instructor's side of the course, apart from the package students import.

It depends on :mod:`course_utils` (the student package) and on nbgrader; ``course_utils`` never
imports it (``tests/course/test_packages.py``). Its verbs join the one ``course`` command through the
``course_utils.commands`` entry point (:mod:`.cli`: parse and print only). A command builds one
:class:`~.course.Course` (:mod:`.course`: root, gradebook URL, folders, profile, limits) and hands it on.

By verb:

- :mod:`.authoring`: :mod:`~.authoring.release` (``notebooks/`` from ``solutions/``),
  :mod:`~.authoring.execute`, :mod:`~.authoring.mistakes` and :mod:`~.authoring.rejection`
  (curated wrong answers, proven rejected), :mod:`~.authoring.quoted` (numbers the prose quotes,
  against the cpu run; :mod:`~.authoring.author_marks` takes their marks out of the release),
  :mod:`~.authoring.distribution` (the student distribution);
- :mod:`.grading`: :mod:`~.grading.pipeline` (``grade(course, ...)``, the one pipeline of the CLI,
  the demo class, the hub's service and the Dask path), :mod:`~.grading.submissions` (inspected
  before nbgrader), :mod:`~.grading.runner` and :mod:`~.grading.scores` (nbgrader and its grades),
  :mod:`~.grading.outcome` (what grading did, per student), :mod:`~.grading.tables` (the score table and CSV),
  :mod:`~.grading.parallel` (every core), :mod:`~.grading.dask_grading` (a cluster; its client
  records through :mod:`~.grading.recording`), :mod:`~.grading.gradebook`,
  :mod:`~.grading.checker` (hidden tests, outside the kernel: :mod:`~.grading.checker.link` to the
  kernel, :mod:`~.grading.checker.remote` proxies, :mod:`~.grading.checker.checker` itself,
  :mod:`~.grading.checker.cell` (one test cell graded, for grading and `course mistakes` alike),
  :mod:`~.grading.checker.process` and :mod:`~.grading.checker.__main__`, its own process;
  :mod:`~.grading.checker.result` and :mod:`~.grading.checker.prelude`, torch-free, for the process that starts it),
  :mod:`~.grading.verdict` (a test
  cell's points: the checker's verdict alone), :mod:`~.grading.scan` (flags),
  :mod:`~.grading.similarity`, :mod:`~.grading.review` (held until decided),
  :mod:`~.grading.manual_view` (written answers beside the student's own run),
  :mod:`~.grading.feedback`, :mod:`~.grading.lms` (grades into Canvas, Moodle, LTI AGS),
  :mod:`~.grading.variants` (each student's variant seed, in the gradebook, for the checker alone);
- :mod:`.sandbox`: :mod:`~.sandbox.bubblewrap` (the kernel's jail), :mod:`~.sandbox.execute`
  (nbgrader's execute step in it), :mod:`~.sandbox.cgroup` (limits per notebook),
  :mod:`~.sandbox.withheld` (the graded notebook's own answers withheld from its kernel);
- :mod:`.demo`: the main job's generated class, graded through the same pipeline;
- :mod:`.doctor`: what grading needs and what this machine has.
"""
