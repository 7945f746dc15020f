"""Shared code of the *Attention & Transformers* course.

Notebook-facing modules, one concern each:

- :mod:`course_utils.device`    -- pick CUDA, then Apple MPS, then CPU, and say which.
- :mod:`course_utils.seeding`   -- seed Python, NumPy and torch in one call.
- :mod:`course_utils.profiles`  -- the ``COURSE_PROFILE`` switch (``ci``, ``cpu``, ``gpu``).
- :mod:`course_utils.checks`    -- assertions for exercise tests, with readable messages.
- :mod:`course_utils.plotting`  -- attention heatmaps and training curves.
- :mod:`course_utils.attention` -- what notebook 03 builds: softmax, scaled dot-product
  attention, a single-head self-attention module.

Instructor tooling (nbgrader, the ``course`` command) lives in :mod:`course_utils.tooling`
and is never imported by the notebooks.
"""

__version__ = "0.1.0"
