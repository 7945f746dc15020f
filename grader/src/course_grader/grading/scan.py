"""Flag submissions that try to subvert grading: a static (AST) scan of student-written code.

The scan reads every code cell a student can write in -- every code cell that is not a
locked cell of the source notebook (answer cells, the unlocked demo cells, cells the student
added) -- and reports what honest answers never need:

==================  ==========================================================================
rule                what it catches
==================  ==========================================================================
reference           the exercise's reference implementation, imported in any form (from-import,
                    import-as then attribute, ``importlib``, ``__import__``, ``getattr``, a star
                    import) before the last test cell that checks it
monkeypatch         assignment, ``setattr``/``delattr`` or ``mock.patch`` into an imported module
                    or object (``course_utils.checks``, ``torch``, ``builtins``, ...)
shadowing           rebinding a name the notebook imported for its tests (``check = ...``)
ipython-hook        the IPython shell: ``ast_transformers``, input transformers, ``events``,
                    ``showtraceback``, ``set_custom_exc``, ``run_cell``, ... and unusual magics
ipython-history     ``In``, ``Out``, ``_ih``, ``_oh``, ``_i12``, ``history_manager``
introspection       ``sys._getframe``, ``sys.settrace``, ``inspect`` on frames or source,
                    ``linecache``, ``traceback`` stacks, ``gc.get_referrers``, frame attributes,
                    ``__globals__``/``__code__``, ``globals()``
sys                 ``sys.modules``, ``sys.path``, meta-path and hook tampering
builtins            ``builtins`` / ``__builtins__``
dynamic-code        ``exec``/``eval``/``compile``, ``importlib``, ``__import__``, ``runpy``
database            ``sqlite3``, ``nbgrader`` (the gradebook), ``course_grader``
process             ``subprocess``, ``os.system``/``popen``/``exec*``/``fork``/``spawn*``, ``!cmd``,
                    ``multiprocessing``, ``signal``, ``pty``
native              ``ctypes``, ``cffi``
network             ``socket``, ``urllib``, ``http``, ``requests``, ...
environment         ``os.environ``, ``os.getenv``
file-access         a path outside the working directory: absolute, ``~`` or ``..`` literals given
                    to a file function, ``Path.home()``, ``.parent`` of the working directory,
                    ``os.chdir``
==================  ==========================================================================

A flag is evidence for the instructor, never a grade: nothing is zeroed. A cell with a
SyntaxError is skipped (nbgrader grades it as it is). Literal strings given to ``exec``,
``eval`` or a ``%time``-like magic are scanned as code too.
"""

from __future__ import annotations

import ast
import builtins as _builtins
import importlib.util
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from nbformat import NotebookNode

from course_utils.cells import nbgrader_meta, read

if TYPE_CHECKING:
    from course_grader.course import Course

__all__ = ["Flag", "scan_notebook", "scan_submissions", "reference_paths", "format_flags", "write_flags_csv", "RULES"]

RULES = (
    "reference", "monkeypatch", "shadowing", "ipython-hook", "ipython-history", "introspection", "sys",
    "builtins", "dynamic-code", "database", "process", "native", "network", "environment", "file-access",
)


@dataclass(frozen=True, order=True)
class Flag:
    """One suspicious construct: where it is (cell label, cell index, line in the cell) and why."""

    index: int
    cell: str
    line: int
    rule: str
    text: str

    def __str__(self) -> str:
        return f"cell {self.index} ({self.cell}) line {self.line}: [{self.rule}] {self.text}"


# ---------------------------------------------------------------------------------------------
# What is suspicious, by resolved dotted path (a prefix matches itself and everything below it)

_PREFIX_RULES: dict[str, str] = {
    **dict.fromkeys(["sys.modules", "sys.path", "sys.meta_path", "sys.path_hooks", "sys.path_importer_cache",
                     "sys.excepthook", "sys.displayhook", "sys.audit", "sys.addaudithook", "sys.setrecursionlimit",
                     "sys.stdout.fileno", "sys.stderr.fileno"], "sys"),
    **dict.fromkeys(["sys._getframe", "sys._current_frames", "sys.setprofile", "sys.settrace", "sys.exc_info",
                     "sys.last_traceback", "sys.exception", "threading.settrace", "threading.setprofile",
                     "linecache", "gc.get_referrers", "gc.get_referents", "gc.get_objects", "pdb", "bdb",
                     "<builtin>.breakpoint", "<builtin>.globals", "<builtin>.locals", "faulthandler",
                     "traceback.extract_stack", "traceback.format_stack", "traceback.print_stack",
                     "traceback.walk_stack", "traceback.StackSummary", "types.FrameType", "dis"]
                    + [f"inspect.{name}" for name in (
                        "currentframe", "stack", "trace", "getouterframes", "getinnerframes", "getframeinfo",
                        "getlineno", "getsource", "getsourcelines", "findsource", "getsourcefile", "getfile",
                        "getcomments", "getmodule", "getclosurevars", "getmembers", "getmembers_static",
                        "getattr_static", "getgeneratorlocals", "getcoroutinelocals", "FrameInfo", "Traceback")],
                    "introspection"),
    **dict.fromkeys(["builtins", "__builtins__"], "builtins"),
    **dict.fromkeys(["<builtin>.exec", "<builtin>.eval", "<builtin>.compile", "<builtin>.__import__",
                     "importlib", "runpy", "imp", "zipimport", "pkgutil", "code", "codeop"], "dynamic-code"),
    **dict.fromkeys(["sqlite3", "dbm", "shelve", "nbgrader", "course_grader", "sqlalchemy", "psycopg2",
                     "alembic"], "database"),
    **dict.fromkeys(["subprocess", "os.system", "os.popen", "os.fork", "os.forkpty", "os.posix_spawn",
                     "os.posix_spawnp", "os.kill", "os.killpg", "os.setsid", "os.execl", "os.execle", "os.execlp",
                     "os.execlpe", "os.execv", "os.execve", "os.execvp", "os.execvpe", "os.spawnl", "os.spawnle",
                     "os.spawnlp", "os.spawnlpe", "os.spawnv", "os.spawnve", "os.spawnvp", "os.spawnvpe",
                     "os.startfile", "os.register_at_fork", "os.dup2", "pty", "pexpect", "signal", "resource",
                     "multiprocessing", "concurrent.futures.ProcessPoolExecutor", "asyncio.create_subprocess_exec",
                     "asyncio.create_subprocess_shell", "asyncio.subprocess", "atexit", "_thread", "sh", "plumbum",
                     "threading", "concurrent.futures",
                     "<ipython>.system", "<ipython>.getoutput", "<ipython>.system_piped", "<ipython>.system_raw"],
                    "process"),
    **dict.fromkeys(["ctypes", "_ctypes", "cffi", "mmap"], "native"),
    **dict.fromkeys(["socket", "socketserver", "ssl", "http", "urllib", "urllib3", "requests", "httpx", "aiohttp",
                     "ftplib", "smtplib", "telnetlib", "xmlrpc", "asyncio.open_connection", "webbrowser",
                     "zmq", "jupyter_client", "ipykernel", "ipyparallel"], "network"),
    **dict.fromkeys(["os.environ", "os.environb", "os.getenv", "os.getenvb", "os.putenv", "os.unsetenv"],
                    "environment"),
    **dict.fromkeys(["os.chdir", "os.fchdir", "os.chroot", "pathlib.Path.home", "os.path.expanduser",
                     "os.path.expandvars", "pathlib.Path.expanduser", "os.getlogin", "pwd", "tempfile.gettempdir"],
                    "file-access"),
    **dict.fromkeys(["IPython.core", "IPython.terminal", "IPython.get_ipython", "IPython.InteractiveShell"],
                    "ipython-hook"),
    **dict.fromkeys(["unittest.mock", "mock", "pytest.MonkeyPatch"], "monkeypatch"),
    **dict.fromkeys(["course_utils.protocol"], "integrity"),
    # harmless corners of flagged packages (the longest prefix decides; "" is no flag)
    **dict.fromkeys(["IPython.core.display", "IPython.core.pylabtools", "os.path.join", "os.path.exists"], ""),
}

# Attributes that reach frames, code or a function's globals: never needed by an answer.
_DUNDER_ATTRS = {
    "f_back": "introspection", "f_locals": "introspection", "f_globals": "introspection", "f_code": "introspection",
    "f_builtins": "introspection", "f_lineno": "introspection", "f_trace": "introspection",
    "tb_frame": "introspection", "tb_next": "introspection", "gi_frame": "introspection", "cr_frame": "introspection",
    "ag_frame": "introspection", "__traceback__": "introspection", "co_consts": "introspection",
    "co_code": "introspection", "__globals__": "introspection", "__code__": "introspection",
    "__closure__": "introspection", "__defaults__": "monkeypatch", "__kwdefaults__": "monkeypatch",
    "__subclasses__": "introspection", "__builtins__": "builtins", "__loader__": "dynamic-code",
    "__spec__": "dynamic-code", "__import__": "dynamic-code",
}

# Attributes flagged whatever object they are read from (a base the scan cannot resolve, such as a
# loop variable, a list item or a function's result, hides nothing): the kernel's hooks, the threads
# and profilers the in-kernel watches rely on, and the grading agent's own state.
_NAMED_ATTRS = {
    "_start_new_thread": "process", "start_new_thread": "process", "setprofile": "introspection",
    "settrace": "introspection", "displayhook": "ipython-hook", "excepthook": "ipython-hook",
    "raw_input": "ipython-hook", "iopub_socket": "ipython-hook", "get_parent": "ipython-hook",
    "_parent_header": "ipython-hook", "send_multipart": "ipython-hook", "_ACTIVE": "integrity",
    "_AUDIT": "integrity", "_HOOKED": "integrity", "_REMOTE_MODES": "integrity", "REMOTE_MODES": "integrity",
}
# Names whose (re)assignment, on any object, switches a watch off or replaces what is graded.
_WATCH_NAMES = {"own_work", "banned_calls", "answer", "check_defined_here", "serve", "_ACTIVE", "_AUDIT"}

