"""nbgrader for the course account on Zero to JupyterHub (the grader service, deploy/z2jh/grader-service.yaml).

deploy/jupyterhub/nbgrader_config.py (the repository's configuration, the course directory, the
PostgreSQL gradebook of COURSE_DB_URL) with ngshare as the exchange instead of a shared folder:
release, collect and release_feedback go to the ngshare service through the hub's proxy, with the
token the grader service holds (JUPYTERHUB_API_TOKEN), which ngshare knows as the course's
instructor. Install it as the course's nbgrader_config.py (README.md beside it);
tests/course/test_ngshare_exchange.py grades through it.
"""

import os

# ngshare_exchange reads who is running it when imported (JUPYTERHUB_USER, else USER); a hub service
# has neither. ngshare itself knows the caller by the token.
os.environ.setdefault("JUPYTERHUB_USER", os.environ.get("JUPYTERHUB_SERVICE_NAME", "attention-transformers"))

from ngshare_exchange import configureExchange  # noqa: E402

c = get_config()  # noqa: F821

root = os.environ.get("COURSE_ROOT", "/srv/attention-course")
load_subconfig(os.environ.get("COURSE_HUB_CONFIG", os.path.join(root, "deploy", "jupyterhub", "nbgrader_config.py")))  # noqa: F821

# the exchange: ngshare, the hub service of config.yaml (hub.services.ngshare), through the proxy
configureExchange(c, os.environ.get("NGSHARE_URL", "http://proxy-public/services/ngshare"))
