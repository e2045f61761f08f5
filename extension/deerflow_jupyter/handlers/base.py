"""What every DeerFlow API handler shares: auth, ownership, JSON bodies and errors.

Every route is authenticated by jupyter_server (``@web.authenticated``) and
authorized against the ``deerflow`` resource (``@authorized``); XSRF is
enforced by jupyter_server for cookie-authenticated writes.

Errors are JSON ``{"detail": ..., "message": ...}`` with a one-line message,
and :func:`error_response` is the one place that decides them:

* bad input a person sent (ids, bodies, names, harness :class:`UserError`) is
  a 4xx with its reason, logged as a warning on one line;
* anything else is a runtime failure: logged at ERROR with its traceback and
  the request's context, answered 500 with no internals in the body.

Ids in the URL are checked before a handler runs (:meth:`DeerFlowHandler.prepare`):
a malformed thread or run id is a 404 worded like an unknown one, since to the
caller it is exactly that.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable
from http.client import responses
from typing import Any, TypeVar

from jupyter_server.base.handlers import APIHandler
from jupyter_server.extension.handler import ExtensionHandlerMixin
from pydantic import BaseModel, ValidationError
from tornado import web

from deerflow.config.paths import UnsafeIdError, check_id
from deerflow.errors import (
    BudgetSpent,
    ConfigError,
    Conflict,
    NotFoundError,
    ToolFailure,
    UserError,
)
from deerflow.persistence.sqlite import StorageError
from deerflow.runs.manager import RunManager
from deerflow_jupyter.host import HarnessHost

AUTH_RESOURCE = "deerflow"
M = TypeVar("M", bound=BaseModel)

MAX_JSON_BYTES = 16 * 1024 * 1024
"""Largest JSON body parsed (uploads are raw or multipart, not JSON); parsing runs on the event loop."""
MAX_JSON_DEPTH = 64
"""Deepest nesting accepted in a JSON body: deeper data would overflow recursion further on."""
MAX_DETAIL_CHARS = 300
_RUN_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


# jupyter_server's mixin declares `settings` as an attribute where tornado's handler has a property
class DeerFlowHandler(ExtensionHandlerMixin, APIHandler):  # pyright: ignore[reportIncompatibleVariableOverride]
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

    async def prepare(self) -> None:
        """Jupyter's auth first, then the URL's ids (only for an authenticated caller)."""
        result = super().prepare()
        if isinstance(result, Awaitable):
            await result
        if not self._finished and self.current_user is not None:
            check_path_ids(self.path_kwargs)

    def body(self, model: type[M]) -> M:
        """Parse and validate the JSON body (400 on bad JSON, 422 on invalid fields)."""
        data = parse_json(self.request.body or b"{}")
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "body"
            raise web.HTTPError(422, "%s", f"invalid request body at '{where}': {first['msg']}") from None

    def send_json(self, payload: Any, status: int = 200) -> None:
        from deerflow_jupyter.wire import dumps

        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(dumps(payload))

    def _handle_request_exception(self, e: BaseException) -> None:
        """Every exception a handler raises ends here: one log line or one logged failure, one JSON answer."""
        if isinstance(e, web.Finish):
            super()._handle_request_exception(e)
            return
        status, detail = error_response(e)
        if status >= 500 and not isinstance(e, (web.HTTPError, ConfigError, StorageError)):
            self.log.error("DeerFlow request failed: %s (user %s)", self._request_summary(),
                           self._user_for_log(), exc_info=e)
        elif status >= 500:
            self.log.error("%d %s: %s", status, self._request_summary(), detail)
        else:
            self.log.warning("%d %s: %s", status, self._request_summary(), detail)
        if not self._finished:
            self.send_error(status, detail=detail)  # clears headers set before the failure

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        detail = kwargs.get("detail")
        if detail is None:  # raised by tornado itself (e.g. 405) or by jupyter_server's auth
            exc = kwargs.get("exc_info", (None, None, None))[1]
            detail = error_response(exc)[1] if isinstance(exc, BaseException) else self._reason
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"detail": detail, "message": detail}))

    def _user_for_log(self) -> str:
        user = self.current_user
        return getattr(user, "username", None) or "anonymous"


class NotFoundRoute(DeerFlowHandler):
    """Any path under the API that no route matches (an empty id, a typo): a JSON 404, not Jupyter's page."""

    @web.authenticated
    async def get(self, *_: str) -> None:
        raise web.HTTPError(404, "%s", "no such DeerFlow API route")

    post = put = delete = patch = get


