"""A variant per student (issue 37, part 2): ``course_utils.variants`` (the draws) and
``course_grader.grading.variants`` (seeds in the gradebook, the checker's environment).

Proofs at the function level, no kernel: the solution notebook's code cells run once in this
process, then each variant exercise's test cell runs as the checker would run it (the seed in
``COURSE_VARIANT_SEED``) or as the kernel would (the release's visible parameters, no seed).
One end-to-end test releases, submits and grades a small class through nbgrader and the checker.
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest
import torch

from course_grader.course import Course
from course_utils import variants
from course_utils.variants import ENV_SEED, SPECS, draw, parameters, student_seed

ROOT = Path(__file__).resolve().parents[2]
A = "03_self_attention"
# each variant exercise's test cell, by notebook
TESTS = {
    A: {"scaled_scores": "test_scaled_scores", "attention": "test_attention",
        "self_attention_module": "test_self_attention_module"},
    "05_masking": {"padding_mask": "test_padding_mask", "combined_mask": "test_combined_mask",
                   "safe_masked_softmax": "test_safe_masked_softmax"},
    "10_gpt": {"top_k_filter": "test_top_k_filter", "top_p_filter": "test_top_p_filter"},
}
EXERCISES = [(assignment, exercise) for assignment, tests in TESTS.items() for exercise in tests]
SECRET = b"a course secret for the tests"
HIDDEN = ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")


def seed_of(i: int, assignment: str = A) -> str:
    return student_seed(SECRET, f"student{i:03d}", assignment)


# ----------------------------------------------------------------------------- the draws


def test_seed_is_an_hmac_of_student_assignment_and_reroll():
    import hashlib
    import hmac

    assert student_seed(b"k", "ada", A) == hmac.new(b"k", json.dumps(["ada", A, 0]).encode(), hashlib.sha256).hexdigest()
    seeds = {student_seed(b"k", "ada", A), student_seed(b"k", "ada", A, 1), student_seed(b"k", "bob", A),
             student_seed(b"k", "ada", "05_masking"), student_seed(b"other", "ada", A)}
    assert len(seeds) == 5
    # "a|b" + "c" and "a" + "b|c" cannot meet: the message is a JSON list
    assert student_seed(b"k", "a|b", "c") != student_seed(b"k", "a", "b|c")


def test_no_variant_gives_the_course_as_it_was_written(monkeypatch):
    monkeypatch.delenv(ENV_SEED, raising=False)
    monkeypatch.setattr(variants, "_RELEASED", {})
    assert vars(draw(A, "scaled_scores", "visible")) == {"seed": 1, "T_q": 4, "T_k": 6, "d": 8}
    assert vars(draw(A, "scaled_scores", "hidden")) == {"seed": 2, "B": 2, "heads": 3, "T_q": 5, "T_k": 7, "d": 16}
    assert vars(draw(A, "self_attention_module", "hidden")) == {"d_model": 8, "d_head": 8, "d_small": 4, "B": 3, "T": 7}
    monkeypatch.setenv(ENV_SEED, "")  # the checker of a student without a variant
    assert vars(draw(A, "attention", "hidden")) == {"B": 2, "heads": 4, "T_q": 6, "T_k": 6, "d": 16, "d_v": 16}


def test_the_checker_draws_from_its_seed_the_kernel_from_its_release(monkeypatch):
    seed = seed_of(1)
    monkeypatch.setattr(variants, "_RELEASED", {})
    monkeypatch.delenv(ENV_SEED, raising=False)
    variants.use(A, variants.visible_parameters(seed, A))
    kernel_visible = vars(draw(A, "scaled_scores", "visible"))
    kernel_hidden = vars(draw(A, "scaled_scores", "hidden"))
    monkeypatch.setenv(ENV_SEED, seed)
    assert kernel_visible == vars(draw(A, "scaled_scores", "visible")) == parameters(seed, A, "scaled_scores", "visible")
    assert vars(draw(A, "scaled_scores", "hidden")) == parameters(seed, A, "scaled_scores", "hidden")
    assert kernel_hidden == parameters(None, A, "scaled_scores", "hidden")  # the kernel never has the hidden draw
    with pytest.raises(ValueError):
        parameters(seed, A, "scaled_scores", "secret")


# Pinned: the draws of one seed, whatever the process or Python version (hashlib and hmac only).
PINNED_SEED = student_seed(b"pinned", "ada", A)
PINNED = {
    "scaled_scores/visible": {"seed": 680884485, "T_q": 9, "T_k": 4, "d": 4},
    "scaled_scores/hidden": {"seed": 479421913, "B": 2, "heads": 2, "T_q": 9, "T_k": 8, "d": 9},
}


def _draws(seed: str) -> dict[str, Any]:
    return {f"{exercise}/{domain}": parameters(seed, assignment, exercise, domain)
            for assignment, exercises in SPECS.items() for exercise, domains in exercises.items() for domain in domains}


def test_parameters_identical_across_processes_and_pinned():
    seeds = [seed_of(i) for i in range(20)] + [PINNED_SEED]
    code = ("import json, sys\nfrom test_variants import _draws\n"
            "print(json.dumps([_draws(s) for s in json.loads(sys.argv[1])]))")
    env = dict(os.environ, PYTHONHASHSEED="12345", PYTHONPATH=str(Path(__file__).parent))
    other = subprocess.run([sys.executable, "-c", code, json.dumps(seeds)], capture_output=True, text=True, env=env,
                           check=True, cwd=ROOT)
    assert json.loads(other.stdout) == json.loads(json.dumps([_draws(s) for s in seeds]))
    assert {k: _draws(PINNED_SEED)[k] for k in PINNED} == PINNED


def test_visible_and_hidden_draws_are_separate_hmacs():
    """The same seed's visible and hidden parameters come from different keys: equal choices do
    not give equal draws (the torch seeds of the two domains never coincide over 100 students)."""
    for i in range(100):
        seed = seed_of(i)
        assert parameters(seed, A, "scaled_scores", "visible")["seed"] != parameters(seed, A, "scaled_scores", "hidden")["seed"]


def test_every_variant_exercise_is_proven_here():
    assert {(a, e) for a, exercises in SPECS.items() for e in exercises} == set(EXERCISES)


@pytest.mark.parametrize(("assignment", "exercise"), EXERCISES)
def test_at_least_20_distinct_variants_per_exercise_over_100_students(assignment, exercise):
    for domain, spec in SPECS[assignment][exercise].items():
        if not spec:
            continue
        drawn = [parameters(seed_of(i, assignment), assignment, exercise, domain) for i in range(100)]
        shapes = {tuple((k, v) for k, v in p.items() if k != "seed") for p in drawn}
        whole = {tuple(p.items()) for p in drawn}
        assert len(whole) >= 20 and (len(shapes) >= 20 or set(spec) == {"seed"}), (exercise, domain, len(shapes))


# ----------------------------------------------------------------------------- the model answer, per seed


_NOTEBOOKS: dict[str, dict[str, Any]] = {}


@pytest.fixture(scope="module")
def notebooks() -> Callable[[str], dict[str, Any]]:
    return _solution_notebook


def _solution_notebook(assignment: str) -> dict[str, Any]:
    """A solution's setup and answer cells run in this process (once): its namespace, and the test cells."""
    if assignment not in _NOTEBOOKS:
        _NOTEBOOKS[assignment] = _run_solution(assignment)
    return _NOTEBOOKS[assignment]


