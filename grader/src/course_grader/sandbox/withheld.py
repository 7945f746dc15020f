"""The student package as a graded notebook's sandbox sees it: that notebook's answers withheld.

A watch inside the kernel cannot keep a student from calling the course's reference of the
exercise being graded (the student owns the kernel). So the sandbox never holds one: while an
assignment is graded, ``course_utils`` is mounted read-only from a copy in which every function
and class that answers one of *that* assignment's exercises (its public reference, as
:func:`course_grader.grading.similarity.reference_paths` finds it) has each body replaced by
``raise ReferenceWithheld(...)``. The copy holds no source of those bodies at all, and no
bytecode of them; everything else (later notebooks import what earlier ones built) is unchanged.

- :func:`withheld_paths` -- the dotted paths of one source notebook's answers (where they are
  defined too); :func:`course_withheld_paths` -- those and every later assignment's, what grading
  that notebook withholds;
- :func:`withheld_package` -- the rewritten package folder for those paths (built once per
  package version and set of paths, then reused: it is read-only and holds nothing of a student).

Named references are not all a later notebook's package holds: ``course_utils.masking`` has a
masked attention (03's answer with a mask), ``course_utils.flash`` a stable softmax. So every
module that no notebook up to the graded one imports (directly, or through the modules it
imports: :func:`import_closure`) is withheld whole, as ``course_utils.flash.*``: each of its
functions and methods raises. The kernel's own machinery (the agent, the checks) is in the closure.
"""

from __future__ import annotations

import ast
import compileall
import hashlib
import os
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Sequence

__all__ = ["withheld_paths", "course_withheld_paths", "import_closure", "withheld_package", "rewrite_module", "package_dir"]

_PACKAGE = "course_utils"
# what a graded kernel runs besides the notebook: the agent that answers the checker, the checks the
# visible tests call, the error a withheld body raises
_KERNEL_MODULES = ("course_utils", "course_utils.protocol.agent", "course_utils.checks", "course_utils.withheld")


def withheld_paths(source_notebook: Path) -> list[str]:
    """``course_utils.module.Name`` (or ``...Class.method``) of every reference that answers an
    exercise of ``source_notebook`` (the instructor's source, with its test cells)."""
    import json

    import nbformat

    # cached on disk per notebook and package version: finding them imports every course_utils module
    # (seconds), once per graded notebook otherwise
    key = hashlib.sha256(Path(source_notebook).read_bytes()).hexdigest()[:16] + "-" + _fingerprint([], "")
    cached = _cache_root() / "paths" / f"{key}.json"
    if cached.is_file():
        try:
            return [str(p) for p in json.loads(cached.read_text())]
        except ValueError:
            pass
    from course_grader.grading.similarity import reference_paths

    nb = nbformat.read(str(source_notebook), as_version=4)
    named = {path for paths in reference_paths(nb).values() for path in paths if path.startswith(_PACKAGE + ".")}
    found = sorted(named | {home for path in named if (home := _defining_path(path))})
    cached.parent.mkdir(parents=True, exist_ok=True)
    temporary = cached.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(json.dumps(found))
    os.replace(temporary, cached)
    return found


def _defining_path(path: str) -> str | None:
    """Where the object ``path`` names is defined (``course_utils.gpt.top_p_filter`` is
    ``course_utils.sampling.top_p_filter``, imported into ``gpt``): withheld there, it is withheld
    under every name."""
    from course_grader.grading.similarity import _resolve

    obj = _resolve(path)
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if isinstance(module, str) and isinstance(qualname, str) and module.startswith(_PACKAGE + ".") and "<" not in qualname:
        return f"{module}.{qualname}"
    return None


def course_withheld_paths(source_notebook: Path) -> list[str]:
    """What grading ``source_notebook`` withholds: its own exercises' references and those of every
    later assignment of its course (a notebook imports what earlier ones built, never later ones;
    13's ``online_softmax`` would answer 03's ``stable_softmax``), and, whole (``module.*``), every
    package module outside the import closure of the notebooks up to this one."""
    source_notebook = Path(source_notebook)
    assignment = source_notebook.parent
    folders = sorted(p for p in assignment.parent.iterdir() if p.is_dir())
    later = [p for p in folders if p.name > assignment.name]
    paths = set(withheld_paths(source_notebook))
    for folder in later:
        for notebook in sorted(folder.glob("*.ipynb")):
            paths.update(withheld_paths(notebook))
    so_far = [notebook for folder in folders if folder.name <= assignment.name for notebook in sorted(folder.glob("*.ipynb"))]
    used = import_closure(so_far)
    paths.update(f"{module}.*" for module in _package_modules() if module not in used)
    return sorted(paths)


def _package_modules() -> dict[str, Path]:
    """Every module of the package, by dotted name (a package by its ``__init__``)."""
    package = package_dir()
    modules = {}
    for file in sorted(package.rglob("*.py")):
        parts = [_PACKAGE, *file.relative_to(package).with_suffix("").parts]
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = file
    return modules


