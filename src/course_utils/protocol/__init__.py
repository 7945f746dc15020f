"""The checker protocol: how the grader's trusted checker and a student's kernel talk.

- :mod:`course_utils.protocol.wire` -- the values that cross (plain data; everything else a handle).
- :mod:`course_utils.protocol.messages` -- the operations, the callback and mode names both sides
  use, the autograd bridge that ties one side's graph to the other's, and the registry of torch
  modes a call into the other process must also run under.
- :mod:`course_utils.protocol.agent` -- the kernel's side: answers the checker's questions.

The checker's side is :mod:`course_grader.grading.checker`. Nothing here is imported by a student's
notebook; it is in the student package only because the kernel runs the agent.
"""