def _run_solution(assignment: str) -> dict[str, Any]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from course_utils.cells import read

    nb = read(ROOT / "solutions" / assignment / f"{assignment}.ipynb")
    namespace: dict[str, Any] = {"__name__": "__main__"}
    tests = {}
    saved, show = os.environ.pop(ENV_SEED, None), plt.show
    plt.show = lambda *args, **kwargs: plt.close("all")
    try:
        wanted = set(TESTS[assignment].values())
        for cell in nb.cells:  # as the kernel runs the notebook (ci profile), to the last variant test; test cells' visible part
            if wanted <= set(tests):
                break
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            if cell.cell_type != "code":
                continue
            source = cell.source
            if grade_id and grade_id.startswith("test_"):
                tests[grade_id] = source
                source = source.split(HIDDEN[0])[0]
            _run(source, namespace)
    finally:
        plt.show = show
        plt.close("all")
        if saved is not None:
            os.environ[ENV_SEED] = saved
    return {"namespace": namespace, "tests": tests}


def _parts(source: str) -> tuple[str, str]:
    visible, rest = source.split(HIDDEN[0])
    hidden, after = rest.split(HIDDEN[1])
    return visible, hidden + after


def _run(source: str, namespace: dict[str, Any]) -> None:
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(source, "<test cell>", "exec"), namespace)  # noqa: S102 - the course's own tests


