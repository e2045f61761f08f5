"""The ``messages`` stream's "already seen" bookkeeping, incremental on DeerFlow's message lists.

With ``stream_mode="messages"`` LangGraph's ``StreamMessagesHandler`` marks every
message of a node's input as seen when the node starts (so that it is not streamed
again as the node's output): a walk over the whole history at every node start, the
largest per-step cost that grew with the thread (~2,000 ``isinstance`` checks and set
insertions per node on a 2,000-message thread).

The thread's ``messages`` channel holds :class:`~deerflow.agents.message_reducer.IndexedMessages`
lists, and lists of one *lineage* only ever grow by appends (a replacement in place, a
removal or a reset starts a new lineage).  :func:`install` makes the handler remember,
per handler and lineage (``agents.lineage``), how far it has already marked; a later list
of the same lineage continuing that one only needs its tail marked.  Anything else (plain
lists, other values, a list that does not continue the remembered one) takes LangGraph's
own walk, so the set of
seen ids is exactly what the original computes.  Installed once per process, for the
handler class only; tests compare it with the original.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from deerflow.agents.lineage import LineageMemo

_installed = False
_MEMO = "_deerflow_seen_memo"


def _add_ids(seen: set[str], value: Sequence[Any], start: int) -> None:
    for index in range(start, len(value)):
        item = value[index]
        if isinstance(item, BaseMessage) and item.id is not None:
            seen.add(item.id)


def mark_seen(handler: Any, value: Sequence[Any]) -> int:
    """Add the ids of the messages in ``value`` to ``handler.seen`` (only the unseen tail when known).

    Returns how many items were walked.
    """
    memo: LineageMemo[set[str]] | None = handler.__dict__.get(_MEMO)
    if memo is None:  # per handler: a lineage read by one stream is not marked in another's set
        memo = handler.__dict__[_MEMO] = LineageMemo(lambda: handler.seen, _add_ids)
    before = memo.walked
    known, _ = memo.advance(value, lambda seen: None)
    if known:
        return memo.walked - before
    _add_ids(handler.seen, value, 0)  # LangGraph's own walk
    return len(value)


def install() -> None:
    """Give ``StreamMessagesHandler.on_chain_start`` the incremental walk (idempotent)."""
    global _installed
    if _installed:
        return
    from langgraph.constants import TAG_HIDDEN
    from langgraph.pregel import _messages

    handler_cls = _messages.StreamMessagesHandler
    state_values, graph_namespace = _messages._state_values, _messages.graph_namespace

    def on_chain_start(self: Any, serialized: dict[str, Any], inputs: dict[str, Any], *, run_id: Any,
                       parent_run_id: Any = None, tags: list[str] | None = None,
                       metadata: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        """LangGraph's ``on_chain_start``, the message walk through :func:`mark_seen`."""
        if metadata and kwargs.get("name") == metadata.get("langgraph_node") and (not tags or TAG_HIDDEN not in tags):
            ns = graph_namespace(metadata)
            if not self.subgraphs and len(ns) > 0 and ns != self.parent_ns:
                return
            self.metadata[run_id] = (ns, metadata)
            for value in state_values(inputs):
                if isinstance(value, BaseMessage):
                    if value.id is not None:
                        self.seen.add(value.id)
                elif isinstance(value, Sequence) and not isinstance(value, str):
                    mark_seen(self, value)

    vars(on_chain_start)["__wrapped__"] = handler_cls.on_chain_start  # LangGraph's own, for the test's check
    handler_cls.on_chain_start = on_chain_start
    _installed = True
