"""Root pytest configuration: keep each notebook's cells on one xdist worker.

`make test` runs pytest-xdist with `--dist loadgroup`: tests spread over the workers one by
one (the slow grading tests above all), except the cells of a notebook collected by nbval,
which must run in order in one kernel; they are grouped by notebook here.
"""

from __future__ import annotations

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        path = str(getattr(item, "path", "") or getattr(item, "fspath", ""))
        if path.endswith(".ipynb"):
            item.add_marker(pytest.mark.xdist_group(name=path))