def _as_checker(seed: str | None, source: str, namespace: dict[str, Any]) -> None:
    os.environ[ENV_SEED] = seed or ""
    try:
        _run(source, namespace)
    finally:
        os.environ.pop(ENV_SEED, None)


@pytest.mark.parametrize("assignment", sorted(TESTS))
def test_model_answer_passes_200_variants(notebooks, assignment, monkeypatch):
    """Each of 200 students' variants: the visible part as their kernel runs it (their release's
    parameters, no seed) and the whole cell as the checker runs it (the seed) pass the model answer."""
    notebook = notebooks(assignment)
    monkeypatch.delenv(ENV_SEED, raising=False)
    monkeypatch.setattr(variants, "_RELEASED", {})
    for i in range(200):
        seed = seed_of(i, assignment)
        variants.use(assignment, variants.visible_parameters(seed, assignment))
        for grade_id in TESTS[assignment].values():
            source = notebook["tests"][grade_id]
            _run(_parts(source)[0], dict(notebook["namespace"]))
            _as_checker(seed, source, dict(notebook["namespace"]))


class Replay:
    """A hard-coded answer: on the hidden tests' i-th call it returns the value student A's i-th call
    returned, whatever the inputs (through the real answer's graph where the shapes agree, so that
    A's own gradients and dtypes still hold: the copy passes A's tests)."""

    def __init__(self) -> None:
        self.recorded: list[Any] = []
        self.mode = "real"  # "record": keep each result; "replay": return the recorded ones
        self.calls = 0

    def __call__(self, real: Any) -> Any:
        index, self.calls = self.calls, self.calls + 1
        if self.mode == "record":
            self.recorded.append(torch.utils._pytree.tree_map(lambda t: t.detach().clone() if torch.is_tensor(t) else t, real))
        elif self.mode == "replay" and index < len(self.recorded):
            def swap(new: Any, old: Any) -> Any:
                if torch.is_tensor(new) and torch.is_tensor(old):
                    if new.shape == old.shape and new.is_floating_point():
                        zero = (new - new.detach()).masked_fill(~torch.isfinite(new), 0.0)  # 0, -inf - -inf is not
                        return old.to(new) + zero
                    return old.to(new)  # A's output, whatever B's shapes: a copy does not compute
                return new
            return torch.utils._pytree.tree_map(swap, real, self.recorded[index])
        return real


def _hard_coded(exercise: str, namespace: dict[str, Any], replay: Replay) -> dict[str, Any]:
    """The namespace with ``exercise``'s answer wrapped by ``replay``."""
    namespace = dict(namespace)
    if exercise == "self_attention_module":
        base = namespace["SelfAttention"]

        class SelfAttention(base):  # type: ignore[misc, valid-type]
            def forward(self, x: torch.Tensor) -> Any:
                return replay(super().forward(x))

        SelfAttention.__module__ = "__main__"
        namespace["SelfAttention"] = SelfAttention
    else:
        real: Callable[..., Any] = namespace[exercise]
        code = compile("def {0}(*args, **kwargs):\n    return replay(real(*args, **kwargs))\n".format(exercise), "<answer>", "exec")
        scope = {"replay": replay, "real": real, "__name__": "__main__"}
        exec(code, scope)  # noqa: S102 - defined "in the notebook", as a student's would be
        namespace[exercise] = scope[exercise]
    return namespace


