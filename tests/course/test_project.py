"""The repository keeps its promises: layout, README quick start, environment files, notebook structure."""

from __future__ import annotations

import re
import tomllib

import nbformat
import pytest
import yaml

from course_utils.cells import answer_cells, nbgrader_meta, grading_cells
from course_utils.layout import KERNEL_NAME

from tests.conftest import ROOT, assignment_names


def test_layout():
    for path in ["notebooks", "solutions", "src/course_utils", "tests", "environment.yml", "README.md",
                 "pyproject.toml", "nbgrader_config.py", "Makefile", ".ci/run"]:
        assert (ROOT / path).exists(), path


def _quick_start_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1]
    block = re.search(r"```[a-z]*\n(.*?)```", section, re.S).group(1)
    return [line for line in block.splitlines() if line.strip() and not line.strip().startswith("#")]


def test_readme_quick_start_has_exactly_two_commands():
    commands = _quick_start_commands()
    assert len(commands) == 2, commands
    assert commands == ["make demo", "make test"]


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert _quick_start_commands()[1] in ci


def _requirement_name(spec: str) -> str:
    return re.split(r"[<>=!~ \[]", spec.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_environment_yml_lists_the_same_packages_as_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = {_requirement_name(s) for s in project["dependencies"]}
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = {_requirement_name(s) for s in env["dependencies"] if isinstance(s, str)}
    conda = {"torch" if name in {"pytorch", "pytorch-gpu"} else name for name in conda} - {"python", "pip"}
    assert conda == wanted
    pip_lines = [line for entry in env["dependencies"] if isinstance(entry, dict) for line in entry.get("pip", [])]
    extras = [re.search(r"\.\[([a-z,]+)\]", line) for line in pip_lines]
    assert any(m and "dev" in m.group(1).split(",") for m in extras), "environment.yml must install the package with its dev extra"
    assert any("gpu" in s for s in env["dependencies"] if isinstance(s, str)), "environment.yml asks for a GPU build"


def test_nbgrader_config_has_what_grading_needs():
    from traitlets.config import Config
    from traitlets.config.loader import PyFileConfigLoader

    config: Config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    assert config.CourseDirectory.source_directory == "solutions"
    assert config.CourseDirectory.release_directory == "notebooks"
    assert config.CourseDirectory.course_id
    assert config.IgnorePattern.enabled is True
    assert re.search(config.IgnorePattern.pattern, "UserWarning: something harmless")
    assert not re.search(config.IgnorePattern.pattern, "Traceback (most recent call last)")
    assert config.OverwriteCells.add_missing_cells is True
    assert config.Execute.timeout >= 60


@pytest.mark.parametrize("assignment", assignment_names())
def test_solution_notebook_structure(assignment):
    paths = sorted((ROOT / "solutions" / assignment).glob("*.ipynb"))
    assert [p.stem for p in paths] == [assignment], "one notebook per assignment, named like its folder"
    nb = nbformat.read(str(paths[0]), as_version=4)
    nbformat.validate(nb)
    assert nb.metadata.kernelspec.name == KERNEL_NAME
    ids = [nbgrader_meta(c)["grade_id"] for c in nb.cells if nbgrader_meta(c)]
    assert len(ids) == len(set(ids)), "grade_ids must be unique"
    for cell in nb.cells:
        meta = nbgrader_meta(cell)
        if meta:
            assert meta["schema_version"] == 3
            if meta["grade"]:
                assert meta["points"] > 0
    tests = list(grading_cells(nb))
    assert tests, "an assignment needs autograded tests"
    for cell in tests:
        grade_id = nbgrader_meta(cell)["grade_id"]
        assert "### BEGIN HIDDEN TESTS" in cell.source, f"{grade_id} has no hidden tests"
        assert "### BEGIN SOLUTION" not in cell.source
    for cell in answer_cells(nb):
        if cell.cell_type == "code":
            assert "### BEGIN SOLUTION" in cell.source, f"{nbgrader_meta(cell)['grade_id']} has no solution block"
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "## Recap" in markdown and "## References" in markdown
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "start(seed=" in code, "the notebook starts with course_utils.session.start"
    if assignment != "00_welcome":
        assert len(tests) >= 4, "at least four autograded exercises"
        assert code.count("plt.show()") + code.count("plot_") >= 2, "at least two figures"


def test_license_is_the_one_pyproject_names():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"]["text"] == "MIT"
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")


@pytest.mark.parametrize("assignment", assignment_names())
def test_solution_notebooks_hold_no_outputs(assignment):
    """solutions/ is source: executed copies live in build/, never in git (outputs leak and churn diffs)."""
    nb = nbformat.read(str(ROOT / "solutions" / assignment / f"{assignment}.ipynb"), as_version=4)
    executed = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]
    assert not executed, f"cells {executed} of solutions/{assignment} hold outputs: clear them before committing"


