"""What every DeerFlow API handler shares: auth, ownership, JSON bodies and errors.

Every route is authenticated by jupyter_server (``@web.authenticated``) and
authorized against the ``deerflow`` resource (``@authorized``); XSRF is
enforced by jupyter_server for cookie-authenticated writes.  Errors are JSON
``{"detail": ..., "message": ...}``: user errors 4xx with their message,
runtime failures 500 without internals.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from jupyter_server.base.handlers import APIHandler
from jupyter_server.extension.handler import ExtensionHandlerMixin
from pydantic import BaseModel, ValidationError
from tornado import web

from deerflow.errors import Busy, ConfigError, NotFoundError, UserError
from deerflow.runtime.manager import RunManager
from deerflow.tools.errors import ToolFailure
from deerflow_jupyter.host import HarnessHost

AUTH_RESOURCE = "deerflow"
M = TypeVar("M", bound=BaseModel)


class DeerFlowHandler(ExtensionHandlerMixin, APIHandler):
    """Base of all DeerFlow routes."""

    auth_resource = AUTH_RESOURCE

    @property
    def host(self) -> HarnessHost:
        return self.settings["deerflow_host"]

    async def manager(self) -> RunManager:
        return await self.host.manager()

    @property
    def user_id(self) -> str:
        """The DeerFlow user of this request.

        In single-user mode (Jupyter's default: one server per person) every
        authenticated request belongs to the server's owner; otherwise the
        Jupyter user's ``username`` is used, so users never see each other's threads.
        """
        if self.settings.get("deerflow_single_user", True):
            return self.settings["deerflow_owner"]
        return _safe_user(self.current_user.username)

    def body(self, model: type[M]) -> M:
        """Parse and validate the JSON body (400 on bad JSON, 422 on invalid fields)."""
        raw = self.request.body or b"{}"
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise web.HTTPError(400, f"request body is not valid JSON: {exc.msg} (line {exc.lineno})") from None
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "body"
            raise web.HTTPError(422, f"invalid request body at '{where}': {first['msg']}") from None

    def send_json(self, payload: Any, status: int = 200) -> None:
        from deerflow_jupyter.wire import dumps

        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(dumps(payload))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        exc = _http_error(exc) or exc if isinstance(exc, BaseException) else exc
        message = exc.log_message if isinstance(exc, web.HTTPError) and exc.log_message else self._reason
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"detail": message, "message": message}))

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        if isinstance(value, (UserError, ToolFailure)):
            return
        super().log_exception(typ, value, tb)

    def _handle_request_exception(self, e: BaseException) -> None:
        """Map harness errors to HTTP statuses with their own message."""
        mapped = _http_error(e)
        super()._handle_request_exception(mapped or e)


def _http_error(exc: BaseException) -> web.HTTPError | None:
    if isinstance(exc, NotFoundError):
        return web.HTTPError(404, str(exc))
    if isinstance(exc, ConfigError):
        return web.HTTPError(500, f"DeerFlow configuration error: {exc}")
    if isinstance(exc, Busy):
        return web.HTTPError(409, str(exc))
    if isinstance(exc, UserError):
        return web.HTTPError(422, str(exc))
    if isinstance(exc, ToolFailure):
        return web.HTTPError(404 if exc.code == "not_found" else 422, exc.message)
    return None


def _safe_user(username: str) -> str:
    from deerflow.config.paths import check_id

    return check_id(username, kind="user")
