"""The submission scan flags every way around the tests, and nothing an honest answer writes."""

from __future__ import annotations

import csv

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from course_grader.course import Course
from course_utils.cells import nbgrader_meta, read
from course_grader.grading.scan import RULES, format_flags, scan_notebook, scan_submissions

from tests.conftest import ROOT, assignment_names


def _meta(grade_id: str, *, solution=False, grade=False, locked=False, points=0) -> dict:
    return {"nbgrader": {"grade_id": grade_id, "solution": solution, "grade": grade, "locked": locked,
                         "points": points, "schema_version": 3}}


ANSWER = "def top_p_filter(logits, p):\n    ### BEGIN SOLUTION\n    return logits\n    ### END SOLUTION\n"
TEST = (
    "from course_utils.checks import check, own_work\n"
    "with own_work('course_utils.attention.scaled_dot_product_attention', name='attend'):\n"
    "    check(top_p_filter(1, 0.5) == 1, 'identity')\n"
    "### BEGIN HIDDEN TESTS\ncheck(top_p_filter(2, 0.5) == 2, 'identity')\n### END HIDDEN TESTS\n"
)


def _source() -> nbformat.NotebookNode:
    """A two-exercise source notebook: setup, answer, test, a demo cell, answer, test."""
    return new_notebook(cells=[
        new_markdown_cell("# tiny"),
        new_code_cell("import math\nimport torch\nimport torch.nn.functional as F\nfrom course_utils.checks import check_close"),
        new_code_cell(ANSWER, metadata=_meta("top_p", solution=True)),
        new_code_cell(TEST, metadata=_meta("test_top_p", grade=True, locked=True, points=2)),
        new_code_cell("x = torch.zeros(3)\nx[0] = 1.0\nprint(math.pi)"),
        new_code_cell("def attend(q, k, v):\n    ### BEGIN SOLUTION\n    return v\n    ### END SOLUTION\n",
                      metadata=_meta("attend", solution=True)),
        new_code_cell("check_close(attend(1, 2, 3), 3, name='attend')", metadata=_meta("test_attend", grade=True, locked=True, points=1)),
        new_code_cell("from course_utils.gpt import top_p_filter as library_top_p  # after its test: fine"),
    ])


def _submission(answer: str, cell: int = 2) -> nbformat.NotebookNode:
    nb = _source()
    nb.cells[cell].source = answer
    return nb