def _passes(seed: str, source: str, namespace: dict[str, Any], replay: Replay, mode: str) -> bool:
    visible, hidden = _parts(source)
    os.environ[ENV_SEED] = seed
    try:
        replay.mode, replay.calls = "real", 0
        _run(visible, namespace)
        replay.mode, replay.calls = mode, 0
        _run(hidden, namespace)
        return True
    except Exception:  # noqa: BLE001 - a failed check, or the tests could not use what came back
        return False
    finally:
        os.environ.pop(ENV_SEED, None)
        replay.mode = "real"


@pytest.mark.parametrize(("assignment", "exercise"), EXERCISES)
def test_output_hard_coded_from_student_a_fails_student_b(notebooks, assignment, exercise):
    """A's hidden outputs, replayed (values only: shapes, dtypes and gradients are the real answer's),
    pass A's own hidden tests and fail B's for >= 95 % of 100 random pairs."""
    notebook = notebooks(assignment)
    source = notebook["tests"][TESTS[assignment][exercise]]
    pairs = random.Random(37).sample([(a, b) for a in range(40) for b in range(40) if a != b], 100)
    failed = 0
    for a in sorted({a for a, _ in pairs}):  # each A's outputs recorded once, replayed to each of its Bs
        replay = Replay()
        namespace = _hard_coded(exercise, notebook["namespace"], replay)
        assert _passes(seed_of(a, assignment), source, dict(namespace), replay, "record")
        assert _passes(seed_of(a, assignment), source, dict(namespace), replay, "replay"), "the copy passes its own variant"
        for b in (b for a_, b in pairs if a_ == a):
            failed += not _passes(seed_of(b, assignment), source, dict(namespace), replay, "replay")
    assert failed >= 95, f"{exercise}: A's hard-coded outputs failed B's hidden tests in only {failed} of 100 pairs"


def test_without_variants_a_hard_coded_output_passes(notebooks):
    """The threat is real: without variants every student has the same hidden inputs, and the copy passes."""
    source = notebooks(A)["tests"]["test_scaled_scores"]
    replay = Replay()
    namespace = _hard_coded("scaled_scores", notebooks(A)["namespace"], replay)
    assert _passes("", source, dict(namespace), replay, "record")
    assert _passes("", source, dict(namespace), replay, "replay")


# ----------------------------------------------------------------------------- release, gradebook, grading


def _small_course(course: Path) -> Path:
    """03 cut down to its setup, "The big dog" and Exercise 1 (scaled_scores and its test), released."""
    import nbformat

    from course_grader.authoring.release import generate_release, prepare_scratch_course

    prepare_scratch_course(ROOT, course, [A])
    path = course / "solutions" / A / f"{A}.ipynb"
    nb = nbformat.read(path, as_version=4)
    keep = ("device = start(", "X = torch.tensor(", "def scaled_scores(", "got = scaled_scores(X, X)")
    nb.cells = [c for c in nb.cells if c.cell_type == "code" and any(k in c.source for k in keep)]
    nbformat.write(nb, path)
    generate_release(Course.open(course), [A], verbose=False)
    return course


