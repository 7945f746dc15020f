"""JupyterHub configuration sketch for running the course for a large class.

Students log in, fetch assignments with the Assignments tab, work in notebooks/ copies,
and submit; the instructor (and TAs) grade through the formgrader service. Adapt the
authenticator and spawner to the site; everything course-specific is here.
"""

import os

c = get_config()  # noqa: F821

COURSE = "attention-transformers"
INSTRUCTORS = set(os.environ.get("COURSE_INSTRUCTORS", "instructor").split(","))
GRADERS = set(os.environ.get("COURSE_GRADERS", "").split(",")) - {""}

# Each user's server runs the image/environment built from environment.yml, with the
# kernel registered by `course setup-kernel` (the notebooks ask for "attention-course").
c.Spawner.default_url = "/lab"
c.Spawner.environment = {"COURSE_PROFILE": os.environ.get("COURSE_PROFILE_FOR_STUDENTS", "cpu")}

# The formgrader runs as a hub service under the course account, with the course's
# nbgrader_config.py (deploy/jupyterhub/nbgrader_config.py) in its working directory.
c.JupyterHub.services = [
    {
        "name": COURSE,
        "url": "http://127.0.0.1:9999",
        "command": ["jupyterhub-singleuser", "--debug", "--port=9999"],
        "user": "grader-" + COURSE,
        "cwd": os.environ.get("COURSE_ROOT", "/srv/attention-course"),
        # the hub does not pass its own environment to services: hand on what the course's
        # nbgrader_config.py reads, so the formgrader uses the same gradebook as `course grade`
        "environment": {
            "COURSE_PROFILE": "ci",
            "JUPYTERHUB_SERVICE_NAME": COURSE,
            # COURSE_DASK_SCHEDULER: `course grade` in the service grades on that Dask cluster (deploy/dask/)
            **{key: os.environ[key] for key in ("COURSE_ROOT", "COURSE_BASE_CONFIG", "COURSE_DB_URL", "NBGRADER_EXCHANGE",
                                                "COURSE_DASK_SCHEDULER")
               if key in os.environ},
        },
    }
]

# Who may use the formgrader: instructors and graders (JupyterHub 2+ roles).
c.JupyterHub.load_groups = {
    f"formgrade-{COURSE}": {"users": sorted(INSTRUCTORS | GRADERS)},
    f"nbgrader-{COURSE}": {"users": []},  # students: add the roster here or sync it from the LMS
}
c.JupyterHub.load_roles = [
    {
        "name": f"formgrade-{COURSE}",
        "groups": [f"formgrade-{COURSE}"],
        "scopes": [f"access:services!service={COURSE}"],
    },
    {
        "name": "server",
        "scopes": ["inherit"],  # let each user's server list the groups (courses) it belongs to
    },
]
