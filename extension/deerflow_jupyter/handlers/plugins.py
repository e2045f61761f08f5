"""Plugin routes, always behind Jupyter auth; and the read-only plugin report.

    GET /deerflow/api/plugins                      {"plugins": [report, ...]}  (loaded / failed / disabled)
    *   /deerflow/api/plugins/<name><pattern>      a route a plugin contributed

A plugin contributes a ``JupyterHandler`` subclass; :func:`guarded` wraps it so
every request is authenticated (no user → 403) and authorized on the
``deerflow`` resource with the HTTP method's action, before the plugin's code
runs, whatever decorators the plugin forgot.  Plugins are configured in
``config.yaml`` only: there is no route that adds, changes or reloads one.
"""

from __future__ import annotations

import logging
from typing import Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.auth.utils import HTTP_METHOD_TO_AUTH_ACTION
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.utils import ensure_async
from tornado import web

from deerflow.plugins import PluginSet
from deerflow_jupyter.handlers.base import AUTH_RESOURCE, DeerFlowHandler

logger = logging.getLogger(__name__)


class PluginsHandler(DeerFlowHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        self.send_json({"plugins": [r.to_dict() for r in self.host.plugins().reports]})


def guarded(plugin: str, handler: type) -> type:
    """``handler`` with authentication and ``deerflow`` authorization enforced in ``prepare``.

    Raises:
        TypeError: ``handler`` is not a jupyter_server ``JupyterHandler`` subclass.
    """
    if not (isinstance(handler, type) and issubclass(handler, JupyterHandler)):
        raise TypeError(f"plugin {plugin}: route handlers must subclass jupyter_server's JupyterHandler")

    class Guarded(handler):
        auth_resource = AUTH_RESOURCE

        async def prepare(self, *args: Any, **kwargs: Any) -> None:
            await ensure_async(super().prepare(*args, **kwargs))
            if self._finished:
                return
            user = self.current_user
            action = HTTP_METHOD_TO_AUTH_ACTION.get(self.request.method.upper(), "write")
            if not user or not await ensure_async(self.authorizer.is_authorized(self, user, action, AUTH_RESOURCE)):
                raise web.HTTPError(403, f"not authorized to {action} plugin {plugin}")

    Guarded.__name__ = Guarded.__qualname__ = f"Guarded{handler.__name__}"
    return Guarded


def plugin_routes(plugins: PluginSet, prefix: str) -> list[tuple[str, type]]:
    """Every contributed route under ``{prefix}/plugins/<name>``; a bad handler is skipped and logged."""
    routes = []
    for name, pattern, handler in plugins.routes():
        try:
            routes.append((f"{prefix}/plugins/{name}{pattern}", guarded(name, handler)))
        except TypeError as exc:
            logger.error("%s; the route %s is not served", exc, pattern)
    return routes


__all__ = ["PluginsHandler", "guarded", "plugin_routes"]
