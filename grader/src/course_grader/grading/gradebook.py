"""The gradebook nbgrader is configured with, and copies of an assignment's definition.

Every part of the tooling that opens the gradebook asks :func:`course_db_url`, which
loads the course's ``nbgrader_config.py`` the way nbgrader does (Jupyter config folders,
then the course directory) and reads ``CourseDirectory.db_url``: sqlite beside the course
by default, PostgreSQL on JupyterHub (deploy/jupyterhub/nbgrader_config.py).

Creating a gradebook costs nbgrader an ``alembic heads`` subprocess (seconds: a whole Python
start-up) to learn its schema's revision; :func:`fast_gradebook_creation` computes the same
revision in-process, and every process of the tooling that opens a gradebook installs it.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from pathlib import Path
from typing import Any

__all__ = [
    "AssignmentNotReleased",
    "nbgrader_config",
    "course_db_url",
    "configured_db_url",
    "require_assignment",
    "copy_assignment_definition",
    "alembic_head",
    "fast_gradebook_creation",
]

_CWD_LOCK = threading.Lock()  # nbgrader reads its defaults from the working directory


class AssignmentNotReleased(RuntimeError):
    """The assignment has no entry in the gradebook: ``course release`` was never run."""

    def __init__(self, assignment: str, db_url: str) -> None:
        self.assignment = assignment
        self.db_url = db_url
        super().__init__(
            f"assignment {assignment!r} is not in the gradebook ({safe_url(db_url)}): it was never released. "
            f"Run `course release {assignment}` first (it registers the assignment and its tests in the "
            f"gradebook), then grade again."
        )


def safe_url(db_url: str) -> str:
    """``db_url`` without a password."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(db_url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - an unparsable URL is shown as nbgrader got it
        return db_url


@functools.lru_cache(maxsize=None)
def alembic_head() -> str | None:
    """The revision of nbgrader's gradebook schema, as ``alembic heads`` prints it, read in this
    process from nbgrader's migration scripts; None unless there is exactly one head."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory
    from nbgrader.dbutil import ALEMBIC_DIR

    config = Config()
    config.set_main_option("script_location", ALEMBIC_DIR)
    heads = ScriptDirectory.from_config(config).get_heads()
    return heads[0] if len(heads) == 1 else None


def fast_gradebook_creation() -> None:
    """Make ``nbgrader.api.Gradebook`` stamp a new gradebook with :func:`alembic_head` instead of
    running ``alembic heads`` in a subprocess (nbgrader's own way: 2-5 s per new gradebook,
    i.e. per scratch course, per parallel worker). Same revision; nbgrader's function is kept
    as the fallback. Idempotent."""
    import nbgrader.api as api

    if getattr(api.get_alembic_version, "in_process", False):
        return
    subprocess_version = api.get_alembic_version

    def get_alembic_version() -> str:
        return alembic_head() or subprocess_version()

    get_alembic_version.in_process = True  # type: ignore[attr-defined]
    api.get_alembic_version = get_alembic_version


def nbgrader_config(course_dir: Path):
    """The traitlets ``Config`` nbgrader would load when run in ``course_dir``: the Jupyter
    config folders' ``nbgrader_config.py``, then the course directory's (later wins), then
    the one in ``CourseDirectory.root`` when the config moves the root elsewhere."""
    from nbgrader.apps.baseapp import NbGrader
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config.loader import PyFileConfigLoader

    course_dir = Path(course_dir).resolve()
    with _CWD_LOCK, contextlib.chdir(course_dir):
        app = NbGrader()
        app.load_config_file()
        config = app.config
        root = Path(CourseDirectory(config=config).root)
    if root != course_dir and (root / "nbgrader_config.py").is_file():
        config.merge(PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config())
    return config


def course_db_url(course_dir: Path) -> str:
    """nbgrader's ``CourseDirectory.db_url`` for the course in ``course_dir``
    (default ``sqlite:///<root>/gradebook.db``)."""
    return configured_db_url(nbgrader_config(course_dir), course_dir)


def configured_db_url(config: Any, course_dir: Path) -> str:
    """:func:`course_db_url` from a configuration already loaded by :func:`nbgrader_config`."""
    from nbgrader.coursedir import CourseDirectory

    with _CWD_LOCK, contextlib.chdir(Path(course_dir).resolve()):
        return CourseDirectory(config=config).db_url


def require_assignment(db_url: str, assignment: str) -> None:
    """Raise :class:`AssignmentNotReleased` unless ``assignment`` is in the gradebook."""
    from nbgrader.api import Gradebook, MissingEntry

    fast_gradebook_creation()
    with Gradebook(db_url) as gradebook:
        try:
            gradebook.find_assignment(assignment)
        except MissingEntry:
            raise AssignmentNotReleased(assignment, db_url) from None


def copy_assignment_definition(source_url: str, target_url: str, assignment: str) -> None:
    """Copy one assignment's definition (notebooks; grade, solution, source and task cells)
    from the gradebook at ``source_url`` into the one at ``target_url``, through nbgrader's
    Gradebook API, and its students' variant seeds (:mod:`course_grader.grading.variants`). No
    submission or grade is copied."""
    from nbgrader.api import Gradebook

    fast_gradebook_creation()
    with Gradebook(source_url) as source:
        definition = source.find_assignment(assignment)
        notebooks = []
        for notebook in definition.notebooks:
            notebooks.append((
                notebook.name,
                [dict(name=c.name, max_score=c.max_score, cell_type=c.cell_type) for c in notebook.grade_cells],
                [dict(name=c.name) for c in notebook.solution_cells],
                [dict(name=c.name, cell_type=c.cell_type, locked=c.locked, source=c.source, checksum=c.checksum)
                 for c in notebook.source_cells],
                [dict(name=c.name, max_score=c.max_score, cell_type=c.cell_type) for c in notebook.task_cells],
            ))
        duedate = definition.duedate
    with Gradebook(target_url) as target:
        target.update_or_create_assignment(assignment, duedate=duedate)
        for name, grade_cells, solution_cells, source_cells, task_cells in notebooks:
            target.update_or_create_notebook(name, assignment)
            for cell in grade_cells:
                target.update_or_create_grade_cell(cell.pop("name"), name, assignment, **cell)
            for cell in solution_cells:
                target.update_or_create_solution_cell(cell.pop("name"), name, assignment)
            for cell in source_cells:
                target.update_or_create_source_cell(cell.pop("name"), name, assignment, **cell)
            for cell in task_cells:
                target.update_or_create_task_cell(cell.pop("name"), name, assignment, **cell)
    from course_grader.grading.variants import copy_variants

    copy_variants(source_url, target_url, assignment)  # each student's variant seed: the worker's checker needs it