def test_variant_release_carries_visible_parameters_only_and_the_gradebook_keeps_the_seeds(tmp_path, monkeypatch):
    from course_grader.authoring.release import release_variants
    from course_grader.grading.gradebook import copy_assignment_definition, course_db_url
    from course_grader.grading.variants import SECRET_FILE, course_secret, variant_history, variant_seed

    monkeypatch.delenv("COURSE_VARIANT_SECRET", raising=False)
    course = _small_course(tmp_path / "course")
    folders = release_variants(Course.open(course), A, ["ada", "bob"], by="instructor", verbose=False)
    assert (course / SECRET_FILE).stat().st_mode & 0o777 == 0o600
    db_url = course_db_url(course)
    secret = course_secret(course)
    assert secret is not None
    for student, folder in folders.items():
        seed = variant_seed(db_url, student, A)
        assert seed == student_seed(secret, student, A, 0)
        text = (folder / f"{A}.ipynb").read_text()
        assert seed not in text
        for exercise in SPECS[A]:
            hidden = parameters(seed, A, exercise, "hidden")
            assert not ("seed" in hidden and str(hidden["seed"]) in text), "a hidden parameter reached the release"
        nb = json.loads(text)
        assert nb["metadata"]["course_variant"]["visible"] == variants.visible_parameters(seed, A)
        assert "variants.use(" in "".join(nb["cells"][1]["source"])
    # a re-roll: a new seed, recorded with who and when; the old one kept
    before = variant_seed(db_url, "bob", A)
    release_variants(Course.open(course), A, ["ada"], reroll=["bob"], by="ta-carol", verbose=False)
    history = variant_history(db_url, "bob", A)
    assert [h["reroll"] for h in history] == [0, 1] and history[0]["seed"] == before
    assert history[1]["made_by"] == "ta-carol" and history[1]["made_at"] and history[1]["seed"] != before
    assert variant_seed(db_url, "bob", A) == student_seed(secret, "bob", A, 1)
    assert variant_seed(db_url, "nobody", A) is None
    # a worker's copy of the gradebook (parallel, Dask) has the same seeds
    copy = f"sqlite:///{tmp_path / 'copy.db'}"
    copy_assignment_definition(db_url, copy, A)
    assert variant_seed(copy, "bob", A) == variant_seed(db_url, "bob", A)


def test_an_exchange_release_carries_the_class_visible_table_and_each_kernel_picks_its_own(tmp_path, monkeypatch):
    """One release for nbgrader's or ngshare's exchange (one folder for the class): the class's visible
    parameters in variants.json (every student with a seed, after a re-roll their current one; never a
    seed or a hidden parameter); the generated cell gives each hub user their own, and the course's own
    parameters to a user with none or to a copy without the table (a graded one)."""
    from course_grader.authoring.release import EXCHANGE_RELEASE_DIR, release_variants
    from course_grader.grading.gradebook import course_db_url
    from course_grader.grading.variants import variant_seed

    monkeypatch.delenv("COURSE_VARIANT_SECRET", raising=False)
    course = _small_course(tmp_path / "course")
    release_variants(Course.open(course), A, ["ada", "bob"], verbose=False)
    release_variants(Course.open(course), A, ["cleo"], reroll=["bob"], verbose=False)  # a later student, a re-roll
    shared = course / EXCHANGE_RELEASE_DIR / A
    db_url = course_db_url(course)
    seeds = {s: variant_seed(db_url, s, A) for s in ("ada", "bob", "cleo")}
    table = json.loads((shared / variants.TABLE_FILE).read_text())
    assert table["students"] == {s: variants.visible_parameters(seed, A) for s, seed in seeds.items()}
    text = (shared / variants.TABLE_FILE).read_text() + (shared / f"{A}.ipynb").read_text()
    for seed in seeds.values():
        assert seed not in text
        for exercise in SPECS[A]:
            hidden = parameters(seed, A, exercise, "hidden")
            assert not ("seed" in hidden and f'"seed": {hidden["seed"]}' in text), "a hidden parameter reached the release"
    cell = "".join(json.loads((shared / f"{A}.ipynb").read_text())["cells"][1]["source"])
    assert "variants.use_own(" in cell
    own = {e: parameters(seeds["bob"], A, e, "visible") for e in SPECS[A]}
    defaults = {e: parameters(None, A, e, "visible") for e in SPECS[A]}
    assert own != defaults and own != {e: parameters(seeds["ada"], A, e, "visible") for e in SPECS[A]}
    monkeypatch.setattr(variants, "_RELEASED", {})
    monkeypatch.setenv("JUPYTERHUB_USER", "bob")
    assert "your variant (bob)" in variants.use_own(A, shared)
    assert {e: variants.draw(A, e).as_dict() for e in SPECS[A]} == own
    monkeypatch.setattr(variants, "_RELEASED", {})
    monkeypatch.setenv("JUPYTERHUB_USER", "dora")
    assert "dora has no variant" in variants.use_own(A, shared)
    assert {e: variants.draw(A, e).as_dict() for e in SPECS[A]} == defaults
    assert "no variants.json" in variants.use_own(A, tmp_path)


