"""Shared fixtures. Every test runs in the `ci` profile on the CPU.

Longest tests first: the tests are ordered by their expected duration, longest first (by
module, see ``pytest_collection_modifyitems``), so that ``pytest -n 2 --dist loadgroup``
(``make test``) hands them out one at a time (a solution notebook's nbval cells and its
mistakes as one unit), the long ones first, and both workers finish
together instead of one running a long test alone at the end. The expected durations are the last measured ones
(pytest's cache), else ``tests/durations.json`` (committed; refresh it with
``COURSE_RECORD_DURATIONS=1 make test``), else those of the same test with other parameters
(a new notebook's grading test takes about what the others take).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from pathlib import Path

import pytest

# jsonschema (through nbformat) builds an RFC 3987 grammar at import, 2-5 s of every test
# process, when rfc3987_syntax is installed, for a string format no notebook schema uses (see
# course_grader.grading.runner). Loaded plugins (nbval) import nbformat before this
# file, so in `make test` the guard comes too late for the test process itself.
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
os.environ.setdefault("COURSE_PROFILE", "ci")
os.environ.setdefault("MPLBACKEND", "Agg")

ROOT = Path(__file__).resolve().parents[1]
DURATIONS = Path(__file__).with_name("durations.json")
CACHE_KEY = "course/durations"


def assignment_names() -> list[str]:
    from course_utils.layout import assignments

    return assignments(ROOT)


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def welcome_class(tmp_path_factory):
    """One 00_welcome class graded and given feedback once for the end-to-end tests of feedback and
    review (tests/gradedclass.py); read it, and go on in ``welcome_class.copy(tmp_path / ...)``.
    Its tests carry ``xdist_group(gradedclass.GROUP)``: one worker builds it."""
    from tests.gradedclass import build_welcome_class

    return build_welcome_class(tmp_path_factory.mktemp("welcome-class") / "course")


def build_small_class(course: Path, students: dict[str, str | None]) -> Path:
    """00_welcome released in ``course``; ``students``: id -> answer code (None: the blank release).
    A small class for tests of the grading pipeline (local, parallel, Dask)."""
    import nbformat

    from course_utils.cells import fill_answers, read
    from course_grader.authoring.release import generate_release, prepare_scratch_course
    from course_grader.course import Course

    assignment = "00_welcome"
    prepare_scratch_course(ROOT, course, [assignment])
    generate_release(Course.open(course), [assignment], verbose=False)
    release = read(course / "notebooks" / assignment / f"{assignment}.ipynb")
    for student, code in students.items():
        folder = course / "submitted" / student / assignment
        folder.mkdir(parents=True)
        nb = release if code is None else fill_answers(release, {"count_parameters": code})
        nbformat.write(nb, str(folder / f"{assignment}.ipynb"))
    return course


# ----------------------------------------------------------------------------- longest first


def _known_durations(config: pytest.Config) -> dict[str, float]:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and CACHE_KEY in workerinput:  # an xdist worker: the controller's copy,
        return workerinput[CACHE_KEY]  # so that every worker orders the tests alike
    known: dict[str, float] = {}
    if DURATIONS.is_file():
        known.update(json.loads(DURATIONS.read_text()))
    if getattr(config, "cache", None) is not None:
        known.update(config.cache.get(CACHE_KEY, {}))
    return known


def expected_durations(nodeids: list[str], known: dict[str, float]) -> dict[str, float]:
    """Seconds each test is expected to take: its own record, else the median of the same test
    function's records (other parameters), else 0 (unit tests: milliseconds)."""
    by_function: dict[str, list[float]] = {}
    for nodeid, seconds in known.items():
        by_function.setdefault(nodeid.split("[", 1)[0], []).append(seconds)
    expected = {}
    for nodeid in nodeids:
        if nodeid in known:
            expected[nodeid] = known[nodeid]
        else:
            siblings = by_function.get(nodeid.split("[", 1)[0])
            expected[nodeid] = statistics.median(siblings) if siblings else 0.0
    return expected


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """xdist's controller hands its durations to each worker (a run elsewhere in the checkout
    may rewrite the cache while the workers collect; xdist stops if their orders differ)."""
    node.workerinput[CACHE_KEY] = _known_durations(node.config)


# ----------------------------------------------------------------------------- nbval, then the mistakes
# `make test` runs `pytest --nbval-lax` over solutions/: one kernel per notebook runs it top to
# bottom. That kernel is then handed to the notebook's test_mistakes case, which runs the curated
# mistakes in it instead of running the solution a second time. Both go to the same xdist worker,
# one after the other (an xdist_group per notebook, `--dist loadgroup`).

MISTAKES = "tests/course/test_mistakes.py::test_every_curated_mistake_is_rejected_and_every_right_answer_accepted"
_handed: dict[str, object] = {}  # assignment -> nbval's RunningKernel, after its last cell passed
_cells_failed: set[str] = set()
_nbval_notebooks: set[str] = set()  # solution notebooks whose nbval cells this process collected


def _solution_notebook(path: object) -> str | None:
    """``"05_masking"`` for solutions/05_masking/05_masking.ipynb; None for any other path."""
    path = Path(str(path))
    return path.parent.name if path.suffix == ".ipynb" and path.parent.parent == ROOT / "solutions" else None


