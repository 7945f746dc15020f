"""course_utils.execute: the executed copies `course execute` writes keep their figures."""

from __future__ import annotations

import nbformat
import pytest

from course_utils.execute import execute_notebook

pytestmark = pytest.mark.slow


def _images(nb: nbformat.NotebookNode) -> int:
    return sum("image/png" in output.get("data", {}) for cell in nb.cells for output in cell.get("outputs", []))


def test_an_executed_copy_keeps_its_figures_where_mplbackend_is_agg(tmp_path, monkeypatch):
    """Under MPLBACKEND=Agg (CI, headless machines) plt.show() draws nothing: the third blind review's
    executed copies had no figure. With figures=True (`course execute`) the kernel draws inline anyway."""
    path = tmp_path / "plot.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()")]
    nbformat.write(nb, str(path))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    drawn, result = execute_notebook(path, tmp_path / "drawn.ipynb", profile="ci", figures=True)
    assert result.ok and _images(drawn) == 1
    blank, result = execute_notebook(path, tmp_path / "blank.ipynb", profile="ci")
    assert result.ok and _images(blank) == 0  # what the environment asked for, where figures are not wanted
