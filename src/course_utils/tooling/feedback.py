"""Feedback that tells students what failed without handing them the hidden tests.

nbgrader's feedback HTML shows every graded cell as it ran, hidden tests and their
tracebacks included. This preprocessor, run by ``nbgrader generate_feedback`` (see
nbgrader_config.py), removes the hidden-test block from each test cell's source and
shortens every error in a test cell to its message: the student reads *what* is wrong
(the check's message and hint), not the code of the hidden test that found it.
"""

from __future__ import annotations

import re

from nbconvert.preprocessors import Preprocessor
from traitlets import Bool

__all__ = ["HideHiddenTests", "hide_hidden_tests"]

_HIDDEN = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS.*?^[ \t]*### END HIDDEN TESTS[ \t]*\n?", re.S | re.M)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def hide_hidden_tests(source: str) -> str:
    """The test cell's source with the hidden block replaced by a one-line note."""
    return _HIDDEN.sub("# (hidden tests ran here)\n", source)


class HideHiddenTests(Preprocessor):
    """Strip hidden tests and tracebacks from autograded test cells before feedback."""

    enabled = Bool(True, help="on by default: nbconvert preprocessors are off unless enabled").tag(config=True)

    def preprocess_cell(self, cell, resources, index):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            cell.source = hide_hidden_tests(cell.source)
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    message = _ANSI.sub("", f"{output.get('ename', 'Error')}: {output.get('evalue', '')}")
                    output["traceback"] = [message]
        return cell, resources