def _notebook_of(item: pytest.Item) -> str | None:
    """The assignment whose solution notebook this nbval cell belongs to, or the assignment of a
    test_mistakes case; None for every other test."""
    if item.nodeid.split("@")[0].startswith(MISTAKES + "["):
        return item.callspec.params["assignment"]  # type: ignore[attr-defined]
    return _solution_notebook(item.path)


def take_nbval_kernel(assignment: str):
    """nbval's kernel that has just run the solution of ``assignment`` without an error, or None
    (nbval did not run it here, or a cell failed). The caller stops it."""
    kernel = _handed.pop(assignment, None)
    if kernel is None and assignment in _nbval_notebooks and assignment not in _cells_failed:
        raise AssertionError(f"nbval ran {assignment} on this worker, but its kernel was not handed over")
    return kernel


try:
    from nbval.plugin import IPyNbCell, IPyNbFile
except ImportError:  # -p no:nbval, or nbval not installed: test_mistakes starts its own kernels
    NBVAL_CELLS: tuple[type, ...] = ()
else:
    NBVAL_CELLS = (IPyNbCell,)
    _nbval_teardown = IPyNbFile.teardown

    def _teardown_handing_over(self) -> None:
        name = _solution_notebook(self.path)
        kernel = getattr(self, "kernel", None)
        if (self.config.getoption("nbval_lax", False) and name is not None and name not in _cells_failed
                and kernel is not None and kernel.is_alive()):
            _handed[name], self.kernel = kernel, None
        _nbval_teardown(self)

    IPyNbFile.teardown = _teardown_handing_over


def _set_nodeid(item: pytest.Item, nodeid: str) -> None:
    """What xdist's own ``xdist_group`` marker does (``item._nodeid = ...``), which pytest 9 no
    longer reads: its node ids live in ``item._id``."""
    try:
        from _pytest.nodes import coerce_node_id

        item._id = coerce_node_id(nodeid)  # type: ignore[attr-defined]
    except ImportError:  # pytest < 9
        item._nodeid = nodeid  # type: ignore[attr-defined]


# ----------------------------------------------------------------------------- longest first


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Modules whose longest test is longest first, and within a module its longest tests first.
    A module's tests stay together: module-scoped fixtures (a PostgreSQL server, a wheel, model
    weights) are set up once per worker visit, not once per test.

    With nbval's cells collected, a solution notebook's cells and its mistakes case are one unit
    (an xdist group; expected time: the mistakes case's), cells in order, the mistakes last.
    Tests marked ``xdist_group(name)`` (they share a module-scoped fixture that does the work of
    them all: one class graded, one release generated) are one unit too, on one worker."""
    expected = expected_durations([item.nodeid.split("@")[0] for item in items], _known_durations(config))
    grouped = any(isinstance(item, NBVAL_CELLS) for item in items)
    units: dict[int, str] = {}  # id(item) -> its module, "notebook-NN" or "group-NAME" for a unit
    for item in items:
        name = _notebook_of(item) if grouped else None
        group = item.get_closest_marker("xdist_group")
        if name:
            units[id(item)] = f"notebook-{name}"
        elif group is not None:
            units[id(item)] = f"group-{group.args[0] if group.args else group.kwargs.get('name', 'default')}"
        else:
            units[id(item)] = item.nodeid.split("::", 1)[0]

    longest: dict[str, float] = {}
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        unit, seconds = units[id(item)], expected[item.nodeid.split("@")[0]]
        longest[unit] = max(longest.get(unit, 0.0), seconds)
        first.setdefault(unit, index)
        if not unit.startswith(("notebook-", "group-")):
            continue
        if isinstance(item, NBVAL_CELLS):
            _nbval_notebooks.add(unit.removeprefix("notebook-"))
        if getattr(config.option, "loadgroup", False) and "@" not in item.nodeid:
            _set_nodeid(item, f"{item.nodeid}@{unit}")  # xdist's own xdist_group: pytest 9 ignores it

    def key(item: pytest.Item) -> tuple[float, int, float]:
        unit = units[id(item)]
        if unit.startswith("notebook-"):  # nbval's cells in order, then the mistakes
            return (-longest[unit], first[unit], 1.0 if item.nodeid.startswith(MISTAKES) else 0.0)
        return (-longest[unit], first[unit], -expected[item.nodeid.split("@")[0]])

    items.sort(key=key)  # stable: equal keys keep pytest's order, and every xdist worker sorts alike


_measured: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.failed and ".ipynb::" in report.nodeid:
        _cells_failed.add(Path(report.nodeid.split("::", 1)[0]).parent.name)
    if report.passed or report.failed:
        report_id = report.nodeid.split("@")[0]  # without its xdist group
        _measured[report_id] = _measured.get(report_id, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    for kernel in _handed.values():  # handed over, but no mistakes case took it (deselected)
        kernel.stop()
    _handed.clear()
    config = session.config
    if hasattr(config, "workerinput") or not _measured:  # an xdist worker: the controller records
        return
    measured = {nodeid: round(seconds, 2) for nodeid, seconds in _measured.items() if seconds >= 0.5}
    if getattr(config, "cache", None) is not None:
        config.cache.set(CACHE_KEY, {**config.cache.get(CACHE_KEY, {}), **measured})
    if os.environ.get("COURSE_RECORD_DURATIONS"):
        recorded = json.loads(DURATIONS.read_text()) if DURATIONS.is_file() else {}
        recorded.update(measured)
        DURATIONS.write_text(json.dumps(dict(sorted(recorded.items())), indent=1) + "\n")
