"""The instructor's verbs of the ``course`` command (the student's are in :mod:`course_utils.cli`,
which finds these through the ``course_utils.commands`` entry point and calls :func:`register`).
Each command parses, opens the course once (:class:`~course_grader.course.Course`), calls the
package and prints: no grading policy lives here.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from course_grader.course import WALL_LIMIT, Course
from course_utils.layout import UnknownAssignment, find_root, select_assignments

__all__ = ["HELP", "main", "register"]

HELP = """\
for instructors:
    course demo                 the main job: release, execute (ci profile), grade a demo class
    course release [A ...]      regenerate notebooks/ from solutions/
    course release A --variants [--students S ...] [--reroll S ...]
                                also each student's own variant (variants/<student>/A/)
    course execute [A ...]      run the solution notebooks, save executed copies
    course grade [A ...]        autograde collected submissions (submitted/<student>/<A>/)
    course feedback [A ...]     HTML feedback for graded submissions
    course export               grades CSV, one column per exercise
    course export --format F    grades into the LMS: canvas, moodle (import CSVs), lti-ags [--post]
    course flags [A ...]        submissions whose code tries to get around the tests (never zeroed)
    course review [A [S]]       held submissions (flags, similar code) and the instructor's decision
    course dist                 build the student distribution: release notebooks and a wheel
    course doctor               what grading needs and what this machine has (ok, or the fix)

for authors:
    course mistakes [A ...]     show that the tests reject every curated mistake
    course quoted [A ...]       the numbers the prose quotes, against the cpu run
