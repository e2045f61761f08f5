"""The jupyter_server extension that hosts DeerFlow.

One harness runtime per server (:class:`~deerflow_jupyter.host.HarnessHost`),
the API under ``{base_url}deerflow/api/``, and the environment a kernel
needs to reach it (``DEERFLOW_SERVER_URL`` / ``DEERFLOW_SERVER_TOKEN``), so
``%%deerflow`` in a notebook talks to the same runtime as the chat panel.

Nothing here opens a store: a corrupt or unreadable ``deerflow.db`` or
``checkpoints.db`` must not stop the extension from loading.  Requests that
need the store answer 503 with the reason, and ``GET {base_url}deerflow/api/health``
says which file is broken and how to repair it.

Stopping, by SIGTERM or SIGINT, with or without a terminal, ends active runs
as ``interrupted: server stopped`` (their last checkpoint kept, to continue
with ``deerflow run --thread T --continue``) and closes kernels, sandboxes,
browsers, MCP servers and stores (:mod:`deerflow_jupyter.shutdown`).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from jupyter_server.extension.application import ExtensionApp
from traitlets import Bool, Float, Unicode
from traitlets.config import Config

from deerflow.config.paths import check_id, default_user
from deerflow.notebooks.access import LiveDocuments, NotebookAccess
from deerflow.notebooks.contents import ContentsNotebookAccess
from deerflow_jupyter.handlers import ROUTES
from deerflow_jupyter.handlers.base import NotFoundRoute
from deerflow_jupyter.handlers.health import HealthHandler
from deerflow_jupyter.handlers.plugins import plugin_routes
from deerflow_jupyter.host import HarnessHost
from deerflow_jupyter.scheduler import ServerScheduler
from deerflow_jupyter.shutdown import STOP_REASON, LastResortCleanup, route_sigint_to_stop

if TYPE_CHECKING:
    from jupyter_server.serverapp import ServerApp

API_PREFIX = "/deerflow/api"
PERSONA_ID = "jupyter-ai-personas::deerflow_jupyter::DeerFlowPersona"


class DeerFlowExtension(ExtensionApp):
    """DeerFlow agent harness inside Jupyter."""

    name = "deerflow_jupyter"
    load_other_extensions = True

    config_path = Unicode(
        None, allow_none=True, config=True,
        help="config.yaml to use (default: $DEERFLOW_CONFIG, ./config.yaml, $DEERFLOW_HOME/config.yaml).",
    )
    home = Unicode(None, allow_none=True, config=True, help="DEERFLOW_HOME (default: $DEERFLOW_HOME or ~/.deerflow).")
    single_user = Bool(
        True, config=True,
        help="Treat every authenticated request as the server's owner (Jupyter's one-server-per-person "
        "model). Set False with an identity provider that distinguishes users: threads then belong to "
        "each Jupyter username, and another user's thread is a 404.",
    )
    owner = Unicode(None, allow_none=True, config=True, help="DeerFlow user id of the owner in single-user mode "
                    "(default: the Hub user $JUPYTERHUB_USER under JupyterHub, else $DEERFLOW_USER or the OS user).")
    export_kernel_env = Bool(
        True, config=True,
        help="Export DEERFLOW_SERVER_URL/DEERFLOW_SERVER_TOKEN so kernels started by this server can reach the API.",
    )

    scheduler_enabled = Bool(
        True, config=True,
        help="Run due scheduled runs (`deerflow schedule`, /deerflow/api/schedules) in the background: "
        "the owner's only in single-user mode, every user's otherwise. Several servers may share one "
        "DEERFLOW_HOME: a schedule never runs twice at once.",
    )
    scheduler_interval = Float(30.0, config=True, help="Seconds between checks for due schedules.")
    default_persona = Bool(
        True, config=True,
        help="Make DeerFlow the chat's default persona unless PersonaManager.default_persona_id is "
        "configured (set False to keep the persona manager's own default).",
    )

    def _link_jupyter_server_extension(self, serverapp: ServerApp) -> None:
        """Link, then make DeerFlow the chat's default persona.

        Why here: jupyter_server reads ``jupyter_server_config.d/*.json`` only for
        ``jpserver_extensions``, so a ``PersonaManager`` section installed there is ignored.
        Extensions link in name order and ``deerflow_jupyter`` comes before
        ``jupyter_ai_persona_manager``, which copies the server's config when it links: setting
        the server's config now is what it reads.  A default the user configured is kept.
        """
        super()._link_jupyter_server_extension(serverapp)
        if self.default_persona:
            set_default_persona(serverapp.config)

    def initialize_settings(self) -> None:
        self.deerflow_host = HarnessHost(config_path=self.config_path, home=self.home,
                                         notebooks=self._notebook_access())
        owner = server_owner(self.owner, os.environ)
        self.deerflow_scheduler = ServerScheduler(self.deerflow_host, interval=self.scheduler_interval,
                                                  user_id=owner if self.single_user else None)
        self.settings.update({
            "deerflow_host": self.deerflow_host,
            "deerflow_scheduler": self.deerflow_scheduler,
            "deerflow_single_user": self.single_user,
            "deerflow_owner": owner,
        })
        if self.export_kernel_env:
            self._export_kernel_env()
        self._log_runs_with_server()

    def _notebook_access(self) -> NotebookAccess | None:
        """The owner's notebooks through this server's ContentsManager (single-user mode only:
        with several users behind one server, the root is not any one user's)."""
        serverapp = self.serverapp
        manager = getattr(serverapp, "contents_manager", None)
        if not self.single_user or serverapp is None or manager is None:
            return None
        live = LiveDocuments(lambda: serverapp.web_app.settings.get("jupyter_server_ydoc"))
        access = ContentsNotebookAccess(manager, live)  # open notebooks live under jupyter-collaboration
        access.watch()  # a notebook opened or saved is parsed then, not by the first run in it
        return access

    def initialize_handlers(self) -> None:
        self.handlers.extend((f"{API_PREFIX}{pattern}", handler) for pattern, handler in ROUTES)
        self.handlers.append((f"{API_PREFIX}/health", HealthHandler))  # config, storage, sandbox: what is broken
        # startup plugins' routes, behind Jupyter auth (plugins run with this server's privileges)
        self.handlers.extend(plugin_routes(self.deerflow_host.plugins(), API_PREFIX))
        self.handlers.append((f"{API_PREFIX}/.*", NotFoundRoute))  # last: a JSON 404 for any other API path

    def _log_runs_with_server(self) -> None:
        """DeerFlow's logs per ``logging`` in the config (:mod:`deerflow.logs`), secrets redacted.

        ``json``: every ``deerflow.*`` record is one JSON object per line on stderr.
        ``text``: the one line per finished run (``deerflow.runs``) goes where the server logs, at INFO.
        A broken config logs as text; the API reports the config error.
        """
        from deerflow.errors import ConfigError
        from deerflow.logs import RedactFilter, config_secrets, install_server_logging

        try:
            config = self.deerflow_host.loaded().config
        except ConfigError:
            config = None
        settings = config.logging if config is not None else None
        level = getattr(logging, settings.level.upper()) if settings else logging.INFO
        if settings is not None and install_server_logging(config, fmt=settings.format, level=level):
            return
        server_log = getattr(self.serverapp, "log", None)
        runs = logging.getLogger("deerflow.runs")
        if server_log is None or runs.handlers:
            return
        for handler in server_log.handlers:
            runs.addHandler(handler)
        if config is not None:
            runs.addFilter(RedactFilter(config_secrets(config)))  # the run line is logged on this logger
        runs.setLevel(logging.INFO)
        runs.propagate = False

    def _export_kernel_env(self) -> None:
        server = self.serverapp
        if server is None:
            return
        os.environ["DEERFLOW_SERVER_URL"] = server.connection_url
        token = getattr(server.identity_provider, "token", "") or ""
        if token:
            os.environ["DEERFLOW_SERVER_TOKEN"] = token

    _last_resort: LastResortCleanup | None = None

    async def _start_jupyter_server_extension(self, serverapp: object) -> None:
        if route_sigint_to_stop(serverapp):
            self.log.info("DeerFlow: SIGINT stops this server cleanly (no terminal)")
        cleanup = getattr(serverapp, "_cleanup", None)
        if cleanup is not None:
            self._last_resort = LastResortCleanup(asyncio.get_running_loop(), cleanup)
            self._last_resort.install()
        if self.scheduler_enabled:
            self.deerflow_scheduler.start()

    async def stop_extension(self) -> None:
        if self._last_resort is not None:
            self._last_resort.done = True
        await self.deerflow_scheduler.stop()
        await self.deerflow_host.close(reason=STOP_REASON)


def server_owner(configured: str | None, env: Mapping[str, str]) -> str:
    """The DeerFlow user who owns this server's threads in single-user mode.

    Under JupyterHub the Hub says whose server this is (``JUPYTERHUB_USER``, set
    by the spawner, which the user cannot change): it wins over ``DEERFLOW_USER``
    and the OS user, which several Hub users share with a local-process spawner.
    An operator's explicit ``c.DeerFlowExtension.owner`` wins over everything.

    Raises:
        UnsafeIdError: the name cannot be a DeerFlow user id (the message says why).
    """
    owner = configured or default_user(env)  # $JUPYTERHUB_USER, $DEERFLOW_USER, the OS user
    return check_id(owner, kind="user")


def set_default_persona(config: Config) -> bool:
    """Set ``PersonaManager.default_persona_id`` to DeerFlow's unless it is configured; True when set."""
    if "PersonaManager" in config and "default_persona_id" in config["PersonaManager"]:
        return False
    config.PersonaManager.default_persona_id = PERSONA_ID
    return True
