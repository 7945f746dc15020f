"""Shared fixtures. Every test runs in the `ci` profile on the CPU.

Longest tests first: the tests are ordered by their expected duration, longest first (by
module, see ``pytest_collection_modifyitems``), so that ``pytest -n 2 --maxschedchunk 1``
(``make test``) hands them out one at a time, the long ones first, and both workers finish
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
# course_utils.tooling.nbgrader_runner). Loaded plugins import nbformat before this file: make
# test runs with -p no:nbval.
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
os.environ.setdefault("COURSE_PROFILE", "ci")
os.environ.setdefault("MPLBACKEND", "Agg")

ROOT = Path(__file__).resolve().parents[1]
DURATIONS = Path(__file__).with_name("durations.json")
CACHE_KEY = "course/durations"


def assignment_names() -> list[str]:
    from course_utils.tooling.layout import assignments

    return assignments(ROOT)


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


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


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Modules whose longest test is longest first, and within a module its longest tests first.
    A module's tests stay together: module-scoped fixtures (a PostgreSQL server, a wheel, model
    weights) are set up once per worker visit, not once per test."""
    expected = expected_durations([item.nodeid for item in items], _known_durations(config))
    longest: dict[str, float] = {}
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        module = item.nodeid.split("::", 1)[0]
        longest[module] = max(longest.get(module, 0.0), expected[item.nodeid])
        first.setdefault(module, index)

    def key(item: pytest.Item) -> tuple[float, int, float]:
        module = item.nodeid.split("::", 1)[0]
        return (-longest[module], first[module], -expected[item.nodeid])

    items.sort(key=key)  # stable: equal keys keep pytest's order, and every xdist worker sorts alike


_measured: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.passed or report.failed:
        _measured[report.nodeid] = _measured.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
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