"""

# Start-up: heavy packages (nbformat, nbclient, nbgrader, torch, datasets) are imported inside
# the commands that use them (tests/course/test_startup.py).


def _names(root: Path, requested: list[str]) -> list[str]:
    """The assignments asked for (all when none), or exit with the known ones."""
    try:
        return select_assignments(root, requested)
    except UnknownAssignment as error:
        raise SystemExit(f"course: {error}") from None


def _profile(requested: str | None) -> str:
    from course_utils.profiles import get_profile

    return requested or get_profile()


def cmd_release(args: argparse.Namespace) -> int:
    from course_grader.authoring.release import generate_release
    from course_utils.cells import HiddenMarkerError

    course = Course.open()
    names = _names(course.root, args.assignments)
    try:
        generate_release(course, names)
    except HiddenMarkerError as error:
        raise SystemExit(f"course release: {error}") from None
    if args.variants or args.reroll:
        from course_grader.authoring.release import release_variants
        from course_utils.variants import SPECS

        students = list(args.students or _gradebook_students(course)) + [s for s in args.reroll if s not in (args.students or [])]
        if not students:
            raise SystemExit("course release --variants: no students (name them with --students, or add them to the gradebook)")
        for name in names:
            if name not in SPECS:
                print(f"[variant] {name}: no variant parameters; every student gets notebooks/{name}", flush=True)
                continue
            release_variants(course, name, students, reroll=args.reroll, by=args.by)
    return 0


def _gradebook_students(course: Course) -> list[str]:
    from nbgrader.api import Gradebook

    from course_grader.grading.gradebook import fast_gradebook_creation

    fast_gradebook_creation()
    with Gradebook(course.db_url) as gradebook:
        return sorted(s.id for s in gradebook.students)


def cmd_execute(args: argparse.Namespace) -> int:
    from course_grader.authoring.execute import execute_solutions

    course = Course.open()
    profile = _profile(args.profile)
    results = execute_solutions(course.root, _names(course.root, args.assignments), profile=profile,
                                out_dir=course.build_dir("executed") / profile, timeout=args.timeout)
    return 0 if all(r.ok for r in results) else 1


def cmd_demo(args: argparse.Namespace) -> int:
    from course_grader.demo import grade_demo_class
    from course_grader.authoring.execute import execute_solutions
    from course_grader.grading.tables import export_grades, scores_table
    from course_grader.grading.parallel import default_workers
    from course_grader.authoring.release import generate_release

    course = Course.open()
    root = course.root
    names = _names(root, args.assignments)
    profile = args.profile or os.environ.get("COURSE_PROFILE") or "ci"  # the main job is fast unless asked
    started = time.perf_counter()
    print(f"== 1/3 regenerate notebooks/ from solutions/ ({len(names)} assignments)", flush=True)
    generate_release(course, names)
    executed_ok = True
    if not args.no_execute:
        out_dir = course.build_dir("executed") / profile
        print(f"== 2/3 execute the solution notebooks in the {profile!r} profile -> {out_dir.relative_to(root)}/", flush=True)
        executed_ok = all(r.ok for r in execute_solutions(root, names, profile=profile, out_dir=out_dir, timeout=args.timeout))
    course_dir = (root / args.class_dir).resolve()
    print(f"== 3/3 autograde a demo class with nbgrader (profile 'ci') in {course_dir}/", flush=True)
    from course_grader.doctor import sandbox_unavailable

    unsandboxed = sandbox_unavailable()
    if unsandboxed:  # the demo class is the course's own code; students' work never goes unsandboxed unasked
        print(f"== no grading sandbox: {unsandboxed}. The demo class (the course's own code) is graded UNSANDBOXED; "
              "`course grade` refuses students' submissions until there is one (`course doctor` says what to run).",
              flush=True)
    report = grade_demo_class(root, course_dir, names, with_mistakes=not args.no_mistakes, isolated=args.all_mistakes,
                              workers=args.workers or default_workers(), sandbox=not unsandboxed)
    print()
    print(scores_table(report.rows, report.failed))
    print()
    for verdict in report.verdicts:
        mark = "ok  " if verdict.ok else "FAIL"
        print(f"  {mark} {verdict.assignment:<20} {verdict.student:<44} {verdict.expectation} ({verdict.detail})")
    failed_verdicts = sum(not v.ok for v in report.verdicts)
    if failed_verdicts:
        print(f"\n{failed_verdicts} of {len(report.verdicts)} expectations FAILED")
    grades = export_grades(report.rows, course_dir / "grades.csv")
    print(f"\ngrades: {grades}   feedback: {course_dir / 'feedback'}/")
    print(f"main job finished in {time.perf_counter() - started:.0f} s")
    return 0 if (executed_ok and report.ok) else 1


NO_SANDBOX_WARNING = """\
!!! ------------------------------------------------------------------------------------
!!! --no-sandbox: student code runs UNSANDBOXED, with your rights. It can read solutions/,
!!! the gradebook (every hidden test) and other submissions, change grades, and leave
!!! processes behind. Use it only for submissions you trust.
!!! ------------------------------------------------------------------------------------"""


def _sandbox_gate(no_sandbox: bool) -> str | None:
    """Why grading must not start (None: go ahead). ``--no-sandbox`` turns the sandbox off (the
    course's settings; COURSE_SANDBOX=off in the nbgrader processes only) after a loud warning."""
    if no_sandbox:
        print(NO_SANDBOX_WARNING, file=sys.stderr, flush=True)
        return None
    if os.environ.get("COURSE_SANDBOX", "").lower() == "off":
        return "COURSE_SANDBOX=off is set: pass --no-sandbox to grade without the sandbox on purpose."
    try:
        from course_grader.sandbox.bubblewrap import sandbox_problem
    except ImportError as error:
        return f"the grading sandbox is not available ({error})."
    return sandbox_problem()


def _not_released(course: Course, names: list[str]) -> list[str]:
    """The messages for the assignments that are not in the gradebook."""
    from course_grader.grading.gradebook import AssignmentNotReleased, require_assignment

    messages = []
    for name in names:
        try:
            require_assignment(course.db_url, name)
        except AssignmentNotReleased as error:
            messages.append(str(error))
    return messages


def cmd_grade(args: argparse.Namespace) -> int:
    from course_grader.grading.gradebook import safe_url
    from course_grader.grading.pipeline import grade
    from course_grader.grading.parallel import default_workers
    from course_grader.grading.tables import scores_table

    started = time.perf_counter()
    problem = _sandbox_gate(args.no_sandbox)
    if problem:
        print(f"course grade: refusing to grade without a sandbox: {problem}\n"
              "Install what is missing (`course doctor` says what to run), or pass --no-sandbox to grade "
              "unsandboxed (only trusted code).",
              file=sys.stderr)
        return 2
    course = Course.open(profile=args.profile, sandbox=not args.no_sandbox, wall_limit=args.wall_limit or None)
    names = _names(course.root, args.assignments)
    not_released = _not_released(course, names)
    if not_released:
        for message in not_released:
            print(f"course grade: {message}", file=sys.stderr)
        return 1
    print(f"grading in the {course.profile!r} profile (cell limit {course.cell_timeout or 'none'} s; "
          f"gradebook {safe_url(course.db_url)})", flush=True)
    report = grade(course, names, args.student, workers=args.workers or default_workers(), scheduler=args.scheduler)
    print(scores_table(report.rows, report.failed, report.flags))  # a failed submission's line carries its reason and error
    if report.flags:
        print(f"\n{len(report.flags)} submission(s) flagged for review (scores unchanged):")
        for (name, student), found in sorted(report.flags.items()):
            print(f"  FLAGGED {student} / {name}:")
            print("\n".join(f"    {flag}" for flag in found))
    print(f"graded in {time.perf_counter() - started:.0f} s")
    return 0


def cmd_feedback(args: argparse.Namespace) -> int:
    from course_grader.grading.feedback import generate_feedback
    from course_grader.grading.review import held, review_submissions

    course = Course.open()
    root = course.root
    names = _names(root, args.assignments)
    not_released = _not_released(course, names)
    if not_released:
        for message in not_released:
            print(f"course feedback: {message}", file=sys.stderr)
        return 1
    on_hold = held(review_submissions(course, names))
    for name in names:
        skip = sorted(s for a, s in on_hold if a == name and (not args.student or s in args.student))
        for student in skip:
            print(f"{name}: no feedback for {student}: held for review (`course review {name}`)")
        folder = generate_feedback(course, name, args.student or None, skip=skip)
    print(f"feedback written under {folder}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from course_grader.grading.scores import read_scores, submission_flags
    from course_grader.grading.tables import export_grades
    from course_grader.grading.review import held, review_submissions

    if args.format != "csv" or args.post:
        return cmd_export_lms(args)
    course = Course.open()
    rows = read_scores(course)
    flags = submission_flags(course, sorted({(r.assignment, r.student) for r in rows}))
    on_hold = held(review_submissions(course, sorted({r.assignment for r in rows}), flags=flags))
    path = export_grades(rows, Path(args.out or "grades.csv"), flags, held=on_hold)
    waiting = sum((r.assignment, r.student) in on_hold for r in rows)
    print(f"grades written to {path}" + (f" ({waiting} held, without a score: `course review`)" if waiting else ""))
    return 0


LMS_OUT = {"canvas": "grades-canvas.csv", "moodle": "grades-moodle.csv", "lti-ags": "scores-ags.json"}


def cmd_export_lms(args: argparse.Namespace) -> int:
    from course_grader.grading.lms import export_lms

    fmt = "lti-ags" if args.post and args.format == "csv" else args.format
    try:
        done = export_lms(Course.open(), fmt, Path(args.out or LMS_OUT[fmt]), roster=args.roster and Path(args.roster),
                          config=args.lms_config and Path(args.lms_config), feedback=args.feedback, post=args.post)
    except (ValueError, RuntimeError, OSError) as error:
        print(f"course export: {error}", file=sys.stderr)
        return 2
    print(f"{fmt} grades written to {done.path}: {done.final} final, {done.pending} pending "
          "(held for review or a written answer to grade: blank, never 0)")
    if done.problems_path:
        print(f"{len(done.problems)} student(s) not matched to the roster (not exported): {done.problems_path}", file=sys.stderr)
    if done.posted is not None:
        print(f"posted {done.posted.posted} score(s) to the platform")
        for line in done.posted.failed:
            print(f"  NOT POSTED {line}", file=sys.stderr)
    return 0 if done.ok else 1


def cmd_review(args: argparse.Namespace) -> int:
    from course_grader.grading.review import decide, format_review, review_submissions

    course = Course.open()
    root = course.root
    action = "accept" if args.accept else "zero" if args.zero else "score" if args.score is not None else None
    if action:
        if not (args.assignment and args.student):
            print("course review: a decision needs ASSIGNMENT and STUDENT", file=sys.stderr)
            return 2
        if not (args.reason or "").strip():  # accepting flagged work is a decision like the others
            print(f"course review: --{action} needs --reason \"...\" (it is recorded with the decision)", file=sys.stderr)
            return 2
        _names(root, [args.assignment])
        try:
            decision = decide(course, args.assignment, args.student, action, score=args.score,
                              reason=args.reason or "", by=args.by)
        except (LookupError, ValueError) as error:
            print(f"course review: {error}", file=sys.stderr)
            return 1
        print(f"{args.assignment} / {args.student}: {decision}\n"
              "recorded in the gradebook (manual scores and comment): `course export` shows it final, "
              "`course feedback` writes its feedback")
        return 0
    names = _names(root, [args.assignment] if args.assignment else [])
    if args.student and args.student in course.assignments():
        print(f"course review: {args.student!r} is an assignment, not a student: name one assignment, then one "
              f"student (`course review {args.assignment} STUDENT`), or list several assignments with `course flags`",
              file=sys.stderr)
        return 2
    out_dir = course.build_dir("flags")
    comparisons: dict = {}
    reviews = review_submissions(course, names, csv_dir=out_dir, comparisons=comparisons)
    if args.student:
        reviews = {key: review for key, review in reviews.items() if key[1] == args.student}
    print(format_review(reviews, names, comparisons))
    print(f"similar pairs written to {out_dir}/<assignment>-similarity.csv")
    views = sorted(p for name in names for p in (course.build_dir("manual") / name).glob("*.html")
                   if not args.student or p.stem == args.student)
    if views:
        print("written answers beside each student's own run (for manual grading):")
        print("\n".join(f"  {p.relative_to(root)}" for p in views))
    return 0


def cmd_flags(args: argparse.Namespace) -> int:
    from course_grader.grading.scan import format_flags, scan_submissions, write_flags_csv

    course = Course.open()
    out_dir = course.build_dir("flags")
    for name in _names(course.root, args.assignments):
        flags = scan_submissions(course, name, args.student or None)
        print(format_flags(name, flags))
        write_flags_csv(flags, out_dir / f"{name}.csv")
    print(f"flags written to {out_dir}/")
    return 0


def cmd_dist(args: argparse.Namespace) -> int:
    from course_grader.authoring.distribution import build_student_distribution

    root = find_root()
    out = build_student_distribution(root, Path(args.out) if Path(args.out).is_absolute() else root / args.out)
    print(f"student distribution written to {out}/")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from course_grader.doctor import FAIL, format_report, run_checks

    checks = run_checks()
    print(format_report(checks))
    return 1 if any(c.status == FAIL for c in checks) else 0


def cmd_quoted(args: argparse.Namespace) -> int:
    from course_grader.authoring.quoted import check_quoted

    root = find_root()
    executed = Path(args.executed) if Path(args.executed).is_absolute() else root / args.executed
    ok = True
    for name in _names(root, args.assignments):
        check = check_quoted(root, name, executed, record=args.record, recorded=args.recorded)
        if check.where is None:
            print(f"{name}: {check.marked} quoted number(s); no cpu run to compare with (make demo PROFILE=cpu)")
        else:
            print(f"{name}: {check.marked - len(check.missing)} of {check.marked} quoted number(s) printed by "
                  f"{check.where.relative_to(root) if check.where.is_relative_to(root) else check.where}")
        for quote in check.missing:
            why = "NOT PRINTED" if quote.label else "NO LINE NAMED (<!--q LABEL-->)"
            print(f"  {why} {quote.describe()}")
        for quote in check.unmarked:
            print(f"  UNMARKED {quote.describe()}: printed by the run; mark it <!--q LABEL--> (or <!--nq--> if not a quote)")
        ok &= check.ok
    return 0 if ok else 1


TIMEOUT_HELP = "seconds allowed per cell (default: ci 600, cpu and gpu no limit; 0 = no limit)"


def register(commands: argparse._SubParsersAction) -> None:
    """Add the instructor's verbs to the ``course`` parser's ``commands`` (:func:`course_utils.cli.build_parser`)."""

    def add(name: str, handler, help_text: str, with_assignments: bool = True) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, description=help_text, help=help_text)
        if with_assignments:
            sub.add_argument("assignments", nargs="*", help="assignment names (default: all)")
        sub.set_defaults(handler=handler)
        return sub

    add("doctor", cmd_doctor, "what grading needs (python, torch, kernel, sandbox, nbgrader, extras, GPU, gradebook) "
        "and what this machine has: ok, or the command that fixes it; exits 1 if grading lacks something", False)
    release = add("release", cmd_release, "regenerate notebooks/ (the student release) from solutions/")
    release.add_argument("--variants", action="store_true",
                         help="also a variant per student: variants/<student>/<assignment>/, its seed stored in the gradebook")
    release.add_argument("--students", nargs="+", metavar="STUDENT", help="with --variants: these students (default: the gradebook's)")
    release.add_argument("--reroll", nargs="+", default=[], metavar="STUDENT",
                         help="give these students a new variant (a new seed, recorded with who and when)")
    release.add_argument("--by", help="who made or re-rolled the variants (default: the login name)")
    execute = add("execute", cmd_execute, "execute the solution notebooks, saving executed copies in build/executed/<profile>/")
    execute.add_argument("--profile", choices=("ci", "cpu", "gpu"), help="default: COURSE_PROFILE, else by device")
    execute.add_argument("--timeout", type=int, help=TIMEOUT_HELP)
    demo = add("demo", cmd_demo, "the main job: release, execute the solutions, autograde a demo class and print the scores")
    demo.add_argument("--profile", choices=("ci", "cpu", "gpu"),
                      help="profile for executing the solutions (default: COURSE_PROFILE, else ci; cpu/gpu: full-size results)")
    demo.add_argument("--timeout", type=int, help=TIMEOUT_HELP)
    demo.add_argument("--no-execute", action="store_true", help="skip executing the solution notebooks")
    demo.add_argument("--no-mistakes", action="store_true", help="demo class without the curated-mistake students")
    demo.add_argument("--all-mistakes", action="store_true", help="one student per curated mistake (as the tests do)")
    demo.add_argument("--workers", type=int, help="assignments of the demo class graded at once (default: one per core)")
    demo.add_argument("--class-dir", default="build/demo-class", help="scratch course for the demo class (default build/demo-class)")
    grade = add("grade", cmd_grade, "autograde collected submissions in submitted/<student>/<assignment>/")
    grade.add_argument("--profile", choices=("ci", "cpu", "gpu"),
                       help="the profile submissions run in (default ci, whatever COURSE_PROFILE says)")
    grade.add_argument("--student", action="append", help="grade only this student (repeatable)")
    grade.add_argument("--workers", type=int, help="students graded at once (default: one per core; 1 = serial nbgrader)")
    grade.add_argument("--scheduler", metavar="ADDRESS", default=os.environ.get("COURSE_DASK_SCHEDULER") or None,
                       help="grade on the Dask cluster at ADDRESS (tcp://host:8786), one task per student and notebook; "
                            "the gradebook is written here (default: $COURSE_DASK_SCHEDULER; see deploy/dask/)")
    grade.add_argument("--wall-limit", type=float, default=WALL_LIMIT, metavar="SECONDS",
                       help=f"with --scheduler: seconds one notebook may take before its kernel is stopped "
                            f"(default {WALL_LIMIT:g}; 0: none)")
    grade.add_argument("--no-sandbox", action="store_true",
                       help="grade WITHOUT the sandbox (student code runs with your rights; trusted code only)")
    feedback = add("feedback", cmd_feedback, "write HTML feedback for graded submissions to feedback/")
    feedback.add_argument("--student", action="append", help="only this student (repeatable)")
    export = add("export", cmd_export, "write grades as CSV: totals and one column per exercise", False)
    export.add_argument("--out", help="output path (default grades.csv; canvas grades-canvas.csv, moodle "
                        "grades-moodle.csv, lti-ags scores-ags.json)")
    export.add_argument("--format", choices=("csv", "canvas", "moodle", "lti-ags"), default="csv",
                        help="csv: the course's own; canvas, moodle: the LMS's gradebook import CSV; lti-ags: LTI 1.3 "
                             "score objects (held or ungraded: blank / PendingManual, never 0)")
    export.add_argument("--roster", metavar="ROSTER.csv", help="LMS roster (Canvas's gradebook export): students matched by "
                        "SIS User ID, SIS Login ID, then name; the unmatched listed in <out>-unmatched.csv (exit 1)")
    export.add_argument("--lms-config", metavar="LMS.json", help="assignments' LMS names, Canvas ids, AGS line items; "
                        "the platform's LTI registration for --post")
    export.add_argument("--feedback", action="store_true", help="moodle: a feedback column per assignment")
    export.add_argument("--post", action="store_true", help="send the lti-ags scores to each line item (needs pylti1p3: "
                        "the grader's lms extra)")
    add("mistakes", cmd_mistakes, "(authors) prove the test cells reject every curated mistake in tests/mistakes/ (one kernel per notebook)")
    quoted = add("quoted", cmd_quoted, "(authors) check that every number the prose marks as quoted (<!--q-->) "
                 "is printed by the cpu run (build/executed/cpu/, else benchmarks/results/outputs-cpu/)")
    quoted.add_argument("--executed", default="build/executed/cpu", help="executed notebooks (default build/executed/cpu)")
    quoted.add_argument("--record", action="store_true", help="keep the executed run's output text in benchmarks/results/outputs-cpu/")
    quoted.add_argument("--recorded", action="store_true", help="compare with the recorded outputs even where an executed run exists")
    flags = add("flags", cmd_flags, "scan submissions for code that gets around the tests; writes build/flags/<A>.csv")
    flags.add_argument("--student", action="append", help="only this student (repeatable)")
    review = add("review", cmd_review, "held submissions (flagged, or similar to the reference or to another "
                 "student) with their evidence; or record the decision on one", False)
    review.add_argument("assignment", nargs="?", help="assignment (default: all)")
    review.add_argument("student", nargs="?", help="student (with a decision: the one decided on)")
    decision = review.add_mutually_exclusive_group()
    decision.add_argument("--accept", action="store_true", help="the autograded score stands")
    decision.add_argument("--zero", action="store_true", help="every graded cell 0")
    decision.add_argument("--score", type=float, metavar="N", help="total N (each cell the same fraction of its points)")
    review.add_argument("--reason", help="why (required with every decision); kept in the gradebook's comment")
    review.add_argument("--by", help="who decides (default: the login name)")
    dist = add("dist", cmd_dist, "build the student distribution (release notebooks, wheel, README); no solutions or hidden tests", False)
    dist.add_argument("--out", default="build/student-dist", help="output folder (default build/student-dist)")


def cmd_mistakes(args: argparse.Namespace) -> int:
    from course_grader.authoring.mistakes import Accepted, load_accepted, load_mistakes
    from course_grader.authoring.rejection import check_rejections

    root = find_root()
    bad = 0
    for name in _names(root, args.assignments):
        started = time.perf_counter()
        mistakes = load_mistakes(root, name)
        accepted = load_accepted(root, name)
        results = check_rejections(root, name, [*mistakes, *accepted])
        for result in results:
            if result.mistake is None:
                label = "solution passes every test"
            elif isinstance(result.mistake, Accepted):
                label = f"accepts {result.mistake.name!r}"
            else:
                label = (f"rejects {result.mistake.name!r} [{result.mistake.kind or 'no kind'}]"
                         + (" (by the visible tests)" if result.visible else ""))
            print(f"  {'ok  ' if result.ok else 'FAIL'} {name}: {label}" + ("" if result.ok else f" -- {result.describe()}"))
        bad += sum(not r.ok for r in results) + (len(results) < 1 + len(mistakes) + len(accepted))
        print(f"{name}: {len(mistakes)} mistakes and {len(accepted)} right answers checked "
              f"in {time.perf_counter() - started:.1f} s; {_visible_summary(results)}", flush=True)
    return 1 if bad else 0


def _visible_summary(results: list) -> str:
    """How many curated mistakes the visible tests already reject (a student sees them in the notebook and in
    `course check`), overall and per kind: the rest fail only at grading, on the hidden tests."""
    from course_grader.authoring.mistakes import Mistake

    rejected = [r for r in results if isinstance(r.mistake, Mistake) and r.ok]
    kinds: dict[str, list[int]] = {}
    for result in rejected:
        seen = kinds.setdefault(result.mistake.kind or "no kind", [0, 0])
        seen[0] += bool(result.visible)
        seen[1] += 1
    per_kind = ", ".join(f"{kind} {shown}/{total}" for kind, (shown, total) in sorted(kinds.items()))
    return (f"{sum(bool(r.visible) for r in rejected)} of {len(rejected)} rejected mistakes fail the visible "
            f"tests already ({per_kind})")


def main(argv: list[str] | None = None) -> int:
    """``course ARGV`` (the one command, :func:`course_utils.cli.main`)."""
    from course_utils.cli import main as course

    return course(argv)


if __name__ == "__main__":
    raise SystemExit(main())