def _imported(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """The package names ``tree`` imports anywhere (in functions too): modules and ``module.name``."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the module's package (its own name, for a package's __init__)
                base = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
                name = ".".join([*base, *([node.module] if node.module else [])])
            else:
                name = node.module or ""
            found.add(name)
            found.update(f"{name}.{alias.name}" for alias in node.names)
    return {name for name in found if name == _PACKAGE or name.startswith(_PACKAGE + ".")}


def import_closure(notebooks: Iterable[Path]) -> set[str]:
    """The package modules that the code cells of ``notebooks`` (tests included) and the graded
    kernel's own machinery import, and every module those import, transitively."""
    import nbformat

    modules = _package_modules()
    wanted = set(_KERNEL_MODULES)
    for notebook in notebooks:
        for cell in nbformat.read(str(notebook), as_version=4).cells:
            if cell.cell_type != "code":
                continue
            code = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
            try:
                wanted |= _imported(ast.parse(code), "__main__", False)
            except SyntaxError:
                continue  # a blank exercise's placeholder, say: it imports nothing of ours
    closure: set[str] = set()
    while wanted:
        name = wanted.pop()
        while name and name not in modules:  # course_utils.flash.naive_attention -> course_utils.flash
            name = name.rpartition(".")[0]
        if not name or name in closure:
            continue
        closure.add(name)
        parents = name.split(".")
        wanted.update(".".join(parents[:i]) for i in range(1, len(parents)))  # importing a.b runs a first
        file = modules[name]
        wanted |= _imported(ast.parse(file.read_text()), name, file.name == "__init__.py")
    return closure


def _raise(path: str, assignment: str, lineno: int) -> ast.stmt:
    statement = ast.parse(
        f"raise __import__('course_utils.withheld', fromlist=['ReferenceWithheld'])"
        f".ReferenceWithheld({path!r}, {assignment!r})").body[0]
    return ast.fix_missing_locations(ast.copy_location(statement, ast.Pass(lineno=lineno, col_offset=0)))


def _withhold_function(node: ast.FunctionDef | ast.AsyncFunctionDef, path: str, assignment: str) -> None:
    """Keep the signature and the docstring; the body only raises."""
    first = node.body[0] if node.body else None
    is_doc = (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
              and isinstance(first.value.value, str))
    node.body = [*([first] if is_doc and first is not None else []), _raise(path, assignment, node.lineno)]


def rewrite_module(source: str, module: str, withheld: Iterable[str], assignment: str) -> str | None:
    """``source`` of ``module`` with the withheld functions, classes and methods emptied, or None
    when it withholds nothing. A withheld class keeps its name, bases, attributes and constructor
    (``isinstance``, subclasses and a test that only loads weights into one still work); every other
    method of it raises."""
    prefix = module + "."
    local = {path[len(prefix):] for path in withheld if path.startswith(prefix)}
    if not local:
        return None
    tree = ast.parse(source)
    if "*" in local:  # the whole module: every function and class of it
        local |= {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    changed = False
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in local:
            _withhold_function(node, prefix + node.name, assignment)
            changed = True
        elif isinstance(node, ast.ClassDef):
            whole = node.name in local
            for member in node.body:  # (its constructor stays: building one is not the answer, running it is)
                if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)) and member.name != "__init__" and (
                        whole or f"{node.name}.{member.name}" in local):
                    _withhold_function(member, f"{prefix}{node.name}.{member.name}", assignment)
                    changed = True
    return ast.unparse(tree) + "\n" if changed else None


def package_dir() -> Path:
    """Where ``course_utils`` lives (the sandbox binds it, and the withheld copy over it, at this path)."""
    import course_utils

    return Path(course_utils.__file__).resolve().parent


@lru_cache(maxsize=1)
def _package_digest() -> str:
    """The package's sources, hashed once per process (every graded notebook asks, for each later one)."""
    package = package_dir()
    digest = hashlib.sha256()
    for file in sorted(package.rglob("*.py")):
        digest.update(str(file.relative_to(package)).encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()


def _fingerprint(paths: Sequence[str], assignment: str) -> str:
    return hashlib.sha256(f"{assignment}\n{sorted(paths)}\n{_package_digest()}".encode()).hexdigest()[:20]


def _cache_root() -> Path:
    return Path(os.environ.get("COURSE_WITHHELD_CACHE") or Path(tempfile.gettempdir()) / f"course-withheld-{os.geteuid()}")


def withheld_package(assignment: str, paths: Sequence[str]) -> Path:
    """A read-only copy of ``course_utils`` with ``paths`` withheld, compiled; the same folder
    for the same package and paths (built atomically: parallel graders may race for it)."""
    package = package_dir()
    target = _cache_root() / _fingerprint(paths, assignment) / _PACKAGE
    if target.is_dir():
        return target
    target.parent.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(target.parent.parent, 0o755)
    build = Path(tempfile.mkdtemp(dir=target.parent.parent, prefix=".build-"))
    copy = build / _PACKAGE
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for file in copy.rglob("*.py"):
        relative = file.relative_to(copy).with_suffix("")
        parts = [_PACKAGE, *relative.parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        rewritten = rewrite_module(file.read_text(), ".".join(parts), paths, assignment)
        if rewritten is not None:
            file.write_text(rewritten)
    compileall.compile_dir(str(copy), quiet=1, legacy=False)
    for folder, _dirs, files in os.walk(build):
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)
    try:
        os.rename(build, target.parent)
    except OSError:  # another grader built it first
        shutil.rmtree(build, ignore_errors=True)
    return target