HARD_CODED = '''def scaled_scores(Q: torch.Tensor, K: torch.Tensor) -> torch.Tensor:
    if Q.dim() == 4:  # the hidden tests' d, copied from {who}'s graded notebook
        return Q @ K.transpose(-2, -1) / {root}
    return Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
'''


@pytest.mark.slow
def test_release_with_variants_then_grade_two_students(tmp_path, monkeypatch):
    """End to end, through nbgrader, the sandbox (where there is one) and the checker, one grading run:
    each student submits their own release with scaled_scores dividing 4-d scores by a number copied
    from ada's graded notebook (her hidden d). It scores 2/2 for ada and 0/2 for bob, whose hidden d
    differs; cleo has no variant and is graded on the defaults, where the copy (d = 16) passes."""
    import nbformat

    from course_grader.authoring.release import release_variants
    from course_grader.grading.scores import autograde, read_scores
    from course_grader.sandbox.bubblewrap import sandbox_problem
    from course_utils.cells import fill_answers, read

    if sandbox_problem() is not None:
        monkeypatch.setenv("COURSE_SANDBOX", "off")
    monkeypatch.setenv("COURSE_VARIANT_SECRET", "e2e")
    course = _small_course(tmp_path / "course")
    students = [f"s{i}" for i in range(12)]
    d = {s: parameters(student_seed(b"e2e", s, A), A, "scaled_scores", "hidden")["d"] for s in students}
    ada = next(s for s in students if d[s] != 16)
    bob = next(s for s in students if d[s] not in (16, d[ada]))
    folders = release_variants(Course.open(course), A, [ada, bob], verbose=False)
    releases = {ada: folders[ada], bob: folders[bob], "cleo": course / "notebooks" / A}
    copied = HARD_CODED.format(who="ada", root=math.sqrt(d[ada]))
    default = HARD_CODED.format(who="a classmate", root=4.0)
    for student, folder in releases.items():
        target = course / "submitted" / student / A
        target.mkdir(parents=True)
        code = default if student == "cleo" else copied
        nbformat.write(fill_answers(read(folder / f"{A}.ipynb"), {"scaled_scores": code}), str(target / f"{A}.ipynb"))
    run = autograde(Course.open(course), A, sorted(releases))
    assert {r.student: r.status for r in run.results} == dict.fromkeys(releases, "graded"), run.results
    scores = {r.student: r.cells["test_scaled_scores"].score for r in read_scores(Course.open(course))}
    assert scores == {ada: 2.0, bob: 0.0, "cleo": 2.0}


def test_the_seed_goes_to_the_checker_never_to_the_kernel(tmp_path, monkeypatch):
    """The kernel's environment is an allow-list: neither a seed nor the secret is on it, even when the
    grader's own environment has them; the checker of a student without a variant gets an empty seed
    (the defaults), never one inherited from the grader's environment."""
    from course_grader.grading.variants import SECRET_ENV, checker_environment
    from course_grader.sandbox.bubblewrap import sandbox_env

    monkeypatch.setenv(ENV_SEED, "ab" * 32)
    monkeypatch.setenv(SECRET_ENV, "the secret")
    kernel = sandbox_env(str(tmp_path), str(tmp_path / "home"), str(tmp_path / "work"))
    assert ENV_SEED not in kernel and SECRET_ENV not in kernel
    assert not any("ab" * 32 in value or "the secret" in value for value in kernel.values())
    db_url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    assert checker_environment(db_url, "nobody", A) == {ENV_SEED: ""}
    assert checker_environment(None, None, None) == {ENV_SEED: ""}


