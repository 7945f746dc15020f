"""The imports a test cell's code starts from in the checker: the tests' own vocabulary and the
notebook's import statements (read from the instructor's source). Torch-free: the grading process
builds the prelude, the checker runs it (:func:`.checker.run_prelude`)."""

from __future__ import annotations

import ast
from typing import Sequence

__all__ = ["BASE_PRELUDE", "prelude_from_source"]

# Imported in the checker, whatever the notebook does: the tests' own vocabulary.
BASE_PRELUDE = (
    "import math\nimport numpy as np\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
    "from course_utils.checks import *\n"
)


def _bound_names(source: str) -> set[str]:
    """Names a cell binds at its top level (def, class, assignment, import)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def prelude_from_source(cells: Sequence[str], answers: Sequence[str] = ()) -> str:
    """The import statements of the instructor's own code cells (from the *source* notebook),
    less the names an answer cell defines (the student's class shadows a library class of the
    same name, as it does in the notebook)."""
    theirs = set().union(*(_bound_names(a) for a in answers)) if answers else set()
    lines = []
    for source in cells:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                node.names = [a for a in node.names if (a.asname or a.name).split(".")[0] not in theirs]
                if node.names:
                    lines.append(ast.unparse(node))
    return "\n".join(lines)
