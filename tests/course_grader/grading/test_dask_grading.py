"""Grading on a Dask cluster (course_grader.grading.dask_grading), on a LocalCluster of 2 workers.

One end-to-end test grades a real class of 00_welcome on the cluster and serially (`--workers 1`)
and compares the grades; the fault tests (a worker killed mid-task, an interrupted client) use a
stand-in task that returns the submission as its "executed" notebook, so only the client's
recording runs nbgrader; the wall-limit test runs a real notebook that never ends.
"""

from __future__ import annotations

import collections
import functools
import json
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

distributed = pytest.importorskip("distributed")

from course_grader.course import Course  # noqa: E402
from course_grader.grading import dask_grading  # noqa: E402
from course_utils.cells import read, solution_code  # noqa: E402
from course_grader.grading.dask_grading import SubmissionResult, grade_on_dask, journal_path  # noqa: E402
from course_grader.grading.scores import autograde, read_scores  # noqa: E402

from tests.conftest import ROOT, build_small_class  # noqa: E402
from tests.helpers.sandbox import needs_bwrap  # noqa: E402 - course grade refuses to grade without the sandbox

A = "00_welcome"
TEST = "test_count_parameters"
CRASH = "import os\nos._exit(1)\n"


@pytest.fixture(scope="module")
def client():
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the stand-ins below travel by value (by_value)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  worker_dashboard_address=None) as cluster, distributed.Client(cluster) as c:
        yield c


def scores_kept(bundle, task, *, out: Path) -> SubmissionResult:
    """execute_submission, keeping the scores the worker sends back in ``out/<student>.json``."""
    result = dask_grading.execute_submission(bundle, task)
    out.mkdir(exist_ok=True)
    (out / f"{task.student}.json").write_text(json.dumps(result.scores))
    return result


def grades(course: Path) -> dict[tuple[str, str], float]:
    return {(r.student, gid): c.score for r in read_scores(Course.open(course)) for gid, c in r.cells.items()}


@pytest.mark.slow
@needs_bwrap
def test_dask_grades_equal_serial_grades_and_a_dead_kernel_costs_one_student(tmp_path, client):
    solution = solution_code(read(ROOT / "solutions" / A / f"{A}.ipynb"))["count_parameters"]
    serial = build_small_class(tmp_path / "serial", {"a-solution": solution, "b-blank": None, "c-crash": CRASH})
    on_dask = tmp_path / "dask"
    shutil.copytree(serial, on_dask)
    students = sorted(p.name for p in (serial / "submitted").iterdir())

    local = {r.student: r for r in autograde(Course.open(serial), A).results}
    keep = functools.partial(scores_kept, out=tmp_path / "worker-scores")
    [run] = grade_on_dask(Course.open(on_dask), {A: students}, client, progress=False, execute=keep)
    remote = {r.student: r for r in run.results}

    assert {s: r.status for s, r in remote.items()} == {s: r.status for s, r in local.items()}
    assert remote["c-crash"].status == "failed" and "kernel died" in remote["c-crash"].reason
    assert remote["a-solution"].status == remote["b-blank"].status == "graded", run.results
    assert grades(on_dask) == {k: v for k, v in grades(serial).items() if k[0] != "c-crash"}
    assert grades(on_dask)[("a-solution", TEST)] == 2 and grades(on_dask)[("b-blank", TEST)] == 0
    # what the workers sent back as data: scores per cell equal to what the client recorded
    for student in ("a-solution", "b-blank"):
        sent = json.loads((tmp_path / "worker-scores" / f"{student}.json").read_text())
        assert {(student, gid): score for gid, (score, _) in sent[A].items()} == \
            {k: v for k, v in grades(on_dask).items() if k[0] == student}
    # the feedback's material: the executed, recorded notebook is in autograded/
    assert (on_dask / "autograded" / "a-solution" / A / f"{A}.ipynb").is_file()
    # the journal: one line per recorded submission, with the worker's time
    lines = journal_path(Course.open(on_dask), A).read_text().splitlines()
    assert len(lines) == 2 and all('"seconds"' in line for line in lines)


def returned_unexecuted(bundle, task, *, log: Path) -> SubmissionResult:
    """Stand-in for execute_submission: the submission itself as the "executed" notebook; each
    call is logged (student, worker pid); the first call for ``b-killed`` kills its worker."""
    with log.open("a") as handle:
        handle.write(f"{task.student} {os.getpid()}\n")
    if task.student == "b-killed" and not (log.parent / "killed-once").exists():
        (log.parent / "killed-once").write_text(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)  # the worker dies mid-task
    return SubmissionResult(task.assignment, task.student, task.digest, {"success": True}, dict(task.files),
                            seconds=0.1, worker=str(os.getpid()))