# The IPython shell (get_ipython()): any attribute but these is a hook or a way around the kernel.
_SHELL_HARMLESS = {"run_line_magic", "run_cell_magic", "kernel"}
_MAGICS_HARMLESS = {"matplotlib", "time", "timeit", "precision", "pprint", "who", "whos", "who_ls", "config",
                    "capture", "prun", "xmode", "load_ext autoreload", "autoreload"}
_SHELL_MAGICS = {"bash", "sh", "script", "system", "sx", "perl", "ruby", "python", "python2", "python3", "pypy",
                 "sc", "killbgscripts"}
_MAGICS_WITH_CODE = {"time", "timeit", "prun", "capture"}
_SHELL_NAMES = {"<builtin>.get_ipython", "IPython.get_ipython", "IPython.core.getipython.get_ipython",
                "IPython.core.interactiveshell.InteractiveShell.instance", "IPython.InteractiveShell.instance"}
_HISTORY_NAMES = re.compile(r"^(In|Out|_ih|_oh|_dh|_i+|_i\d+|_\d+|__|___|_exit_code)$")

# Where an assignment into an imported module or object is tampering.
_PATCH_TARGETS = ("course_utils", "torch", "builtins", "numpy", "math", "sys", "os", "IPython", "unittest",
                  "functools", "operator", "types", "importlib", "inspect", "random", "nbformat", "matplotlib")

# Settings made to be assigned: not tampering.
_SETTINGS = ("torch.backends.", "matplotlib.rcParams", "matplotlib.pyplot.rcParams", "numpy.random.seed")

# File functions whose literal path arguments are checked.
_FILE_FUNCS = re.compile(
    r"^(<builtin>\.open|io\.|codecs\.open|os\.|pathlib\.|shutil\.|glob\.|fnmatch\.|numpy\.(load|save|loadtxt|"
    r"savetxt|genfromtxt|fromfile|memmap)|torch\.(load|save)|safetensors\.|pandas\.read_|zipfile\.|tarfile\.|"
    r"json\.|pickle\.|csv\.|nbformat\.|tempfile\.|course_utils\.)")
_FILE_METHODS = {"open", "read_text", "read_bytes", "write_text", "write_bytes", "iterdir", "glob", "rglob",
                 "joinpath", "with_name", "unlink", "rmdir", "mkdir", "touch", "rename", "replace", "symlink_to",
                 "exists", "is_file", "is_dir", "stat", "chmod"}


def _outside_path(text: str) -> bool:
    """Does a literal path leave the working directory (absolute, home, or ``..``)?"""
    text = text.strip()
    if not text or "\n" in text:
        return False
    return (text.startswith(("/", "~", "\\\\")) or text == ".." or text.startswith("../")
            or "/../" in text or text.endswith("/..") or bool(re.match(r"^[A-Za-z]:[\\/]", text)))


def _rule_for(path: str) -> str | None:
    """The rule a resolved dotted path falls under, if any (longest matching prefix)."""
    parts = path.split(".")
    for end in range(len(parts), 0, -1):
        rule = _PREFIX_RULES.get(".".join(parts[:end]))
        if rule:
            return rule
    return None


# ---------------------------------------------------------------------------------------------
# Reference implementations


@lru_cache(maxsize=None)
def _course_modules() -> frozenset[str]:
    """Dotted names of the modules of the installed ``course_utils`` package."""
    spec = importlib.util.find_spec("course_utils")
    if spec is None or not spec.submodule_search_locations:
        return frozenset({"course_utils"})
    base = Path(list(spec.submodule_search_locations)[0])
    found = {"course_utils"}
    for path in base.rglob("*.py"):
        parts = path.relative_to(base).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found.add(".".join(("course_utils", *parts)))
    return frozenset(found)


