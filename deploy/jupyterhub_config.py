# JupyterHub for a lab, with DeerFlow in every user's server (docs/DEPLOYMENT.md explains each part).
# tests/integration/test_jupyterhub.py loads this very file and overrides only what a test machine
# cannot have: the authenticator, the spawner (no system users) and loopback ports.
import os
import sys

c = get_config()  # noqa: F821 - provided by JupyterHub when it loads this file

# Where DeerFlow keeps its state and which config every server uses (the DEERFLOW_HUB_* variables
# only let a test or a staging Hub point elsewhere).  One DEERFLOW_HOME for the whole Hub: each
# server's threads and schedules belong to its Hub user (another user's thread is a 404), and the
# batch queue in it is shared by all servers.
DEERFLOW_HOME = os.environ.get("DEERFLOW_HUB_HOME", "/srv/deerflow/home")
DEERFLOW_CONFIG = os.environ.get("DEERFLOW_HUB_CONFIG", "/srv/deerflow/config.yaml")

c.JupyterHub.bind_url = os.environ.get("DEERFLOW_HUB_URL", "http://:8000")
c.JupyterHub.db_url = os.environ.get("DEERFLOW_HUB_DB", "sqlite:////srv/jupyterhub/jupyterhub.sqlite")
c.JupyterHub.cookie_secret_file = os.environ.get("DEERFLOW_HUB_COOKIE_SECRET", "/srv/jupyterhub/cookie_secret")

# Single-user servers: JupyterLab from the environment the Hub runs in (deerflow-notebook installed
# there enables the deerflow_jupyter extension).  The extension takes its user from the Hub
# (JUPYTERHUB_USER) and serves under the Hub's per-user URL with the Hub's auth.
c.Spawner.cmd = [sys.executable, "-m", "jupyterhub.singleuser"]
c.Spawner.default_url = "/lab"
c.Spawner.environment = {
    "DEERFLOW_HOME": DEERFLOW_HOME,
    "DEERFLOW_CONFIG": DEERFLOW_CONFIG,
}
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 90
# A clean stop closes the agents' kernels and sandboxes, which a SIGKILL would orphan: give it
# time (JupyterLab + DeerFlow took 3.5-5 s to exit on a busy 2-core machine; the default is 5 s).
c.LocalProcessSpawner.term_timeout = 30

# Batch workers drain the durable batch queue (`batch_task`); the Hub starts and restarts this one.
# More workers on other hosts: `deerflow batches worker` with the same config (PostgreSQL queue).
c.JupyterHub.services = [
    {
        "name": "deerflow-batches",
        "command": [os.path.join(os.path.dirname(sys.executable), "deerflow"),
                    "--config", DEERFLOW_CONFIG, "--home", DEERFLOW_HOME, "batches", "worker"],
        "environment": {"DEERFLOW_HOME": DEERFLOW_HOME, "DEERFLOW_CONFIG": DEERFLOW_CONFIG},
    },
]
