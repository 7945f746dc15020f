"""Two audiences, two distributions: the student one holds no solution and no hidden test,
and a student install works without the instructor's tools."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
import zipfile
from email.parser import Parser

import pytest
import yaml

from course_utils.tooling.distribution import MARKERS, STUDENT_TOOLING, build_student_distribution, dist_texts, leaks, secret_lines

from conftest import ROOT


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    return build_student_distribution(ROOT, tmp_path_factory.mktemp("dist") / "student-dist")


def test_the_distribution_holds_the_release_a_wheel_and_a_readme(dist):
    names = sorted(str(p.relative_to(dist)) for p in dist.rglob("*") if p.is_file())
    notebooks = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "notebooks").glob("*/*.ipynb"))
    assert [n for n in names if n.endswith(".ipynb")] == notebooks
    assert "README.md" in names and "course check" in (dist / "README.md").read_text()
    (wheel,) = dist.glob("wheels/course_utils-*.whl")
    members = zipfile.ZipFile(wheel).namelist()
    assert "course_utils/gpt.py" in members and "course_utils/tooling/selfcheck.py" in members
    assert not any(re.search(r"tooling/(grading|feedback|sandbox|scan|democlass|rejection|mistakes)\.py", m) for m in members)


def test_no_solution_and_no_hidden_test_in_any_file_of_it(dist):
    hidden, solution = secret_lines(ROOT)
    assert len(hidden) > 500 and len(solution) > 100, "the check must have something to look for"
    texts = dist_texts(dist)
    assert any("!" in name for name in texts), "wheel members are read"
    for name, text in texts.items():
        assert not MARKERS.search(text), name
        assert not re.match(r"(solutions|tests|autograded|submitted|feedback)/", name), name
    assert leaks(ROOT, dist) == []


def test_the_leak_check_finds_a_planted_solution_or_hidden_test(dist, tmp_path):
    import shutil

    hidden, solution = secret_lines(ROOT)
    copy = tmp_path / "copy"
    shutil.copytree(dist, copy)
    (copy / "notes.py").write_text(f"{sorted(solution)[0]}\n")
    (wheel,) = copy.glob("wheels/*.whl")
    with zipfile.ZipFile(wheel, "a") as archive:
        archive.writestr("course_utils/extra.py", f"{sorted(hidden)[0]}\n")
    found = leaks(ROOT, copy)
    assert any(f.startswith("notes.py: solution line") for f in found), found
    assert any("extra.py: hidden test line" in f for f in found), found


def test_a_student_install_does_not_need_nbgrader(dist):
    (wheel,) = dist.glob("wheels/course_utils-*.whl")
    metadata = Parser().parsestr(zipfile.ZipFile(wheel).read("course_utils-0.1.0.dist-info/METADATA").decode())
    requires = metadata.get_all("Requires-Dist")
    unconditional = [r for r in requires if "extra ==" not in r]
    assert not any(r.startswith(("nbgrader", "nbval")) for r in unconditional), unconditional
    assert any(r.startswith("nbgrader") and 'extra == "instructor"' in r for r in requires)


@pytest.mark.slow
def test_course_check_runs_with_nbgrader_unimportable(tmp_path):
    """`course check` (nbclient) works when nbgrader and nbval cannot be imported."""
    notebook = ROOT / "solutions" / "00_welcome" / "00_welcome.ipynb"
    code = ("import sys; sys.modules['nbgrader'] = None; sys.modules['nbval'] = None\n"
            "from course_utils.tooling.cli import main\n"
            f"code = main(['check', {str(notebook)!r}])\n"
            "assert not any(m == 'nbgrader' or m.startswith('nbgrader.') for m in sys.modules if sys.modules[m])\n"
            "raise SystemExit(code)\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout


def test_instructor_tools_are_an_extra_everywhere():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not any(d.startswith(("nbgrader", "nbval")) for d in project["dependencies"])
    assert any(d.startswith("nbgrader==") for d in project["optional-dependencies"]["instructor"])
    extras = re.search(r"^EXTRAS\s*\?=\s*(\S+)", (ROOT / "Makefile").read_text(), re.M).group(1).split(",")
    assert "instructor" in extras
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = [line for entry in env["dependencies"] if isinstance(entry, dict) for line in entry.get("pip", [])]
    assert any(re.search(r"\.\[[a-z,]*instructor", line) for line in pip), pip


def test_the_student_tooling_imports_nbgrader_lazily():
    """The tooling a student gets, and the instructor commands' entry points, import without nbgrader
    (sandbox.py subclasses nbgrader's Execute: only nbgrader itself loads it)."""
    modules = [name.removesuffix(".py") for name in STUDENT_TOOLING if name != "__init__.py"]
    modules += ["scan", "distribution", "feedback", "grading", "submissions", "release", "parallel"]
    code = ("import sys; sys.modules['nbgrader'] = None\n"
            f"for m in {modules!r}: __import__('course_utils.tooling.' + m)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]


def test_a_student_course_command_lists_only_the_student_verbs(capsys):
    """Without the grader, `course --help` shows check and setup-kernel only, and an instructor's verb says
    which extra to install instead of failing with a traceback."""
    from course_utils.tooling import cli

    student = cli.build_parser(instructor=False)
    usage = student.format_help()
    assert "{check,setup-kernel}" in usage and "autograde" not in usage and "held submissions" not in usage
    args = student.parse_args(["grade", "03_self_attention"])
    assert args.handler(args) == 2
    assert 'pip install "course_utils[instructor]"' in capsys.readouterr().err
    assert "autograde" in cli.build_parser(instructor=True).format_help()