# One tiny attack per line: (rule that must be flagged, the student's code in the first answer cell)
ATTACKS = [
    ("reference", "from course_utils.gpt import top_p_filter"),
    ("reference", "import course_utils.gpt as g\ntop_p_filter = g.top_p_filter"),
    ("reference", "from course_utils import gpt\ndef top_p_filter(l, p):\n    return gpt.top_p_filter(l, p)"),
    ("reference", "import course_utils.gpt\ntop_p_filter = course_utils.gpt.top_p_filter"),
    ("reference", "import importlib\ntop_p_filter = importlib.import_module('course_utils.gpt').top_p_filter"),
    ("reference", "top_p_filter = __import__('course_utils.gpt', fromlist=['x']).top_p_filter"),
    ("reference", "from course_utils import gpt\ntop_p_filter = getattr(gpt, 'top_p_filter')"),
    ("reference", "from course_utils.gpt import *"),
    ("reference", "from course_utils.attention import scaled_dot_product_attention as sdpa"),  # own_work path
    ("reference", "import sys\ntop_p_filter = sys.modules['course_utils.gpt'].top_p_filter"),
    ("monkeypatch", "import course_utils.checks\ncourse_utils.checks.check = lambda *a, **k: None"),
    ("monkeypatch", "from course_utils import checks\nsetattr(checks, 'check_close', print)"),
    ("monkeypatch", "torch.allclose = lambda *a, **k: True"),
    ("monkeypatch", "F.softmax = lambda x, dim: x"),
    ("monkeypatch", "torch.Tensor.__eq__ = lambda a, b: True"),
    ("monkeypatch", "import builtins\nbuiltins.print = lambda *a: None"),
    ("monkeypatch", "from unittest import mock\nmock.patch('course_utils.checks.check').start()"),
    ("monkeypatch", "check_close.__defaults__ = (1e9,)"),
    ("monkeypatch", "object.__setattr__(torch, 'allclose', print)"),
    ("monkeypatch", "vars(torch)['allclose'] = print"),
    ("monkeypatch", "import course_utils.checks\ndel course_utils.checks.check"),
    ("process", "import os\nos.__dict__['system']('ls')"),
    ("dynamic-code", "import os\ngetattr(os, 'sys' + 'tem')('ls')"),
    ("shadowing", "def f():\n    global check_close\n    check_close = print\nf()"),
    ("shadowing", "def check_close(*args, **kwargs):\n    pass"),
    ("shadowing", "check_close = print"),
    ("shadowing", "import numpy as torch"),
    ("ipython-hook", "get_ipython().ast_transformers.append(object())"),
    ("ipython-hook", "ip = get_ipython()\nip.input_transformers_cleanup.append(str.upper)"),
    ("ipython-hook", "get_ipython().events.register('post_run_cell', print)"),
    ("ipython-hook", "get_ipython().showtraceback = lambda *a, **k: None"),
    ("ipython-hook", "get_ipython().set_custom_exc((Exception,), print)"),
    ("ipython-hook", "shell = get_ipython()\nold = shell.run_cell"),
    ("ipython-hook", "from IPython.core.interactiveshell import InteractiveShell\nInteractiveShell.instance()"),
    ("ipython-hook", "%load_ext my_extension"),
    ("ipython-history", "print(In[-1])"),
    ("ipython-history", "leak = _ih[3]"),
    ("ipython-history", "print(Out)"),
    ("ipython-history", "print(_i12)"),
    ("ipython-history", "h = get_ipython().history_manager"),
    ("introspection", "import sys\ndef top_p_filter(l, p):\n    print(sys._getframe(1).f_locals)\n    return l"),
    ("introspection", "import inspect\ndef top_p_filter(l, p):\n    print(inspect.stack())\n    return l"),
    ("introspection", "import inspect\nfrom course_utils import checks\nprint(inspect.getsource(checks))"),
    ("introspection", "import linecache\nprint(linecache.cache)"),
    ("introspection", "import gc\nprint(gc.get_referrers(top_p_filter))"),
    ("introspection", "import sys\nsys.settrace(print)"),
    ("introspection", "import sys\nsys.setprofile(print)"),
    ("introspection", "def top_p_filter(l, p):\n    try:\n        raise ValueError\n    except ValueError as e:\n        print(e.__traceback__.tb_frame.f_back)"),
    ("introspection", "print(check_close.__globals__)"),
    ("introspection", "g = globals()"),
    ("sys", "import sys\nsys.modules['course_utils.checks'] = None"),
    ("sys", "import sys\nsys.path.insert(0, 'fake')"),
    ("builtins", "__builtins__.print = None"),
    ("dynamic-code", "exec('x = 1')"),
    ("dynamic-code", "eval(compile('1', 'f', 'eval'))"),
    ("process", "exec('import subprocess')"),
    ("database", "import sqlite3\nsqlite3.connect('gradebook.db')"),
    ("database", "from nbgrader.api import Gradebook"),
    ("database", "from course_grader.grading.gradebook import course_db_url"),
    ("database", "import course_grader.demo as grader"),
    ("process", "import subprocess\nsubprocess.run(['ls'])"),
    ("process", "import os\nos.system('ls')"),
    ("process", "import os\nos.popen('ls')"),
    ("process", "import os\nos.execv('/bin/sh', ['sh'])"),
    ("process", "import os\npid = os.fork()"),
    ("process", "import os\nos.spawnl(os.P_NOWAIT, 'x', 'x')"),
    ("process", "!ls"),
    ("process", "%%bash\nls\n"),
    ("process", "import multiprocessing\nmultiprocessing.Process(target=print).start()"),
    ("process", "from signal import signal, SIGINT, SIG_IGN\nsignal(SIGINT, SIG_IGN)"),
    ("native", "import ctypes\nctypes.CDLL(None)"),
    ("network", "import socket\nsocket.create_connection(('example.com', 80))"),
    ("network", "from urllib.request import urlopen"),
    ("environment", "import os\nprint(os.environ)"),
    ("environment", "from os import getenv\nprint(getenv('HOME'))"),
    ("file-access", "print(open('/etc/passwd').read())"),
    ("file-access", "open('../../gradebook.db', 'rb')"),
    ("file-access", "from pathlib import Path\nprint(Path('/work').iterdir())"),
    ("file-access", "from pathlib import Path\nprint(list(Path('.').resolve().parent.iterdir()))"),
    ("file-access", "from pathlib import Path\np = Path('x') / '..' / 'solutions'"),
    ("file-access", "import os\nprint(os.listdir('/'))"),
    ("file-access", "import os\nos.chdir('..')"),
    ("file-access", "import os\nprint(os.listdir(os.path.dirname(os.getcwd())))"),
    ("file-access", "from pathlib import Path\nprint(Path.home())"),
    ("file-access", "name = 'x'\nopen(f'/tmp/{name}', 'w')"),
    ("file-access", "import glob\nprint(glob.glob('../*/*.ipynb'))"),
]