@pytest.mark.parametrize("tree", ["solutions", "notebooks"])
@pytest.mark.parametrize("assignment", assignment_names())
def test_notebooks_name_source_lectures_by_their_own_names(tree, assignment):
    """"seed 000".."seed 004" was an internal name for the source lectures; students read the lectures' own names."""
    nb = nbformat.read(str(ROOT / tree / assignment / f"{assignment}.ipynb"), as_version=4)
    internal = re.compile(r"seed[ -]?0\d\d", re.I)
    found = [(i, m.group(0)) for i, c in enumerate(nb.cells) for m in internal.finditer(c.source)]
    assert not found, f"{tree}/{assignment}: cells say {found}; cite the lecture by name (see docs/design.md)"


@pytest.mark.parametrize("tree", ["solutions", "notebooks"])
@pytest.mark.parametrize("assignment", assignment_names())
def test_notebooks_send_students_to_no_file_they_do_not_have(tree, assignment):
    """Students get the notebooks and the course_utils package (`course dist`), not benchmarks/: the ranges the
    prose gives stay, where each comes from is an instructor's note (docs/ranges/)."""
    nb = nbformat.read(str(ROOT / tree / assignment / f"{assignment}.ipynb"), as_version=4)
    authoring = re.compile(r"benchmarks/|bench_\w+\.py|seed-spread-\w+|[\w-]+-(?:cpu|cuda|gpu)\.md\b")
    found = [(i, m.group(0)) for i, c in enumerate(nb.cells) for m in authoring.finditer(c.source)]
    assert not found, (f"{tree}/{assignment}: cells {found} name files of the course's repository that students "
                       "do not have; keep the range, move its source to docs/ranges/")