def by_value(function, **bound):
    """``function`` with ``bound`` as a closure: plain pickle refuses it, so it travels to the workers
    by value (cloudpickle; this module is registered) and no worker imports this module, which
    imports nbgrader and torch through test_sandbox (5-15 s per worker process, paid again by each
    restarted one). A ``functools.partial`` of it would travel by reference."""
    return lambda bundle, task: function(bundle, task, **bound)


def calls(tmp_path: Path) -> list[tuple[str, str]]:
    path = tmp_path / "calls.txt"
    return [tuple(line.split()[:2]) for line in path.read_text().splitlines()] if path.is_file() else []


@pytest.fixture
def stand_in(tmp_path):
    return by_value(returned_unexecuted, log=tmp_path / "calls.txt")


@pytest.mark.slow
def test_a_killed_worker_is_retried_elsewhere_and_recorded_once(tmp_path, client, stand_in):
    course = build_small_class(tmp_path / "course", {"a-first": None, "b-killed": None, "c-last": None})
    [run] = grade_on_dask(Course.open(course), {A: ["a-first", "b-killed", "c-last"]}, client, progress=False,
                          execute=stand_in)
    assert [r.status for r in run.results] == ["graded"] * 3, run.results
    attempts = [pid for student, pid in calls(tmp_path) if student == "b-killed"]
    killed = (tmp_path / "killed-once").read_text()
    assert len(attempts) == 2 and attempts[0] == killed and attempts[1] != killed  # a second, living, worker
    assert sorted(r.student for r in read_scores(Course.open(course))) == ["a-first", "b-killed", "c-last"]
    journal = journal_path(Course.open(course), A).read_text().splitlines()
    assert len(journal) == 3 and sum('"b-killed"' in line for line in journal) == 1


def cancelled_while_running(bundle, task, *, log: Path) -> SubmissionResult:
    """Stand-in that logs each call as it starts; for a student named ``cancel-*``, says it runs
    (``running/<key>``) and waits until the test has cancelled it (``released/<key>``):
    ``cancel-once`` only on its first call, ``cancel-always`` on every call; ``error`` raises, as a
    task that really fails; the others return the submission as ``returned_unexecuted`` does."""
    first = not log.is_file() or task.student not in {line.split()[0] for line in log.read_text().splitlines()}
    with log.open("a") as handle:
        handle.write(f"{task.student} {os.getpid()} {time.time():.3f}\n")
    if task.student == "error":
        raise ValueError("a real error in the task")
    if task.student == "cancel-always" or (task.student == "cancel-once" and first):
        key = distributed.get_worker().get_current_task()
        (log.parent / "running").mkdir(exist_ok=True)
        (log.parent / "running" / key).touch()
        released = log.parent / "released" / key
        deadline = time.monotonic() + 60
        while not released.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    return SubmissionResult(task.assignment, task.student, task.digest, {"success": True}, dict(task.files),
                            seconds=0.1, worker=str(os.getpid()))


@pytest.mark.slow
def test_a_cancelled_running_task_is_resubmitted_and_recorded_once(tmp_path, client):
    """A grading future cancelled while it runs (as Dask cancels every future when the client loses
    its scheduler under load) is submitted again, not reported failed ('NoneType: None'); a task
    cancelled every time fails after MAX_RESUBMITS more tries, saying so; a real error fails at once."""
    students = ["a-first", "cancel-once", "cancel-always", "error"]
    course = build_small_class(tmp_path / "course", dict.fromkeys(students))
    stop, cancelled = threading.Event(), []

    def cancel_each_running_task() -> None:  # client.cancel on the future while its task runs
        running, released = tmp_path / "running", tmp_path / "released"
        released.mkdir()
        while not stop.is_set():
            for marker in sorted(running.iterdir()) if running.is_dir() else []:
                if marker.name not in cancelled:
                    client.cancel([distributed.Future(marker.name, client)])
                    cancelled.append(marker.name)
                    (released / marker.name).touch()  # the cancelled call may end now: its result is dropped
            stop.wait(0.05)

    canceller = threading.Thread(target=cancel_each_running_task, daemon=True)
    canceller.start()
    try:
        [run] = grade_on_dask(Course.open(course), {A: students}, client, progress=False,
                              execute=by_value(cancelled_while_running, log=tmp_path / "calls.txt"))
    finally:
        stop.set()
        canceller.join()
    status = {r.student: r for r in run.results}
    assert {s: r.status for s, r in status.items()} == \
        {"a-first": "graded", "cancel-once": "graded", "cancel-always": "failed", "error": "failed"}, run.results
    assert "ValueError: a real error in the task" in status["error"].reason
    assert f"cancelled or lost {1 + dask_grading.MAX_RESUBMITS} times" in status["cancel-always"].reason
    attempts = collections.Counter(student for student, _ in calls(tmp_path))
    assert attempts == {"a-first": 1, "cancel-once": 2, "cancel-always": 1 + dask_grading.MAX_RESUBMITS, "error": 1}
    assert len(cancelled) == 1 + 1 + dask_grading.MAX_RESUBMITS
    # graded and recorded exactly once: one gradebook row, one journal line
    assert sorted(r.student for r in read_scores(Course.open(course))) == ["a-first", "cancel-once"]
    journal = journal_path(Course.open(course), A).read_text().splitlines()
    assert len(journal) == 2 and sum('"cancel-once"' in line for line in journal) == 1