@lru_cache(maxsize=None)
def _module_names(module: str) -> frozenset[str]:
    """Top-level names a ``course_utils`` module defines (for ``from module import *``)."""
    spec = importlib.util.find_spec(module) if module in _course_modules() else None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return frozenset()
    tree = ast.parse(Path(spec.origin).read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return frozenset(names)


def _object_in_course(path: str) -> str | None:
    """For ``course_utils.mod.obj.attr`` the object name ``obj`` (None when the path is a module)."""
    parts = path.split(".")
    if parts[0] != "course_utils":
        return None
    modules = _course_modules()
    end = max(i for i in range(1, len(parts) + 1) if ".".join(parts[:i]) in modules or i == 1)
    return parts[end] if end < len(parts) else None


@dataclass(frozen=True)
class _Reference:
    path: str | None  # exact dotted path (from own_work), or None
    name: str | None  # object name of any course_utils module (an answer cell's definition)
    grade_ids: frozenset[str]  # test cells that check it: protected up to the last of them


def _code(source: str) -> ast.Module | None:
    """Python AST of a cell, IPython syntax (magics, ``!cmd``) translated; None on SyntaxError."""
    try:
        return ast.parse(source)  # plain Python: most cells, and much faster than IPython's transform
    except (SyntaxError, ValueError):
        pass
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        source = TransformerManager().transform_cell(source)
    except Exception:  # noqa: BLE001 - a cell IPython cannot transform is parsed as it is
        pass
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None


def _words(source: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", source))


def reference_paths(source_nb: NotebookNode) -> list[_Reference]:
    """What counts as the exercise's reference: (a) every top-level def/class of an answer cell,
    matched as an object of any ``course_utils`` module, and (b) every dotted path given to
    ``own_work(...)`` in a test cell. Each is protected up to the last test cell naming it."""
    cells = [c for c in source_nb.cells if c.cell_type == "code"]
    tests = [(nbgrader_meta(c).get("grade_id", ""), c.source) for c in cells
             if nbgrader_meta(c).get("grade") and not nbgrader_meta(c).get("solution")]
    found: list[_Reference] = []
    for position, cell in enumerate(cells):
        meta = nbgrader_meta(cell)
        if not (meta.get("solution") and not meta.get("grade")):
            continue
        tree = _code(cell.source)
        for node in tree.body if tree else []:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                naming = {gid for gid, src in tests if node.name in _words(src)}
                if not naming:  # the test cell right after the answer
                    later = [nbgrader_meta(c).get("grade_id") for c in cells[position + 1:] if nbgrader_meta(c).get("grade")]
                    naming = set(later[:1])
                found.append(_Reference(None, node.name, frozenset(naming)))
    for grade_id, source in tests:
        tree = _code(source)
        for part in ast.walk(tree) if tree else []:
            if isinstance(part, ast.Call):
                func = part.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if called == "own_work":
                    for arg in part.args:
                        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                            last = arg.value.rsplit(".", 1)[-1]
                            naming = {gid for gid, src in tests if last in _words(src)} | {grade_id}
                            found.append(_Reference(arg.value, None, frozenset(naming)))
    return found


# ---------------------------------------------------------------------------------------------
# The scanner


class _Scanner:
    """Walks one notebook's code cells in order, resolving names to dotted paths across cells."""

    def __init__(self, references: list[_Reference], test_positions: dict[str, int], protected: dict[str, str]):
        self.aliases: dict[str, str] = {}
        self.references = references
        self.test_positions = test_positions
        self.protected = protected  # name -> dotted path the source notebook imports it as
        self.flags: list[Flag] = []
        self.index = 0
        self.label = ""
        self.emit = False

    # -- resolution ----------------------------------------------------------------------------
    def resolve(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            if node.id in self.aliases:
                return self.aliases[node.id]
            if node.id == "__builtins__":
                return "builtins"
            if hasattr(_builtins, node.id) or node.id == "get_ipython":
                return f"<builtin>.{node.id}"
            return None
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Subscript):
            key = node.slice
            if isinstance(node.value, (ast.List, ast.Tuple)) and isinstance(key, ast.Constant) and isinstance(key.value, int):
                items = node.value.elts  # [sys][0]
                return self.resolve(items[key.value]) if -len(items) <= key.value < len(items) else None
            base = self.resolve(node.value)
            if base == "sys.modules" and isinstance(key, ast.Constant) and isinstance(key.value, str):
                return key.value
            if base and isinstance(key, ast.Constant) and isinstance(key.value, str) and base.endswith("__dict__"):
                return f"{base[: -len('.__dict__')]}.{key.value}"
            return None
        if isinstance(node, ast.Call):
            func = self.resolve(node.func)
            if func is None:
                return None
            first = node.args[0] if node.args else None
            constant = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None
            if func == "<builtin>.getattr" and len(node.args) >= 2:
                base = self.resolve(node.args[0])
                name = node.args[1]
                if base and isinstance(name, ast.Constant) and isinstance(name.value, str):
                    return f"{base}.{name.value}"
                return None
            if func in ("importlib.import_module", "<builtin>.__import__", "importlib.__import__") and constant:
                return constant
            if func in ("<builtin>.vars",) and node.args:
                base = self.resolve(node.args[0])
                return f"{base}.__dict__" if base else None
            if func in _SHELL_NAMES:
                return "<ipython>"
            return f"{func}()"
        return None

    # -- reporting -----------------------------------------------------------------------------
    def flag(self, node: ast.AST, rule: str, text: str, line_offset: int = 0) -> None:
        if self.emit:
            line = getattr(node, "lineno", 1) + line_offset
            self.flags.append(Flag(self.index, self.label, line, rule, text))

    def check_path(self, node: ast.AST, path: str, offset: int) -> None:
        """Flag a resolved dotted path used in a student cell."""
        clean = path.replace("()", "")
        rule = _rule_for(clean)
        if rule:
            self.flag(node, rule, clean, offset)
        if clean.startswith("<ipython>"):
            attr = clean.split(".")[1] if "." in clean else ""
            if attr and attr not in _SHELL_HARMLESS:
                self.flag(node, "ipython-hook" if attr not in ("system", "getoutput") else "process",
                          f"get_ipython().{attr}", offset)
        object_name = _object_in_course(clean)
        if object_name:
            self.check_reference(node, clean, object_name, offset)
        last = clean.rsplit(".", 1)[-1]
        if last in _DUNDER_ATTRS and "." in clean:
            self.flag(node, _DUNDER_ATTRS[last], clean, offset)

    def check_reference(self, node: ast.AST, path: str, object_name: str, offset: int) -> None:
        for ref in self.references:
            hit = (ref.path is not None and (path == ref.path or path.startswith(ref.path + "."))) or (
                ref.name is not None and object_name == ref.name)
            if hit and self.index < self.protected_until(ref):
                self.flag(node, "reference", f"{path} is the reference implementation of an exercise", offset)
                return

    def protected_until(self, ref: _Reference) -> int:
        positions = [self.test_positions[g] for g in ref.grade_ids if g in self.test_positions]
        return max(positions) if positions else 1 << 30

    # -- cells ---------------------------------------------------------------------------------
    def cell(self, index: int, label: str, source: str, emit: bool) -> None:
        self.index, self.label, self.emit = index, label, emit
        tree = _code(source)
        if tree is not None:
            self.visit(tree, 0, top_level=True)

    def bind(self, name: str, path: str | None) -> None:
        if path is None:
            self.aliases.pop(name, None)
        else:
            self.aliases[name] = path

    def visit(self, tree: ast.Module, offset: int, top_level: bool = False) -> None:
        for statement in tree.body:
            self.statement(statement, offset, top_level)

    def statement(self, statement: ast.stmt, offset: int, top_level: bool) -> None:
        # bindings first, then every expression inside; names bound inside a function body
        # are its locals: they resolve (over-approximated) but neither unbind nor shadow
        module_level = _module_level(statement)
        for node in ast.walk(statement):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    bound = alias.asname or alias.name.split(".")[0]
                    path = alias.name if alias.asname else alias.name.split(".")[0]
                    self.check_path(node, alias.name, offset)
                    self.check_rebinding(node, bound, path, offset, is_import=True)
                    self.bind(bound, path)
            elif isinstance(node, ast.ImportFrom):
                if node.level or not node.module:
                    continue
                for alias in node.names:
                    if alias.name == "*":
                        self.check_path(node, node.module, offset)
                        for name in _module_names(node.module):
                            self.check_path(node, f"{node.module}.{name}", offset)
                            self.bind(name, f"{node.module}.{name}")
                        continue
                    path = f"{node.module}.{alias.name}"
                    self.check_path(node, path, offset)
                    self.check_rebinding(node, alias.asname or alias.name, path, offset, is_import=True)
                    self.bind(alias.asname or alias.name, path)
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)) and isinstance(node.target, ast.Name) \
                    and isinstance(node.iter, (ast.List, ast.Tuple, ast.Set)):
                # for m in [sys]: -- the loop variable stands for what the literal holds (the first it resolves)
                found = next((p for p in map(self.resolve, node.iter.elts) if p), None)
                if found:
                    self.bind(node.target.id, found)
            if isinstance(node, ast.Assign) and isinstance(node.value, (ast.Tuple, ast.List)):
                for target in node.targets:  # a, b = sys, os
                    if isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) == len(node.value.elts):
                        for element, item in zip(target.elts, node.value.elts):
                            if isinstance(element, ast.Name) and self.resolve(item):
                                self.bind(element.id, self.resolve(item))
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                value = self.resolve(node.value) if node.value is not None else None
                for target in targets:
                    self.check_target(target, offset, node in module_level)
                    if isinstance(target, ast.Name) and (value or node in module_level):
                        self.bind(target.id, value if isinstance(node, ast.Assign) else None)
            elif isinstance(node, ast.Delete):
                for target in node.targets:
                    self.check_target(target, offset, node in module_level)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if node in module_level:
                    self.check_rebinding(node, node.name, None, offset)
                    self.bind(node.name, None)
            elif isinstance(node, (ast.For, ast.With)) and node in module_level:
                loop_targets = [node.target] if isinstance(node, ast.For) else [i.optional_vars for i in node.items]
                for loop_target in loop_targets:
                    for part in ast.walk(loop_target) if loop_target is not None else []:
                        if isinstance(part, ast.Name):
                            self.check_rebinding(node, part.id, None, offset)
            elif isinstance(node, ast.Global):
                for name in node.names:
                    self.check_rebinding(node, name, None, offset)
        if self.emit:  # a locked cell only contributes its bindings
            for node in ast.walk(statement):
                self.expression(node, offset)

    def check_target(self, target: ast.AST, offset: int, module_level: bool = True) -> None:
        """Assignment into an attribute or item of an imported module or object."""
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.check_target(element, offset, module_level)
            return
        if isinstance(target, ast.Starred):
            self.check_target(target.value, offset, module_level)
            return
        if isinstance(target, ast.Name):
            if _HISTORY_NAMES.match(target.id) and module_level:
                self.flag(target, "ipython-history", target.id, offset)
            if target.id in self.protected and module_level:
                self.flag(target, "shadowing", f"rebinds {target.id}, which the tests import from "
                          f"{self.protected[target.id]}", offset)
            return
        root = target
        while isinstance(root, (ast.Attribute, ast.Subscript)):
            root = root.value
        base = self.resolve(target.value) if isinstance(target, (ast.Attribute, ast.Subscript)) else None
        path = self.resolve(root)
        # an item of a call's result (torch.zeros(3)[0] = 1) is a new object, not the module
        if (base and "()" not in base and path and (path.startswith(_PATCH_TARGETS) or path.startswith("<"))
                and not base.startswith(_SETTINGS)):
            shown = base.replace("()", "") + (f".{target.attr}" if isinstance(target, ast.Attribute) else "[...]")
            self.flag(target, "monkeypatch", f"assigns into {shown}", offset)

    def check_rebinding(self, node: ast.AST, name: str, path: str | None, offset: int, is_import: bool = False) -> None:
        if _HISTORY_NAMES.match(name) and name not in ("_",):
            self.flag(node, "ipython-history", name, offset)
        wanted = self.protected.get(name)
        if wanted is None or (is_import and path == wanted):
            return
        self.flag(node, "shadowing", f"rebinds {name}, which the tests import from {wanted}", offset)

    def expression(self, node: ast.AST, offset: int) -> None:
        if isinstance(node, ast.Name):
            if _HISTORY_NAMES.match(node.id) and isinstance(node.ctx, ast.Load) and node.id not in self.aliases:
                self.flag(node, "ipython-history", node.id, offset)
            path = self.resolve(node)
            if path and not path.startswith("<builtin>.") or path in _PREFIX_RULES:
                if isinstance(node.ctx, ast.Load):
                    self.check_path(node, path, offset)
        elif isinstance(node, ast.Attribute):
            if node.attr in _NAMED_ATTRS:
                self.flag(node, _NAMED_ATTRS[node.attr], f".{node.attr}", offset)
            if node.attr in _WATCH_NAMES and isinstance(node.ctx, (ast.Store, ast.Del)):
                self.flag(node, "integrity", f"assigns .{node.attr}", offset)
            if node.attr in _DUNDER_ATTRS:
                self.flag(node, _DUNDER_ATTRS[node.attr], f".{node.attr}", offset)
            elif node.attr in ("history_manager", "ast_transformers", "input_transformers_cleanup",
                               "input_transformers_post", "input_transformer_manager", "showtraceback",
                               "set_custom_exc", "events", "user_ns", "user_global_ns", "run_cell", "run_cell_async",
                               "run_ast_nodes", "run_code", "set_hook", "register_magic_function"):
                self.flag(node, "ipython-history" if node.attr == "history_manager" else "ipython-hook",
                          f".{node.attr}", offset)
            path = self.resolve(node)
            if path:
                self.check_path(node, path, offset)
                self.check_file_chain(node, path, offset)
        elif isinstance(node, ast.Subscript):  # sys.modules["x"], mod.__dict__["name"]
            path = self.resolve(node)
            if path:
                self.check_path(node, path, offset)
        elif isinstance(node, ast.Call):
            self.call(node, offset)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            for side in (node.left, node.right):
                literal = _literal_prefix(side)
                if literal is not None and _outside_path(literal) and literal != "/":
                    self.flag(node, "file-access", f"path {literal!r}", offset)

    def call(self, node: ast.Call, offset: int) -> None:
        func = self.resolve(node.func)
        args = [*node.args, *(k.value for k in node.keywords)]
        if func is None:
            if isinstance(node.func, ast.Attribute) and node.func.attr in _FILE_METHODS:
                self.check_literal_paths(node, args, offset)
            return
        whole = self.resolve(node)  # getattr(mod, "name"), import_module("mod"), ...
        if whole and not whole.endswith("()"):
            self.check_path(node, whole, offset)
        clean = func.replace("()", "")
        if clean.endswith((".__setattr__", ".__delattr__")) and clean.startswith("<builtin>.") and node.args:
            clean = "<builtin>." + clean.rsplit(".", 1)[1].strip("_")  # object.__setattr__(torch, ...)
        if clean in ("<builtin>.setattr", "<builtin>.delattr") and node.args:
            target = self.resolve(node.args[0])
            if target and "()" not in target and (target.startswith(_PATCH_TARGETS) or target.startswith("<")):
                self.flag(node, "monkeypatch", f"{clean.split('.')[-1]}({target.replace('()', '')}, ...)", offset)
        if clean in ("<builtin>.getattr", "<builtin>.setattr", "<builtin>.delattr") and len(node.args) >= 2 \
                and isinstance(node.args[1], ast.Constant) and node.args[1].value in {*_NAMED_ATTRS, *_WATCH_NAMES}:
            self.flag(node, _NAMED_ATTRS.get(node.args[1].value, "integrity"), f"{clean.split('.')[-1]}(..., "
                      f"{node.args[1].value!r})", offset)
        if clean == "<builtin>.getattr" and len(node.args) >= 2 and not isinstance(node.args[1], ast.Constant):
            target = self.resolve(node.args[0])
            if target and not target.startswith("<builtin>"):
                self.flag(node, "dynamic-code", f"getattr({target.replace('()', '')}, <computed name>)", offset)
        if clean in ("<builtin>.vars", "<builtin>.dir") and not node.args:
            self.flag(node, "introspection", f"{clean.split('.')[-1]}()", offset)
        if clean in ("<builtin>.exec", "<builtin>.eval", "<builtin>.compile"):
            self.nested_code(node.args[0] if node.args else None, node, offset)
        if clean.startswith("<ipython>.run_line_magic") or clean.startswith("<ipython>.run_cell_magic"):
            magic = str(node.args[0].value) if node.args and isinstance(node.args[0], ast.Constant) else None
            line = str(node.args[1].value) if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) else ""
            if magic in _SHELL_MAGICS:
                self.flag(node, "process", f"%{magic} {line}".strip()[:80], offset)
            elif magic not in _MAGICS_HARMLESS and f"{magic} {line}".strip() not in _MAGICS_HARMLESS:
                self.flag(node, "ipython-hook", f"%{magic} {line}".strip()[:80], offset)
            if magic in _MAGICS_WITH_CODE:
                for arg in node.args[1:]:
                    self.nested_code(arg, node, offset)
        if _FILE_FUNCS.match(clean) or clean.split(".")[-1] in _FILE_METHODS:
            self.check_literal_paths(node, args, offset)
        if clean.startswith(("os.path.dirname", "os.path.split", "os.path.join")) and any(
            (self.resolve(a) or "").replace("()", "").startswith(("os.getcwd", "os.path.abspath", "os.path.realpath"))
            and clean.startswith("os.path.dirname") for a in node.args
        ):
            self.flag(node, "file-access", "parent of the working directory", offset)

    def check_file_chain(self, node: ast.Attribute, path: str, offset: int) -> None:
        if node.attr in ("parent", "parents", "anchor", "root") and path.startswith(("pathlib.", "os.")) and (
            "cwd" in path or "resolve" in path or "absolute" in path or "home" in path or "getcwd" in path
        ):
            self.flag(node, "file-access", f"{path.replace('()', '')}: outside the working directory", offset)

    def check_literal_paths(self, node: ast.Call, args: Sequence[ast.AST], offset: int) -> None:
        for arg in args:
            literal = _literal_prefix(arg)
            if literal is not None and _outside_path(literal):
                self.flag(node, "file-access", f"path {literal!r}", offset)
                return

    def nested_code(self, arg: ast.AST | None, node: ast.AST, offset: int) -> None:
        """Scan a literal string of code (exec/eval argument, %time body) as code of this cell."""
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            tree = _code(arg.value)
            if tree is not None:
                self.visit(tree, offset + getattr(node, "lineno", 1) - 1)