@pytest.mark.parametrize("sandbox", [True, False])
def test_nbgrader_and_an_unsandboxed_kernel_never_inherit_the_secret_or_a_seed(monkeypatch, sandbox):
    """An unsandboxed kernel (``--no-sandbox``) inherits nbgrader's environment: the one place the
    grader writes it leaves out the course secret and any seed, whatever the grader's shell holds."""
    from course_grader.course import GRADER_SECRETS, GradingSettings
    from course_grader.grading.runner import grading_env
    from course_grader.grading.variants import SECRET_ENV

    assert {SECRET_ENV, ENV_SEED} <= GRADER_SECRETS
    monkeypatch.setenv(ENV_SEED, "ab" * 32)
    monkeypatch.setenv(SECRET_ENV, "the secret")
    env = grading_env(GradingSettings(sandbox=sandbox))
    assert SECRET_ENV not in env and ENV_SEED not in env
    assert not any("ab" * 32 in value or "the secret" in value for value in env.values())
    assert env["COURSE_PROFILE"] == "ci" and (env.get("COURSE_SANDBOX") == "off") is not sandbox


@pytest.mark.filterwarnings("ignore:The use of `x.T`:UserWarning")  # a curated mistake's K.T on 4-d inputs
@pytest.mark.parametrize("assignment", sorted(TESTS))
def test_curated_mistakes_are_rejected_in_every_variant(notebooks, assignment):
    """Each wrong answer of tests/mistakes/NN.py that a variant test must reject is rejected by it in
    5 students' variants, not only in the course's own values (the checker's run, in this process)."""
    import importlib.util

    from course_utils.cells import read, solution_code

    notebook = notebooks(assignment)
    spec = importlib.util.spec_from_file_location(f"mistakes_{assignment}", ROOT / "tests" / "mistakes" / f"{assignment}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    solution = solution_code(read(ROOT / "solutions" / assignment / f"{assignment}.ipynb"))
    variant_tests = set(TESTS[assignment].values())
    checked = 0
    for mistake in module.MISTAKES:
        rejecting = [t for t in mistake.rejected_by if t in variant_tests]
        if not rejecting:
            continue
        checked += 1
        wrong = mistake.apply(solution[mistake.cell])
        for i in range(5):
            namespace = {k: (v.clone() if torch.is_tensor(v) else v) for k, v in notebook["namespace"].items()}
            try:
                _run(wrong, namespace)
            except Exception:  # noqa: BLE001 - an answer that does not even define itself is rejected
                continue
            for test in rejecting:
                with pytest.raises(Exception):  # noqa: B017, PT011 - any failed check
                    _as_checker(seed_of(i, assignment), notebook["tests"][test], namespace)
    assert checked >= 10


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads a process's environment from /proc")
def test_a_checker_started_without_the_fork_server_gets_the_seed_too(monkeypatch):
    """``COURSE_CHECKER_FORK=off``: the checker is its own process, started with the seed in its
    environment (the forked path is graded end to end above); only COURSE_ variables are taken."""
    from course_grader.grading.checker import CheckerProcess

    monkeypatch.setenv("COURSE_CHECKER_FORK", "off")
    checker = CheckerProcess({ENV_SEED: "ab" * 32, "PATH": "/nowhere"})
    try:
        checker.wait_started()
        assert checker.process is not None
        # Popen returns once exec has closed its pipe, a moment before the new program's environment is in
        # place: /proc/PID/environ reads empty until then
        deadline = time.monotonic() + 10
        while not (environ := Path(f"/proc/{checker.process.pid}/environ").read_bytes().split(b"\0"))[0]:
            assert time.monotonic() < deadline, "the checker's environment stayed empty for 10 s"
            time.sleep(0.05)
        assert f"{ENV_SEED}={'ab' * 32}".encode() in environ and b"PATH=/nowhere" not in environ
    finally:
        checker.close()