def test_ruff_finds_nothing():
    """Lint (configuration in pyproject.toml): the same check CI runs."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    result = subprocess.run([ruff, "check", "--quiet", "."], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_mypy_finds_nothing():
    """Types (configuration in pyproject.toml's [tool.mypy]: src/course_utils, the big libraries as Any; ~5 s)."""
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_no_public_name_means_two_things():
    """No twins: a function or class named in two course_utils modules' __all__ is one object (a re-export)."""
    import importlib

    folder = ROOT / "src" / "course_utils"
    names = sorted(f"course_utils.{p.stem}" for p in folder.glob("*.py") if p.stem != "__init__")
    meaning: dict[str, dict[int, str]] = {}
    for module_name in [*names, "course_utils.checks"]:
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if callable(obj):  # constants such as PAD are each vocabulary's own spelling of one meaning
                meaning.setdefault(name, {})[id(obj)] = module_name
    twins = {name: sorted(where.values()) for name, where in meaning.items() if len(where) > 1}
    assert not twins, f"one name, two meanings: {twins}"


# Where a module's tests are: a test file mirrors the module's path, tests/<package>/<folders>/test_<module>.py
# (course_grader/grading/scan.py: tests/course_grader/grading/test_scan.py); or the module's subpackage is
# tested as a whole beside it, in test_<subpackage>.py (checks/: tests/course_utils/checks/test_checks.py);
# or a whole-course proof in tests/course/ is named for it (tests/course/test_cli.py). The modules tested
# in a file named for another, by module or by subpackage:
TESTED_IN = {
    "course_utils.cells": "course/test_release_sync.py", "course_utils.layout": "course/test_project.py",
    "course_utils.execute": "course/test_cli.py", "course_utils.selfcheck": "course/test_cli.py",
    "course_utils.withheld": "course_grader/sandbox/test_withheld.py",
    "course_utils.protocol": "course_grader/grading/checker/test_checker.py",  # the two ends of the wire
    "course_grader.demo": "course/test_grading.py", "course_grader.doctor": "course/test_newcomer.py",
    "course_grader.authoring.execute": "course/test_cli.py",
    "course_grader.authoring.release": "course/test_release_sync.py",
    "course_grader.authoring.rejection": "course/test_mistakes.py",
    "course_grader.grading.scores": "course/test_grading.py",
    "course_grader.grading.submissions": "course/test_grading_robustness.py",
    "course_grader.grading.similarity": "course_grader/grading/test_review.py",
    **dict.fromkeys([f"course_grader.grading.{m}" for m in ("outcome", "runner", "pipeline")],
                    "course_grader/grading/test_grading_pipeline.py"),
    **dict.fromkeys([f"course_grader.grading.{m}" for m in ("gradebook", "tables")],
                    "course_grader/grading/test_tooling_units.py"),
}


def _modules() -> list[str]:
    """Every module of both packages, dotted: ``course_grader.grading.scan``."""
    modules = []
    for folder in (ROOT / "src" / "course_utils", ROOT / "grader" / "src" / "course_grader"):
        modules += sorted(".".join((folder.name, *p.relative_to(folder).with_suffix("").parts))
                          for p in folder.rglob("*.py") if p.stem != "__init__")
    return modules


def _test_files(module: str) -> list[str]:
    """Where the tests of ``module`` may be (relative to tests/), by the rule above or TESTED_IN."""
    package, *folders, name = module.split(".")
    mirror = "/".join([package, *folders])
    places = [f"{mirror}/test_{name}.py", f"course/test_{name}.py"]
    if folders:
        places.append(f"{mirror}/test_{folders[-1]}.py")
    places += [path for prefix, path in TESTED_IN.items() if module == prefix or module.startswith(prefix + ".")]
    return places


def test_every_module_has_a_test_file():
    """A reader finds the tests of course_utils/<module>.py in tests/course_utils/test_<module>.py, those of
    the grader's grading/scan.py in tests/course_grader/grading/test_scan.py, or where TESTED_IN says."""
    missing = [m for m in _modules() if not any((ROOT / "tests" / path).is_file() for path in _test_files(m))]
    assert not missing, f"no test file for {missing}: add tests/<package>/<folders>/test_<module>.py"
    assert not [m for m in TESTED_IN if not any(x == m or x.startswith(m + ".") for x in _modules())], \
        "TESTED_IN names a module that is gone"
    assert all((ROOT / "tests" / path).is_file() for path in TESTED_IN.values()), "TESTED_IN names a missing file"


def test_every_test_file_mirrors_a_module_or_proves_the_course():
    """No test file outside the layout: tests/course/ holds the whole-course proofs; under tests/course_utils/
    and tests/course_grader/ a file's path mirrors a module or subpackage, ``test_<name>.py`` or, for one more
    aspect of it, ``test_<name>_<aspect>.py`` (grading/checker/test_checker_fuzz.py)."""
    names = set(_modules()) | {m.rsplit(".", 1)[0] for m in _modules()}
    for path in sorted(str(p.relative_to(ROOT / "tests")) for p in (ROOT / "tests").rglob("test_*.py")):
        if path.startswith("course/") or path in TESTED_IN.values():
            continue
        folder, _, name = path.rpartition("/")
        words = name.removeprefix("test_").removesuffix(".py").split("_")
        mirrored = {".".join([*folder.split("/"), "_".join(words[:i])]) for i in range(1, len(words) + 1)}
        assert mirrored & names or folder.replace("/", ".") in names and folder.rpartition("/")[2] == words[0], \
            f"tests/{path} mirrors no module"


def test_every_module_is_on_the_map():
    """A newcomer finds every module in its package's docstring (and CONTRIBUTING.md points there)."""
    import course_utils
    import course_grader

    for package, folder in ((course_utils, ROOT / "src" / "course_utils"),
                            (course_grader, ROOT / "grader" / "src" / "course_grader")):
        names = sorted(str(p.relative_to(folder).with_suffix("")).replace("/", ".")
                       for p in folder.rglob("*.py") if p.stem != "__init__")
        missing = [name for name in names if f".{name}`" not in package.__doc__]
        assert not missing, f"{package.__name__}'s docstring does not name {missing}"
    assert (ROOT / "CONTRIBUTING.md").is_file()