CODE_STATUS = {
    "not_found": 404, "no_browser_session": 404, "browser_unavailable": 404,
    "forbidden": 403,
    "conflict": 409, "unavailable": 409, "live_view_busy": 409,
    "upload_rejected": 422,
    "too_large": 413, "export_too_large": 413,
}
"""The status of a typed error's ``code`` (a :class:`ToolFailure`'s, a :class:`UserError` kind's);
any other code is bad input, 422."""


def error_response(exc: BaseException | None) -> tuple[int, str]:
    """The status and one-line detail for an exception: the one map from errors to answers."""
    if isinstance(exc, web.HTTPError):
        return exc.status_code, one_line(_http_message(exc))
    if isinstance(exc, NotFoundError):
        return 404, one_line(str(exc))
    if isinstance(exc, StorageError):  # a broken store file: the service is unavailable until it is repaired
        return 503, one_line(str(exc))
    if isinstance(exc, ConfigError):
        return 500, one_line(f"DeerFlow configuration error: {exc}")
    if isinstance(exc, BudgetSpent):  # too many tokens today: 429, as for any rate limit
        return 429, one_line(str(exc))
    if isinstance(exc, Conflict):  # Busy and ThreadBusy included
        return 409, one_line(str(exc))
    if isinstance(exc, UserError):
        return CODE_STATUS.get(exc.code or "", 422), one_line(str(exc))
    if isinstance(exc, UnsafeIdError):
        return 400, "invalid id: use 1-128 letters, digits, '_', '-', '.', '@' (not starting with '.' or '-')"
    if isinstance(exc, ToolFailure):
        return CODE_STATUS.get(exc.code, 422), one_line(exc.message)
    return 500, "internal error in DeerFlow; the server log has the details"


def _http_message(exc: web.HTTPError) -> str:
    try:
        message = exc.get_message()  # tornado >= 6.5: the message as raised, '%' unescaped
    except (TypeError, ValueError):  # a message with '%' and args that do not fit it
        message = f"{exc.log_message} {exc.args}"
    return message or exc.reason or responses.get(exc.status_code, "error")


def one_line(text: str, limit: int = MAX_DETAIL_CHARS) -> str:
    """``text`` on one line, at most ``limit`` characters: safe to log and to show."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def short_id(value: str) -> str:
    """An id as quoted in an error message: repr'd (no control characters) and bounded."""
    return repr(value) if len(value) <= 40 else repr(value[:40]) + "…"


def check_path_ids(path_kwargs: dict[str, str]) -> None:
    """Refuse malformed ids in the URL as unknown ones (404) before any handler code sees them.

    The routes accept any segment so that every odd id reaches this check and
    gets DeerFlow's JSON answer rather than Jupyter's HTML page.
    """
    thread_id = path_kwargs.get("thread_id")
    if thread_id is not None:
        try:
            check_id(thread_id, kind="thread")
        except UnsafeIdError:
            raise NotFoundError(f"unknown thread {short_id(thread_id)}") from None
    run_id = path_kwargs.get("run_id")
    if run_id is not None and not _RUN_ID.fullmatch(run_id):
        raise NotFoundError(f"unknown run {short_id(run_id)}")


def parse_json(raw: bytes) -> Any:
    """A request body as JSON: 400 for oversized, non-UTF-8, malformed or too deeply nested input.

    ``json.loads`` recurses in C and stops with ``RecursionError`` near
    Python's recursion limit; nesting under that limit but deeper than
    :data:`MAX_JSON_DEPTH` is refused too, because validation and
    serialisation further on recurse in Python.
    """
    if len(raw) > MAX_JSON_BYTES:
        raise web.HTTPError(413, "%s", f"JSON body over {MAX_JSON_BYTES // (1024 * 1024)} MB")
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise web.HTTPError(400, "%s", "request body is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise web.HTTPError(400, "%s", f"request body is not valid JSON: {exc.msg} (line {exc.lineno})") from None
    except RecursionError:
        raise web.HTTPError(400, "%s", f"JSON body nested deeper than {MAX_JSON_DEPTH} levels") from None
    if json_depth(data, limit=MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
        raise web.HTTPError(400, "%s", f"JSON body nested deeper than {MAX_JSON_DEPTH} levels")
    return data


def json_depth(value: Any, *, limit: int) -> int:
    """Nesting depth of parsed JSON, iteratively; stops counting once past ``limit``."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, (dict, list)):
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def _safe_user(username: str) -> str:
    return check_id(username, kind="user")