@pytest.mark.slow
def test_an_interrupted_client_records_only_what_is_missing_when_run_again(tmp_path, client, stand_in, monkeypatch):
    students = [f"s{i}" for i in range(4)]
    course = build_small_class(tmp_path / "course", dict.fromkeys(students))
    record = dask_grading._record

    def interrupted(*args, **kwargs):
        record(*args, **kwargs)
        raise KeyboardInterrupt  # ^C right after the first batch was recorded
    monkeypatch.setattr(dask_grading, "_record", interrupted)
    with pytest.raises(KeyboardInterrupt):
        grade_on_dask(Course.open(course), {A: students}, client, progress=False, batch=2, execute=stand_in)
    first = journal_path(Course.open(course), A).read_text().splitlines()
    assert len(first) == 2  # one batch of `batch`, even when all four had finished by then
    executed_before = len(calls(tmp_path))

    monkeypatch.setattr(dask_grading, "_record", record)
    [run] = grade_on_dask(Course.open(course), {A: students}, client, progress=False, batch=2, execute=stand_in)
    assert [r.status for r in run.results] == ["graded"] * 4
    again = [student for student, _ in calls(tmp_path)[executed_before:]]
    assert len(again) == 4 - len(first) and not set(again) & {line.split('"student": "')[1].split('"')[0] for line in first}
    assert sorted(r.student for r in read_scores(Course.open(course))) == students  # each once: one row per student
    assert len(journal_path(Course.open(course), A).read_text().splitlines()) == 4


@pytest.mark.slow
@needs_bwrap
def test_a_task_past_its_wall_limit_is_reported_with_its_reason(tmp_path, client, monkeypatch, capsys):
    """Through `course grade A --scheduler ADDRESS --wall-limit 3`."""
    from course_grader import cli

    course = build_small_class(tmp_path / "course", {"a-forever": "import time\ntime.sleep(600)\n"})
    monkeypatch.setenv("COURSE_ROOT", str(course))
    assert cli.main(["grade", A, "--scheduler", client.scheduler.address, "--wall-limit", "3"]) == 0
    out = capsys.readouterr().out
    assert "on the Dask cluster at tcp://" in out
    assert "FAILED a-forever / 00_welcome: past the wall limit of 3 s per notebook" in out, out
    assert read_scores(Course.open(course)) == [] and not journal_path(Course.open(course), A).exists()


def test_deployment_configs_are_valid():
    """deploy/dask/: the SLURM job script dask-jobqueue builds from jobqueue.yaml, the Kubernetes
    manifests, the scripts, and the hub's grader service handing on the scheduler's address."""
    import yaml

    folder = ROOT / "deploy" / "dask"
    for script in ("slurm_cluster.py", "check_workers.py"):
        compile((folder / script).read_text(), script, "exec")
    pytest.importorskip("dask_jobqueue")
    from dask_jobqueue.slurm import SLURMJob

    sys.path.insert(0, str(folder))
    try:
        import slurm_cluster
    finally:
        sys.path.remove(str(folder))
    with slurm_cluster.load_config():  # the settings go when the test ends
        script = SLURMJob(scheduler="tcp://10.0.0.1:8786", name="w0", config_name="slurm").job_script()
    assert "#SBATCH --cpus-per-task=8" in script and "--nthreads 1" in script and "--nworkers 8" in script
    assert "tcp://10.0.0.1:8786" in script and "source /srv/attention-course/venv/bin/activate" in script

    cluster, policy = yaml.safe_load_all((folder / "kubernetes" / "daskcluster.yaml").read_text())
    assert (cluster["apiVersion"], cluster["kind"]) == ("kubernetes.dask.org/v1", "DaskCluster")
    [worker] = cluster["spec"]["worker"]["spec"]["containers"]
    assert worker["args"][:2] == ["dask", "worker"] and worker["args"][worker["args"].index("--nthreads") + 1] == "1"
    assert worker["securityContext"]["seccompProfile"]["type"] == "Unconfined"  # bubblewrap's namespaces
    ports = {p["port"] for p in cluster["spec"]["scheduler"]["service"]["ports"]}
    assert 8786 in ports and policy["kind"] == "NetworkPolicy"
    assert "bubblewrap" in (folder / "Dockerfile.worker").read_text()
    assert "COURSE_DASK_SCHEDULER" in (ROOT / "deploy" / "jupyterhub" / "jupyterhub_config.py").read_text()