@pytest.mark.parametrize("rule,code", ATTACKS, ids=[f"{r}-{i}" for i, (r, _) in enumerate(ATTACKS)])
def test_each_attack_is_flagged_with_its_rule(rule, code):
    flags = scan_notebook(_source(), _submission(code))
    assert rule in {f.rule for f in flags}, (code, flags)
    assert all(f.index == 2 and f.cell == "top_p" for f in flags if f.rule == rule)


def test_every_rule_has_an_attack():
    assert set(RULES) == {rule for rule, _ in ATTACKS}


def test_the_honest_answer_and_the_blank_notebook_have_no_flags():
    assert scan_notebook(_source(), _source()) == []
    honest = "import math\nimport torch\ndef top_p_filter(logits, p):\n    keep = torch.zeros(3)\n    keep[0] = 1\n    return logits * keep\n"
    assert scan_notebook(_source(), _submission(honest)) == []
    assert scan_notebook(_source(), _submission("# YOUR CODE HERE\nraise NotImplementedError()")) == []


LEGITIMATE = [
    "%matplotlib inline\n%time y = torch.ones(3).sum()",
    "import matplotlib.pyplot as plt\nplt.rcParams['figure.figsize'] = (4, 3)\n_ = plt.plot([1, 2])\nplt.show()",
    "torch.backends.cudnn.deterministic = True\nimport numpy as np\nnp.random.seed(0)\ntorch.manual_seed(0)",
    "import torch\nimport math\nimport torch.nn.functional as F\nfrom course_utils.checks import check_close",
    "with open('notes.txt', 'w') as f:\n    f.write('hi')\nfrom pathlib import Path\nPath('out').mkdir(exist_ok=True)",
    "class Net(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.w = torch.nn.Parameter(torch.zeros(3))\n"
    "    def forward(self, x):\n        check = x * self.w\n        return check",
    "for _ in range(3):\n    print(getattr(torch.nn.Linear(2, 2), 'weight').shape, type(torch).__name__)",
    "from course_utils.attention import softmax\nfrom course_utils import plotting\nprint('a/b'.split('/'))",
]


@pytest.mark.parametrize("code", LEGITIMATE)
def test_legitimate_student_code_is_not_flagged(code):
    assert scan_notebook(_source(), _submission(code)) == []


def test_a_syntax_error_is_not_a_flag():
    assert scan_notebook(_source(), _submission("def top_p_filter(:\n    import subprocess")) == []


def test_the_reference_is_fine_after_its_last_test_but_flagged_in_an_added_cell_before_it():
    assert scan_notebook(_source(), _submission("from course_utils.gpt import top_p_filter", cell=7)) == []
    nb = _source()
    nb.cells.insert(1, new_code_cell("from course_utils.gpt import top_p_filter"))
    (flag,) = scan_notebook(_source(), nb)
    assert (flag.index, flag.line, flag.rule) == (1, 1, "reference")


def test_the_instructors_cells_are_trusted_but_a_reference_they_import_is_flagged_where_used():
    source = _source()
    source.cells.insert(1, new_code_cell("from course_utils.attention import scaled_dot_product_attention"))
    assert scan_notebook(source, source) == []  # unchanged instructor cell: not flagged
    nb = nbformat.from_dict(source)
    nb.cells[3].source = "def top_p_filter(logits, p):\n    return scaled_dot_product_attention(logits, logits, logits)"
    (flag,) = scan_notebook(source, nb)
    assert (flag.index, flag.line, flag.rule) == (3, 2, "reference")
    nb = nbformat.from_dict(source)
    nb.cells[1].source += "\nimport subprocess"  # an edited instructor cell is the student's
    assert sorted(f.rule for f in scan_notebook(source, nb)) == ["process", "reference"]


