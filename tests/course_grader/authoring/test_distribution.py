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

from course_grader.authoring.distribution import MARKERS, build_student_distribution, dist_texts, leaks, secret_lines

from tests.conftest import ROOT


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
    assert "course_utils/gpt.py" in members and "course_utils/selfcheck.py" in members and "course_utils/cli.py" in members
    assert not any(m.startswith("course_grader") for m in members), "the grader is another package"
    packages = {m.split("/")[0] for m in members if m.endswith(".py")}
    assert packages == {"course_utils"}, packages
    # the wheel is the student package, subpackages (checks/) and its type marker included
    source = ROOT / "src"
    expected = {str(p.relative_to(source)) for p in (source / "course_utils").rglob("*") if p.suffix in (".py", ".typed")}
    shipped = {m for m in members if not m.startswith("course_utils-")}
    assert shipped == expected, {"missing": expected - shipped, "extra": shipped - expected}


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
    assert not any(r.startswith(("nbgrader", "nbval", "course_grader")) for r in requires), requires
    assert any(r.startswith("torch") for r in requires)


@pytest.mark.slow
def test_course_check_runs_with_nbgrader_unimportable(tmp_path):
    """`course check` (nbclient) works when nbgrader, nbval and the grader cannot be imported."""
    notebook = ROOT / "solutions" / "00_welcome" / "00_welcome.ipynb"
    code = ("import sys; sys.modules['nbgrader'] = None; sys.modules['nbval'] = None; sys.modules['course_grader'] = None\n"
            "from course_utils.cli import build_parser\n"
            f"args = build_parser(plugins=[]).parse_args(['check', {str(notebook)!r}])\n"
            "code = args.handler(args)\n"
            "assert not any(m == 'nbgrader' or m.startswith('nbgrader.') for m in sys.modules if sys.modules[m])\n"
            "raise SystemExit(code)\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout


def test_the_grader_is_its_own_package_everywhere():
    """nbgrader is the grader's dependency, not the student package's; every install route installs both."""
    student = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    grader = tomllib.loads((ROOT / "grader" / "pyproject.toml").read_text())["project"]
    assert not any(d.startswith(("nbgrader", "nbval")) for d in student["dependencies"])
    assert not any(d.startswith(("nbgrader", "nbval")) for extra in student["optional-dependencies"].values() for d in extra)
    assert any(d.startswith("nbgrader==") for d in grader["dependencies"]) and "course_utils" in grader["dependencies"]
    assert grader["entry-points"]["course_utils.commands"] == {"grader": "course_grader.cli"}
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^GRADER\s*\?=\s*\./grader", makefile, re.M) and '-e "$(GRADER)"' in makefile
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = [line for entry in env["dependencies"] if isinstance(entry, dict) for line in entry.get("pip", [])]
    assert any(line.startswith("-e ./grader") for line in pip), pip


def test_a_student_course_command_lists_only_the_student_verbs(capsys):
    """Without the grader, `course --help` shows check and setup-kernel only, and an instructor's verb says
    what to install instead of failing with a traceback."""
    from course_utils import cli

    student = cli.build_parser(plugins=[])
    usage = student.format_help()
    assert "{check,setup-kernel}" in usage and "autograde" not in usage and "held submissions" not in usage
    assert cli.main.__module__ == "course_utils.cli"
    args = student.parse_args(["grade"])
    assert args.handler(args) == 2
    assert "pip install -e ./grader" in capsys.readouterr().err
    full = cli.build_parser().format_help()
    assert "autograde" in full and "check" in full


def test_a_student_command_without_the_grader_says_what_to_install_in_a_fresh_process():
    code = ("import sys; from unittest import mock\n"
            "import course_utils.cli as cli\n"
            "with mock.patch.object(cli, 'grader_commands', return_value=[]):\n"
            "    raise SystemExit(cli.main(['grade', '03_self_attention', '--workers', '2']))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "pip install -e ./grader" in result.stderr, result.stderr
