"""The middlewares only a subagent's graph has (one per module).

Their order in the child chain lives in :func:`deerflow.subagents.child_agent.child_middlewares`.
"""

from deerflow.subagents.middlewares.guard import SubagentToolGuard
from deerflow.subagents.middlewares.limits import SubagentLimitsMiddleware
from deerflow.subagents.middlewares.receipts import ReceiptMiddleware

__all__ = ["ReceiptMiddleware", "SubagentLimitsMiddleware", "SubagentToolGuard"]