def test_an_edited_test_cell_is_graded_from_the_source_and_not_scanned():
    nb = _source()
    nb.cells[3].source = "import subprocess"  # nbgrader restores locked cells before grading
    assert scan_notebook(_source(), nb) == []
    nb.cells[3].metadata = {}  # no longer a test cell: the student's own code
    assert [f.rule for f in scan_notebook(_source(), nb)] == ["process"]


def test_flag_position_is_cell_and_line():
    code = "import math\n\nx = 1\nimport subprocess\n"
    (flag,) = scan_notebook(_source(), _submission(code))
    assert (flag.index, flag.cell, flag.line, flag.rule) == (2, "top_p", 4, "process")
    assert "cell 2 (top_p) line 4: [process] subprocess" == str(flag)


@pytest.mark.parametrize("assignment", assignment_names())
def test_no_false_flags_on_the_solutions_and_the_blank_release(assignment):
    source = read(ROOT / "solutions" / assignment / f"{assignment}.ipynb")
    release = read(ROOT / "notebooks" / assignment / f"{assignment}.ipynb")
    assert scan_notebook(source, source) == []
    assert scan_notebook(source, release) == []


def test_a_real_reference_import_in_notebook_10_is_flagged():
    source = read(ROOT / "solutions" / "10_gpt" / "10_gpt.ipynb")
    nb = read(ROOT / "notebooks" / "10_gpt" / "10_gpt.ipynb")
    answer = next(c for c in nb.cells if nbgrader_meta(c).get("grade_id") == "top_p_filter")
    answer.source = "from course_utils.gpt import top_p_filter"
    flags = scan_notebook(source, nb)
    assert [(f.cell, f.rule) for f in flags] == [("top_p_filter", "reference")]


def test_scan_submissions_and_the_flags_command(tmp_path, capsys, monkeypatch):
    from course_grader.cli import main

    (tmp_path / "solutions" / "t").mkdir(parents=True)
    (tmp_path / "nbgrader_config.py").write_text('c.CourseDirectory.source_directory = "solutions"\n')
    nbformat.write(_source(), str(tmp_path / "solutions" / "t" / "t.ipynb"))
    for student, code in [("honest", ANSWER), ("cheat", "from course_utils.gpt import top_p_filter")]:
        (tmp_path / "submitted" / student / "t").mkdir(parents=True)
        nbformat.write(_submission(code), str(tmp_path / "submitted" / student / "t" / "t.ipynb"))
    flags = scan_submissions(Course.open(tmp_path), "t")
    assert flags["honest"] == [] and [f.rule for f in flags["cheat"]] == ["reference"]
    assert list(scan_submissions(Course.open(tmp_path), "t", ["honest"])) == ["honest"]
    assert "cheat: 1 flag(s)" in format_flags("t", flags)

    monkeypatch.setenv("COURSE_ROOT", str(tmp_path))
    assert main(["flags", "t"]) == 0
    out = capsys.readouterr().out
    assert "cheat" in out and "[reference]" in out and "honest" not in out.split("flag(s) in", 1)[1].split("\n", 1)[1]
    with (tmp_path / "build" / "flags" / "t.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["student"], r["rule"], r["cell"], r["line"]) for r in rows] == [("cheat", "reference", "top_p", "1")]


def test_the_red_teams_spellings_are_flagged():
    """Issue 33's blind red teams: hooks reached through loop and list aliases, threads started before a
    watch, the agent's state read to detect grading."""
    cases = {
        "for m in [sys]:\n    m.displayhook('done')\n": "displayhook",
        "import sys\nfor m in [sys]:\n    m.setprofile(None)\n": "setprofile",
        "import threading\n_raw = threading._start_new_thread\n": "_start_new_thread",
        "from concurrent.futures import ThreadPoolExecutor\n_pool = ThreadPoolExecutor(1)\n": "concurrent.futures",
        "import sys\nagent = sys.modules.get('course_utils.protocol.agent')\n": "sys",
        "import course_utils.protocol.agent as a\n": "course_utils.protocol",
        "x = get_ipython().kernel\nx.session.send(x.iopub_socket, 'execute_result', {})\n": "iopub_socket",
        "import course_utils.checks as c\nthings = [c]\nthings[0].own_work = None\n": "own_work",
        "def f(m):\n    return getattr(m, 'displayhook')\n": "displayhook",
    }
    for source, needle in cases.items():
        flags = scan_notebook(_source(), _submission(source))
        assert any(needle in str(flag) for flag in flags), (source, [str(f) for f in flags])
