"""Two packages, one direction: the student package (``course_utils``) never imports the grader
(``course_grader``), nbgrader or nbval, and loads nbclient only inside ``course check``; the
grader's verbs reach the one ``course`` command through an entry point; neither package has an
import circle (lazy imports inside functions included)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

PACKAGES = {"course_utils": ROOT / "src" / "course_utils", "course_grader": ROOT / "grader" / "src" / "course_grader"}


def _module_name(package: str, folder: Path, path: Path) -> str:
    parts = [package, *path.relative_to(folder).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(pkg, folder, p): p for pkg, folder in PACKAGES.items() for p in folder.rglob("*.py")}


def imports_of(path: Path) -> list[tuple[str, bool]]:
    """``(imported module, inside a function or class)`` for every import of ``path`` (one of
    ``MODULES``; relative imports resolved), ``if TYPE_CHECKING:`` blocks left out (they never run)."""
    found: list[tuple[str, bool]] = []
    module = next(name for name, where in MODULES.items() if where == path)
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]

    def absolute(node: ast.ImportFrom) -> str:
        if node.level == 0:
            return node.module or ""
        return ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))

    def visit(node: ast.AST, nested: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, ast.Import):
                found.extend((alias.name, nested) for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and (name := absolute(child)):
                found.append((name, nested))
                found.extend((f"{name}.{alias.name}", nested) for alias in child.names)
            visit(child, nested or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))

    visit(ast.parse(path.read_text()), False)
    return found


def _top(name: str) -> str:
    return name.split(".")[0]


def test_the_student_package_never_imports_the_grader_or_nbgrader():
    offending = [f"{module}: {name}" for module, path in MODULES.items() if module.startswith("course_utils")
                 for name, _ in imports_of(path) if _top(name) in ("course_grader", "nbgrader", "nbval")]
    assert not offending, offending


def test_the_student_package_loads_nbclient_only_to_run_a_notebook():
    """nbclient (a dependency of JupyterLab, which students have) runs ``course check``'s notebook: it is
    imported inside :func:`course_utils.execute.execute_notebook` and nowhere else."""
    where = sorted((module, nested) for module, path in MODULES.items() if module.startswith("course_utils")
                   for name, nested in imports_of(path) if _top(name) == "nbclient")
    assert where and all(w == ("course_utils.execute", True) for w in where), where


def test_importing_every_student_module_leaves_the_grader_nbgrader_and_nbclient_unloaded():
    student = sorted(m for m in MODULES if m.startswith("course_utils"))
    code = ("import importlib, json, sys\n"
            f"for m in {student!r}: importlib.import_module(m)\n"
            "print(json.dumps(sorted(m for m in ('course_grader', 'nbgrader', 'nbclient', 'nbval') if m in sys.modules)))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    cycles, state = [], {}

    def walk(module: str, stack: list[str]) -> None:
        state[module] = "open"
        stack.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                cycles.append(stack[stack.index(target):] + [target])
            elif target not in state:
                walk(target, stack)
        stack.pop()
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            walk(module, [])
    return cycles


def test_no_import_circles():
    graph = {module: {name for name, _ in imports_of(path) if name in MODULES and name != module}
             for module, path in MODULES.items()}
    assert _cycles(graph) == []
    # the check finds one when there is one
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]


def test_the_grader_depends_on_the_student_package_and_not_the_other_way():
    imports = {package: {_top(name) for module, path in MODULES.items() if module.startswith(package)
                         for name, _ in imports_of(path)} for package in PACKAGES}
    assert "course_utils" in imports["course_grader"]
    assert "course_grader" not in imports["course_utils"], "the other way round is a circle between the packages"


def test_the_grader_adds_its_verbs_to_the_one_course_command():
    from course_utils import cli

    plugins = cli.grader_commands()
    assert [p.__name__ for p in plugins] == ["course_grader.cli"]
    verbs = set(cli.build_parser()._subparsers._group_actions[0].choices)  # noqa: SLF001 - argparse keeps them here
    assert verbs == {*cli.STUDENT_VERBS, *cli.INSTRUCTOR_VERBS}, verbs ^ {*cli.STUDENT_VERBS, *cli.INSTRUCTOR_VERBS}
