"""Token usage over HTTP: the request's user's own figures, and an admin view for the operator.

    GET /deerflow/api/usage[?by=day|thread|model][&since=YYYY-MM-DD]
        {"user": U, "by": ..., "since": ..., "rows": [{"key", "runs", "total_tokens", ...}]}
    GET /deerflow/api/usage?all_users=true[&by=user|day|thread|model]
        every user's runs (403 unless jupyter_server's authorizer grants the admin resource)

The figures are those of ``deerflow usage`` (:func:`deerflow.runtime.usage.usage_report`):
a row whose calls all came without provider usage has ``total_tokens: null`` (unknown, not 0).

Who is an admin is jupyter_server's business, not DeerFlow's: the admin view needs the
configured ``Authorizer`` to allow ``read`` on :data:`USAGE_ADMIN_RESOURCE`.  Jupyter's
default authorizer and JupyterHub's single-user one allow every action on every resource
to anyone who may use the server; such a blanket grant is not taken as admin (the check
also asks about a resource nobody is granted), so on a shared server nobody sees another
user's figures until the operator configures an authorizer that names admins.
"""

from __future__ import annotations

import inspect
from typing import Any

from jupyter_server.auth.decorator import authorized
from tornado import web

from deerflow.runtime.usage import usage_report
from deerflow_jupyter.handlers.base import DeerFlowHandler

USAGE_ADMIN_RESOURCE = "deerflow_usage_admin"
_NOBODY_RESOURCE = "deerflow_no_such_resource"  # an authorizer granting this grants everything
_GROUPINGS = ("day", "thread", "model", "user")


async def grants_admin(authorizer: Any, handler: Any, user: Any) -> bool:
    """True when ``authorizer`` grants the usage admin resource specifically, not everything to everyone."""
    if user is None or not await _allowed(authorizer, handler, user, USAGE_ADMIN_RESOURCE):
        return False
    return not await _allowed(authorizer, handler, user, _NOBODY_RESOURCE)


async def _allowed(authorizer: Any, handler: Any, user: Any, resource: str) -> bool:
    """``is_authorized`` may answer now or later (jupyter_server allows both)."""
    answer = authorizer.is_authorized(handler, user, "read", resource)
    return bool(await answer if inspect.isawaitable(answer) else answer)


class UsageHandler(DeerFlowHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        from deerflow.runtime.usage import parse_since

        by = self.get_query_argument("by", "day")
        if by not in _GROUPINGS:
            raise web.HTTPError(400, "%s", f"by must be one of {', '.join(_GROUPINGS)}")
        since_text = self.get_query_argument("since", None)
        try:
            since = parse_since(since_text)
        except ValueError as exc:
            raise web.HTTPError(400, "%s", str(exc).replace("--since", "since")) from None
        all_users = self.get_query_argument("all_users", "false").lower() in {"1", "true", "yes"}
        if all_users and not await grants_admin(self.authorizer, self, self.current_user):
            raise web.HTTPError(403, "the all-users usage view needs the server's admin permission "
                                f"(an authorizer that grants read on {USAGE_ADMIN_RESOURCE})")
        manager = await self.manager()
        user = None if all_users else self.user_id
        runs = await manager.runs_since(since, user_id=user)
        rows = usage_report(runs, by=by)
        self.send_json({"user": user, "by": by, "since": since_text, "rows": [r.to_dict() for r in rows]})
