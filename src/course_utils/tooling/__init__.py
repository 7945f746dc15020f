"""Instructor tooling: nbgrader pipeline, demo class, student self-check, the ``course`` command.

Notebooks never import this package; it needs nbgrader, which students do not.
"""