def _module_level(statement: ast.stmt) -> set[ast.AST]:
    """The nodes of a top-level statement outside any function, lambda or class body."""
    found: set[ast.AST] = set()
    stack: list[ast.AST] = [statement]
    while stack:
        node = stack.pop()
        found.add(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue  # the definition binds its name at module level; its body is local
        stack.extend(ast.iter_child_nodes(node))
    return found


def _literal_prefix(node: ast.AST) -> str | None:
    """The literal (start of the) string an expression builds: 'x', f'x{y}', 'x' + y."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return str(node.values[0].value) + "x"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = _literal_prefix(node.left)
        return None if left is None else left + "x"
    return None


def _protected_names(source_nb: NotebookNode, references: list[_Reference]) -> dict[str, str]:
    """Names the source notebook binds by import (the tests rely on them), except answer names."""
    answer_names = {r.name for r in references if r.name}
    names: dict[str, str] = {}
    for cell in source_nb.cells:
        if cell.cell_type != "code":
            continue
        tree = _code(cell.source)
        for node in ast.walk(tree) if tree else []:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    names[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    if alias.name != "*":
                        names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return {name: path for name, path in names.items() if name not in answer_names}


def _locked_sources(source_nb: NotebookNode) -> dict[str, str]:
    """grade_id -> source of every locked cell (test cells and read-only cells) of the source."""
    return {nbgrader_meta(c)["grade_id"]: c.source for c in source_nb.cells
            if nbgrader_meta(c).get("grade_id") and (nbgrader_meta(c).get("locked") or
                                                    (nbgrader_meta(c).get("grade") and not nbgrader_meta(c).get("solution")))}


def _instructor_cells(source_nb: NotebookNode) -> tuple[dict[str, str], frozenset[str]]:
    """The unlocked code cells the instructor wrote that are not answers (imports, demos, plots):
    ``(cell id -> source, set of sources)``. Unchanged in a submission, they are trusted."""
    cells = [c for c in source_nb.cells if c.cell_type == "code" and not nbgrader_meta(c)]
    return {c.id: c.source.strip() for c in cells if c.get("id")}, frozenset(c.source.strip() for c in cells)


@dataclass(frozen=True)
class _SourceInfo:
    references: list[_Reference]
    locked: dict[str, str]
    protected: dict[str, str]
    instructor_ids: dict[str, str]
    instructor_sources: frozenset[str]

    def trusted(self, cell: NotebookNode) -> bool:
        """Is this submitted cell one of the instructor's unlocked cells, unchanged?"""
        if nbgrader_meta(cell):
            return False
        source = cell.source.strip()
        if cell.get("id") in self.instructor_ids:
            return self.instructor_ids[cell.get("id")] == source
        return source in self.instructor_sources


def _analyse(source_nb: NotebookNode) -> _SourceInfo:
    references = reference_paths(source_nb)
    return _SourceInfo(references, _locked_sources(source_nb), _protected_names(source_nb, references),
                       *_instructor_cells(source_nb))


def scan_notebook(source_nb: NotebookNode, submitted_nb: NotebookNode, *, _info: _SourceInfo | None = None) -> list[Flag]:
    """Flags for every student-written code cell of ``submitted_nb`` (graded against ``source_nb``).

    Locked cells (tests, read-only cells) are nbgrader's copies of the source when grading, so
    they are read from the source, for the names they import, and never flagged. The
    instructor's unlocked cells (imports, demos), unchanged, are not flagged either, but the
    names they bind are followed: an answer that calls a reference the instructor's cell
    imported is flagged where it calls it."""
    info = _info or _analyse(source_nb)
    references, locked = info.references, info.locked
    cells = list(submitted_nb.cells)
    test_positions = {str(nbgrader_meta(c)["grade_id"]): i for i, c in enumerate(cells)
                      if nbgrader_meta(c).get("grade_id") in locked}
    scanner = _Scanner(references, test_positions, info.protected)
    for index, cell in enumerate(cells):
        if cell.cell_type != "code":
            continue
        grade_id = nbgrader_meta(cell).get("grade_id")
        label = grade_id or cell.get("id") or f"cell-{index}"
        if grade_id in locked:
            scanner.cell(index, label, locked[grade_id], emit=False)
        elif info.trusted(cell):  # the instructor's code as released: its names count, its code is not flagged
            scanner.cell(index, label, cell.source, emit=False)
        else:
            scanner.cell(index, label, cell.source, emit=True)
    return sorted(set(scanner.flags))


def scan_submissions(course: Course, assignment: str, students: list[str] | None = None) -> dict[str, list[Flag]]:
    """``student -> flags`` for every submission ``submitted/<student>/<assignment>/*.ipynb``.

    Each notebook is compared with ``<source>/<assignment>/<same name>.ipynb`` (the source
    directory is ``solutions``). A notebook that cannot be read gets no flags here (the
    submission inspection reports it)."""
    sources = {p.name: read(p) for p in sorted(course.path("source", assignment=assignment).glob("*.ipynb"))}
    infos = {name: _analyse(nb) for name, nb in sources.items()}
    result: dict[str, list[Flag]] = {}
    submitted = course.path("submitted")
    folders = sorted(p for p in submitted.glob(f"*/{assignment}") if p.is_dir()) if submitted.is_dir() else []
    for folder in folders:
        student = folder.parent.name
        if students and student not in students:
            continue
        flags: list[Flag] = []
        for path in sorted(folder.glob("*.ipynb")):
            name = path.name if path.name in sources else (next(iter(sources)) if len(sources) == 1 else None)
            if name is None:
                continue
            try:
                submission = read(path)
            except Exception:  # noqa: BLE001 - a malformed notebook is reported by inspect_submissions
                continue
            flags.extend(scan_notebook(sources[name], submission, _info=infos[name]))
        result[student] = flags
    return result


def format_flags(assignment: str, flags: dict[str, list[Flag]]) -> str:
    """The instructor's view: per student, each flag with its cell and line."""
    lines = [f"{assignment}: {sum(map(len, flags.values()))} flag(s) in {sum(bool(f) for f in flags.values())} "
             f"of {len(flags)} submission(s)"]
    for student, found in sorted(flags.items()):
        if found:
            lines.append(f"  {student}: {len(found)} flag(s)")
            lines.extend(f"    {flag}" for flag in found)
    return "\n".join(lines)


def write_flags_csv(flags: dict[str, list[Flag]], path: Path) -> Path:
    """One row per flag (student, cell index, cell, line, rule, text), for a spreadsheet."""
    import csv

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["student", "cell_index", "cell", "line", "rule", "text"])
        for student, found in sorted(flags.items()):
            writer.writerows([student, f.index, f.cell, f.line, f.rule, f.text] for f in found)
    return path
