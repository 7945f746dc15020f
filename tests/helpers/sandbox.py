"""The sandbox gate and cells run in the sandbox, for the tests of the sandbox and of grading through it."""

from __future__ import annotations

import shutil

import nbformat
import pytest

from course_grader.sandbox.bubblewrap import sandbox_problem
from course_grader.sandbox.execute import SandboxedExecute

from tests.conftest import ROOT

PROBLEM = sandbox_problem() if shutil.which("bwrap") else "bwrap is not installed (apt-get install bubblewrap)"
needs_bwrap = pytest.mark.skipif(PROBLEM is not None, reason=f"no sandbox here: {PROBLEM}")


def notebook(*sources: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "attention-course", "display_name": "Python 3 (attention-course)",
                                 "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(source) for source in sources]
    return nb


def run(*sources: str, timeout: int = 60) -> list[str]:
    """Execute the cells in the sandbox; each cell's stdout plus ``ename: evalue`` of its error."""
    nb = notebook(*sources)
    SandboxedExecute(timeout=timeout).preprocess(nb, {"nbgrader": {"notebook": "probe"}, "metadata": {"path": str(ROOT)}})
    texts = []
    for cell in nb.cells:
        text = ""
        for output in cell.outputs:
            if output.output_type == "stream":
                text += output.text
            elif output.output_type == "error":
                text += f"{output.ename}: {output.evalue}"
        texts.append(text)
    return texts
