"""Start-up: the `course` command and `course_utils.corpus` import no heavy package they do not need.

nbformat (through jsonschema and rfc3987_syntax), nbgrader, datasets and torch each take
seconds to import; a command imports them inside the function that uses them.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

HEAVY = ("nbformat", "nbclient", "nbgrader", "jsonschema", "datasets", "torch")

PROBE = """
import json, sys, runpy, contextlib, io
argv, heavy = json.loads(sys.argv[1]), json.loads(sys.argv[2])
sys.argv = ["course", *argv]
with contextlib.redirect_stdout(io.StringIO()):
    try:
        runpy.run_module("course_utils.cli", run_name="__main__")
    except SystemExit:
        pass
print(json.dumps(sorted(m for m in heavy if m in sys.modules)))
"""


def imported_by(*argv: str) -> list[str]:
    """The heavy modules that ``course ARGV`` leaves in sys.modules."""
    result = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv), json.dumps(HEAVY)], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("argv", [("--help",), ("demo", "--help"), ("execute", "--help"), ("grade", "--help"),
                                  ("check", "--help")])
def test_course_help_imports_nothing_heavy(argv):
    assert imported_by(*argv) == []


def test_corpus_imports_datasets_only_when_needed():
    code = ("import sys, course_utils.corpus as c\n"
            "tok = c.CharTokenizer.from_texts(['ab'])\n"
            "print('datasets' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_the_sandbox_check_imports_neither_nbgrader_nor_nbclient():
    """`course grade` asks whether a sandbox works before grading; nbgrader's Execute subclass
    (SandboxedExecute) is imported only when nbgrader grades."""
    code = ("import sys, json\n"
            "from course_grader.sandbox import bubblewrap\n"
            "bubblewrap.SandboxLimits.from_env(); bubblewrap.sandbox_enabled()\n"
            "before = sorted(m for m in ('nbgrader', 'nbclient', 'nbformat') if m in sys.modules)\n"
            "from course_grader.sandbox.execute import SandboxLimitError\n"
            "print(json.dumps([before, issubclass(SandboxLimitError, sys.modules['nbclient'].exceptions.DeadKernelError)]))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == [[], True]


def test_nbformat_builds_no_iri_grammar_on_import():
    """`make setup` removes jsonschema's optional rfc3987-syntax: with it, every process that imports
    nbformat (each `course` command, nbgrader process, checker and test worker) spends about 2.5 s of
    CPU building an Earley grammar for an IRI string format that nothing here checks."""
    code = "import sys, nbformat\nprint('rfc3987_syntax' in sys.modules and sys.modules['rfc3987_syntax'] is not None)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False", "rfc3987-syntax is installed again: see the Makefile's setup recipe"


def test_the_checker_process_imports_no_notebook_library():
    """The checker (one process per graded notebook) splits a test cell without nbformat or nbgrader."""
    code = ("import sys, json\nimport course_grader.grading.checker.process\n"
            "print(json.dumps(sorted(m for m in ('nbformat', 'nbgrader', 'nbclient', 'jsonschema') if m in sys.modules)))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []
