"""A class on a real JupyterHub, for tests/course/test_hub_semester.py and tests/course/test_browser.py.

The hub is started from deploy/jupyterhub/jupyterhub_config.py unchanged: a small config file
written here loads it and then sets only what a test machine needs (free ports on 127.0.0.1, the
dummy authenticator, a scratch hub database, an admin service whose token drives the hub's REST
API). The course's side is reached through the environment variables the deploy files read
(COURSE_ROOT, COURSE_BASE_CONFIG, COURSE_DB_URL, NBGRADER_EXCHANGE, COURSE_PROFILE_FOR_STUDENTS).

Where it may (root, and the course's Python is reachable by other users), every student and the
course account ``grader-attention-transformers`` are real local users (``useradd``; removed
afterwards) and each runs their own server (JupyterHub's LocalProcessSpawner), as on a class's hub.
Elsewhere (not root, or a Python under a private folder such as /root/.pyenv) the hub's
SimpleLocalProcessSpawner runs everyone as the current user, each in a home of their own, and
``CLASS_MODE`` says so.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Iterator

from tests.conftest import ROOT

COURSE = "attention-transformers"
GRADER = "grader-" + COURSE
AS_ROOT = os.geteuid() == 0


def _reachable_by_others(path: Path) -> bool:
    """Whether a user who is neither owner nor group can reach and run ``path``."""
    path = path.resolve()
    return all(os.stat(p).st_mode & 0o001 for p in [path, *path.parents])


REAL_USERS = AS_ROOT and all(_reachable_by_others(p) for p in (Path(sys.executable), ROOT / "src", Path(sys.prefix)))
CLASS_MODE = ("real local users (useradd), a server each as its user" if REAL_USERS else
              "everyone as " + ("root" if AS_ROOT else "this user") + " (SimpleLocalProcessSpawner): " +
              ("not root" if not AS_ROOT else f"the course's Python ({Path(sys.executable).resolve()}) is not "
               "reachable by other users"))


def missing_hub_tools() -> str | None:
    """Why a hub cannot start here (None: it can)."""
    try:
        import jupyterhub  # noqa: F401
    except ImportError:
        return "jupyterhub (PyPI) is not installed: pip install -e .[dev]"
    if shutil.which("configurable-http-proxy") is None:
        note = ROOT / ".venv" / ".hub-tools-missing"
        why = note.read_text().strip() if note.is_file() else "not on PATH"
        return f"configurable-http-proxy (npm) is missing ({why}): `make setup` installs it (.ci/install-hub-tools)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def open_folder(path: Path) -> Path:
    """``path`` created and made traversable by the class's users (scratch folders are 0700)."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o755)
    return path


class Users:
    """The class's local accounts: real users as root, else names only (everyone is us)."""

    def __init__(self, scratch: Path) -> None:
        self.scratch = scratch
        self.created: list[str] = []

    def add(self, name: str) -> str:
        if REAL_USERS:
            try:
                pwd.getpwnam(name)
            except KeyError:
                subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", name], check=True,
                               capture_output=True, text=True)
                self.created.append(name)
        else:
            open_folder(self.scratch / "home" / name)
        return name

    def home(self, name: str) -> Path:
        return Path(pwd.getpwnam(name).pw_dir) if REAL_USERS else self.scratch / "home" / name

    def chown(self, path: Path, name: str) -> None:
        if REAL_USERS:
            subprocess.run(["chown", "-R", f"{name}:{name}", str(path)], check=True)

    def run(self, name: str, args: list[str], cwd: Path, env: dict[str, str], timeout: float = 600) \
            -> subprocess.CompletedProcess[str]:
        """``args`` run as ``name`` (as root: that user's uid, gid and HOME)."""
        env = dict(env)
        kwargs: dict = {}
        if REAL_USERS:
            entry = pwd.getpwnam(name)
            env.update(HOME=entry.pw_dir, USER=name, LOGNAME=name)
            kwargs = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
        return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, **kwargs)

    def leftover_processes(self) -> list[str]:
        """Processes still running as one of the class's users (``ps`` lines)."""
        if not self.created:
            return []
        out = subprocess.run(["ps", "-ww", "-o", "user:32=,pid=,lstart=,args=", "-u", ",".join(self.created)],
                             capture_output=True, text=True).stdout
        return [line for line in out.splitlines() if line.strip()]

    def remove(self) -> None:
        for name in self.created:
            subprocess.run(["userdel", "--remove", "--force", name], capture_output=True)
        self.created.clear()


HUB_CONFIG = """\
# A test's hub: deploy/jupyterhub/jupyterhub_config.py unchanged, then only what a test machine needs.
import json
c = get_config()  # noqa: F821
load_subconfig({deploy!r})  # noqa: F821
s = json.loads({settings!r})
c.JupyterHub.bind_url = f"http://127.0.0.1:{{s['port']}}"
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = s["hub_port"]
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{{s['proxy_port']}}"
c.ConfigurableHTTPProxy.should_start = True
c.JupyterHub.db_url = "sqlite:///" + s["scratch"] + "/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = s["scratch"] + "/cookie_secret"
c.JupyterHub.pid_file = s["scratch"] + "/jupyterhub.pid"
c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.allow_all = True
c.JupyterHub.spawner_class = s["spawner"]
c.SimpleLocalProcessSpawner.home_dir_template = s["homes"] + "/{{username}}"
c.JupyterHub.tornado_settings = {{"slow_spawn_timeout": 0}}  # POST .../server answers at once; the test polls
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120
# the students' nbgrader config (the exchange's place) and the course profile reach their servers
c.Spawner.environment.update(s["student_env"])
formgrader = c.JupyterHub.services[0]
formgrader["url"] = f"http://127.0.0.1:{{s['formgrader_port']}}"
formgrader["command"] = [arg if not arg.startswith("--port=") else f"--port={{s['formgrader_port']}}"
                         for arg in formgrader["command"]]
if s["grader_user"]:
    formgrader["user"] = s["grader_user"]
if s["allow_root"]:  # everyone runs as root here (see tests/hubclass.py)
    formgrader["command"].append("--allow-root")
    c.Spawner.args = ["--allow-root"]
# the test's own hand on the REST API
c.JupyterHub.services.append({{"name": "class-test", "api_token": s["token"]}})
c.JupyterHub.load_roles.append({{"name": "admin", "services": ["class-test"]}})
"""


class Hub:
    """A running JupyterHub on 127.0.0.1 with the course's configuration."""

    def __init__(self, scratch: Path, users: Users, course_env: dict[str, str], extra_config: str = "") -> None:
        """``extra_config``: lines appended to the test's hub config (e.g. another service: tests/course/test_ngshare_exchange.py)."""
        self.scratch = open_folder(scratch)
        self.users = users
        self.token = secrets.token_hex(16)
        self.port, self.hub_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        student_config = open_folder(scratch / "student-config")
        # what a class's hub puts in /etc/jupyter/nbgrader_config.py for the students' servers
        # (nbgrader's default exchange is /srv/nbgrader/exchange: the line is only needed elsewhere)
        lines = ["c = get_config()  # noqa: F821", f"c.Exchange.root = {course_env['NBGRADER_EXCHANGE']!r}"]
        if not REAL_USERS:  # nbgrader names a submission after the server's OS user: here that is everyone's
            lines += ["import os", "c.CourseDirectory.student_id = os.environ['JUPYTERHUB_USER']"]
        (student_config / "nbgrader_config.py").write_text("\n".join(lines) + "\n")
        settings = {
            "port": self.port, "hub_port": self.hub_port, "proxy_port": free_port(), "formgrader_port": free_port(),
            "scratch": str(scratch), "homes": str(users.scratch / "home"), "token": self.token,
            "spawner": "localprocess" if REAL_USERS else "simple",
            "grader_user": None if REAL_USERS else pwd.getpwuid(os.geteuid()).pw_name,
            "allow_root": AS_ROOT and not REAL_USERS,
            "student_env": {"JUPYTER_CONFIG_PATH": str(student_config), "MPLBACKEND": "Agg"},
        }
        config = scratch / "jupyterhub_config.py"
        config.write_text(HUB_CONFIG.format(deploy=str(ROOT / "deploy" / "jupyterhub" / "jupyterhub_config.py"),
                                            settings=json.dumps(settings)) + extra_config)
        env = {**os.environ, **course_env, "COURSE_PROFILE_FOR_STUDENTS": "ci",
               "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
        self.log = (scratch / "jupyterhub.log").open("w")
        self.process = subprocess.Popen([sys.executable, "-m", "jupyterhub", "-f", str(config)], cwd=scratch, env=env,
                                        stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            self._wait(lambda: self.api("GET", "/hub/api/") is not None, 60, "the hub to answer")
        except BaseException:
            self.stop()
            raise

    # -- HTTP
    def request(self, method: str, path: str, token: str | None = None, body: bytes | None = None,
                query: dict[str, str] | None = None, content_type: str = "application/json") -> tuple[int, bytes]:
        """(status, body) of ``method path`` through the hub's proxy, with ``token`` (default: the admin's)."""
        url = self.url + urllib.parse.quote(path, safe="/?&=") + ("?" + urllib.parse.urlencode(query) if query else "")
        request = urllib.request.Request(url, data=body, method=method,
                                         headers={"Authorization": f"token {token or self.token}",
                                                  "Content-Type": content_type})
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()
        except (urllib.error.URLError, ConnectionError):
            return 0, b""

    def api(self, method: str, path: str, payload: object = None, token: str | None = None):
        """The JSON answer of a hub or server API call; None on a connection error; raises on 4xx/5xx."""
        status, body = self.request(method, path, token, None if payload is None else json.dumps(payload).encode())
        if status == 0:
            return None
        if status >= 400:
            raise AssertionError(f"{method} {path}: HTTP {status}: {body[:500]!r}")
        return json.loads(body) if body.strip() else {}

    # -- users and their servers
    def request_servers(self, names: list[str]) -> None:
        """Ask the hub to start the servers of ``names`` (it spawns them in the background)."""
        for name in names:
            if self._missing(name):
                self.api("POST", "/hub/api/users", {"usernames": [name]})
            self.api("POST", f"/hub/api/users/{name}/server")

    def wait_for_servers(self, names: list[str]) -> dict[str, str]:
        """Wait until the servers of ``names`` are ready; a token of each user's own."""
        for name in names:
            self._wait(lambda name=name: self._ready(name), 120, f"{name}'s server")
        return {name: self.token_of(name) for name in names}

    def _ready(self, name: str) -> bool:
        return bool((self.api("GET", f"/hub/api/users/{name}") or {}).get("servers", {}).get("", {}).get("ready"))

    def token_of(self, name: str) -> str:
        if self._missing(name):
            self.api("POST", "/hub/api/users", {"usernames": [name]})
        return self.api("POST", f"/hub/api/users/{name}/tokens", {"expires_in": 3600, "note": "class test"})["token"]

    def _missing(self, name: str) -> bool:
        return self.request("GET", f"/hub/api/users/{name}")[0] == 404

    def stop(self) -> None:
        """Stop the hub; it stops the users' servers and the formgrader (JupyterHub.cleanup_servers)."""
        if self.process.poll() is None:
            # the hub stops its managed services (the formgrader, ngshare) with SIGINT, which they ignore here, and
            # sent SIGTERM only after about 28 s (build/test-timings/hub-teardown.log, CI): SIGTERM them first
            for pid in self._service_pids():
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGTERM)
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        proxy = self._proxy_pid()  # a hub that died (or was killed) leaves its proxy running
        if proxy is not None:
            os.kill(proxy, signal.SIGTERM)
        self.log.close()

    def _proxy_pid(self) -> int | None:
        """The pid of this hub's configurable-http-proxy if it still runs."""
        try:
            pid = int((self.scratch / "jupyterhub-proxy.pid").read_text())
            alive = b"configurable-http-proxy" in Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError):
            return None
        return pid if alive else None

    def _processes(self) -> Iterator[tuple[Path, bytes]]:
        """``(/proc/PID, its environment)`` of each process that carries this hub's API address in its
        environment (its servers, the formgrader, their kernels); gone or unreadable ones are skipped."""
        marker = f"127.0.0.1:{self.hub_port}/hub/api".encode()
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit() or int(proc.name) == os.getpid():
                continue
            try:
                environ = (proc / "environ").read_bytes()
            except OSError:  # gone, or not ours to read
                continue
            if marker in environ:
                yield proc, environ

    def _service_pids(self) -> list[int]:
        """This hub's managed services (and what they started): JUPYTERHUB_SERVICE_NAME in their environment."""
        return [int(proc.name) for proc, environ in self._processes() if b"JUPYTERHUB_SERVICE_NAME=" in environ]

    def leftovers(self) -> list[str]:
        """Processes that still carry this hub's API address in their environment: none once it has stopped."""
        found = []
        for proc, _ in self._processes():
            try:
                command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:  # gone meanwhile
                continue
            found.append(f"{proc.name} {command[:200]}")
        proxy = self._proxy_pid()
        return found + ([f"{proxy} configurable-http-proxy"] if proxy is not None else [])

    def log_tail(self, chars: int = 4000) -> str:
        self.log.flush()
        return (self.scratch / "jupyterhub.log").read_text(errors="replace")[-chars:]

    def _wait(self, ready, seconds: float, what: str) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"the hub exited ({self.process.returncode}) waiting for {what}:\n{self.log_tail()}")
            try:
                if ready():
                    return
            except AssertionError:
                pass
            time.sleep(0.25)
        raise AssertionError(f"timed out after {seconds} s waiting for {what}:\n{self.log_tail()}")


TEARDOWN_LOG = ROOT / "build" / "test-timings" / "hub-teardown.log"
LEFTOVER_GRACE = 15.0  # seconds a stopped hub's processes have to exit before they count as left over


def shut_down(hub: "Hub | None", users: Users) -> list[str]:
    """Stop the hub (if it started) and remove the test's users; what is still running after.
    Each step's seconds are appended to ``TEARDOWN_LOG`` (these teardowns took about 30 s each in CI
    and 4 s alone: the log says which step waits)."""
    leftovers: list[str] = []
    steps: list[str] = []
    started = time.monotonic()

    def lap(step: str) -> float:
        nonlocal started
        seconds, started = time.monotonic() - started, time.monotonic()
        steps.append(f"{step} {seconds:.1f} s")
        return seconds

    slow_stop = ""
    if hub is not None:
        hub.stop()
        if lap("hub stop") > 10:  # what the hub did meanwhile
            slow_stop = (hub.scratch / "jupyterhub.log").read_text(errors="replace")[-3000:]
    # a kernel whose server the hub stopped exits by itself within a second or two (ipykernel polls for its
    # parent): only what is still running after a grace period is left over
    deadline = time.monotonic() + LEFTOVER_GRACE
    while True:
        leftovers = (hub.leftovers() if hub is not None else []) + users.leftover_processes()
        if not leftovers or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    lap("leftovers")
    users.remove()
    lap("users removed")
    TEARDOWN_LOG.parent.mkdir(parents=True, exist_ok=True)
    with TEARDOWN_LOG.open("a") as log:
        log.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {os.environ.get('PYTEST_CURRENT_TEST', '?').split(' ')[0]}: "
                  f"{'; '.join(steps)}\n")
        if slow_stop:
            log.write("  the hub's log, last lines:\n    " + slow_stop.replace("\n", "\n    ") + "\n")
    return leftovers
