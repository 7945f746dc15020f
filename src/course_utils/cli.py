"""The ``course`` command. This package gives the student's verbs; the grader (``course_grader``,
installed beside it) adds the instructor's through the ``course_utils.commands`` entry point.

    course check NOTEBOOK ...   run your notebook's visible tests
    course setup-kernel         register the Jupyter kernel the notebooks use

Without the grader, an instructor's verb (``course grade``, ...) says what to install. This
module never imports the grader: the entry point names it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType

from course_utils.layout import KERNEL_DISPLAY_NAME, KERNEL_NAME

__all__ = ["main", "build_parser", "grader_commands", "STUDENT_VERBS", "INSTRUCTOR_VERBS"]

# Start-up: heavy packages (nbformat, nbclient, nbgrader, torch, datasets) are imported inside
# the commands that use them (tests/course/test_startup.py). And nbformat imports jsonschema, which
# builds an RFC 3987 grammar (2-5 s) when the optional rfc3987_syntax is installed, only to
# check the "iri" string format: no schema this process validates (notebooks) uses it. A None
# entry in sys.modules makes that optional import fail fast; jsonschema then goes without it.
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]

STUDENT_VERBS = ("check", "setup-kernel")
# the grader's verbs, so that a student install can say what they need
INSTRUCTOR_VERBS = ("demo", "release", "execute", "grade", "feedback", "export", "mistakes", "quoted", "flags",
                    "review", "dist", "doctor")
ENTRY_POINT_GROUP = "course_utils.commands"
GRADER_EXTRA = "the grader: pip install -e ./grader (make setup installs it)"
STUDENT_HELP = """\
Attention & Transformers: the course command.

for students:
    course check NOTEBOOK ...   run your notebook's visible tests, as the grader runs it
    course setup-kernel         register the Jupyter kernel the notebooks use
"""


def grader_commands() -> list[ModuleType]:
    """The modules that add instructor verbs (``register(commands)``), from the entry point group."""
    return [entry.load() for entry in entry_points(group=ENTRY_POINT_GROUP)]


def cmd_setup_kernel(args: argparse.Namespace) -> int:
    subprocess.run(
        [sys.executable, "-m", "ipykernel", "install", "--sys-prefix", "--name", KERNEL_NAME, "--display-name", KERNEL_DISPLAY_NAME],
        check=True,
    )
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from course_utils.selfcheck import check_notebook, format_report

    all_passed = True
    if args.rules:   # read the exercises' rules; run nothing
        from course_utils.selfcheck import exercise_rules, format_rules

        for notebook in args.notebooks:
            if not Path(notebook).is_file():
                print(f"course check: no notebook at {notebook}")
                all_passed = False
                continue
            print(format_rules(Path(notebook), exercise_rules(Path(notebook))))
        return 0 if all_passed else 1
    for notebook in args.notebooks:
        try:
            results = check_notebook(Path(notebook), timeout=args.timeout)
        except FileNotFoundError as error:
            print(f"course check: {error}")
            all_passed = False
            continue
        print(format_report(Path(notebook), results))
        all_passed &= all(r.status in ("PASS", "MANUAL") for r in results)  # FAIL, TODO or ERROR fail the check
    return 0 if all_passed else 1


def _needs_grader(args: argparse.Namespace) -> int:
    print(f"course {args.command}: an instructor's command; this install has only the student's "
          f"({', '.join(STUDENT_VERBS)}). Install {GRADER_EXTRA}", file=sys.stderr)
    return 2


def build_parser(plugins: list[ModuleType] | None = None) -> argparse.ArgumentParser:
    """The ``course`` parser: the student's verbs, and each plugin's (the grader's) where installed;
    without one, the instructor's verbs are unlisted and say what to install."""
    plugins = grader_commands() if plugins is None else plugins
    description = "\n".join([STUDENT_HELP, *(plugin.HELP for plugin in plugins)] if plugins else
                            [STUDENT_HELP, f"The instructor's commands (grade, feedback, review, ...) need {GRADER_EXTRA}."])
    parser = argparse.ArgumentParser(prog="course", description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True,
                                     metavar=None if plugins else "{" + ",".join(STUDENT_VERBS) + "}")
    setup = commands.add_parser("setup-kernel", help=f"register the Jupyter kernel {KERNEL_NAME!r} for this environment")
    setup.set_defaults(handler=cmd_setup_kernel)
    check = commands.add_parser("check", help="run your notebook top to bottom and report each exercise's visible tests")
    check.add_argument("notebooks", nargs="+", help="notebook(s) to check")
    check.add_argument("--timeout", type=int, help="seconds allowed per cell (default: the grader's, 120 s)")
    check.add_argument("--rules", action="store_true",
                       help="run nothing: list the rules (device, dtype, in-place, ...) each exercise's tests check")
    check.set_defaults(handler=cmd_check)
    for plugin in plugins:
        plugin.register(commands)
    if not plugins:
        for verb in INSTRUCTOR_VERBS:  # unlisted (no help line): each says what to install
            commands.add_parser(verb, add_help=False).set_defaults(handler=_needs_grader)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if args.handler is not _needs_grader:
        args = parser.parse_args(argv)  # unknown arguments are an error everywhere but a missing grader's verb
    return int(args.handler(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
