"""The ``messages`` stream's "already seen" bookkeeping, incremental on DeerFlow's message lists.

With ``stream_mode="messages"`` LangGraph's ``StreamMessagesHandler`` marks every
message of a node's input as seen when the node starts (so that it is not streamed
again as the node's output): a walk over the whole history at every node start, the
largest per-step cost that grew with the thread (~2,000 ``isinstance`` checks and set
insertions per node on a 2,000-message thread).

The thread's ``messages`` channel holds :class:`~deerflow.agents.message_reducer.IndexedMessages`
lists, and lists of one *lineage* only ever grow by appends (a replacement in place, a
removal or a reset starts a new lineage).  :func:`install` makes the
handler remember, per handler and lineage, how long a prefix it has already marked and
the id at its end; a later list of the same lineage whose message at that position has
that id only needs its tail marked.  Anything else (plain lists, other values, a list
that does not continue the remembered prefix) takes LangGraph's own walk, so the set of
seen ids is exactly what the original computes.  Installed once per process, for the
handler class only; tests compare it with the original.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from deerflow.agents.message_reducer import IndexedMessages

_installed = False
_MEMO = "_deerflow_seen_prefix"


def mark_seen(handler: Any, value: Sequence[Any]) -> int:
    """Add the ids of the messages in ``value`` to ``handler.seen`` (only the unseen tail when known).

    Returns how many items were walked.
    """
    start = 0
    memo = getattr(value, "_fold_index", None) if type(value) is IndexedMessages else None
    lineage = memo[3] if memo is not None else None
    if lineage is not None:
        prefixes: dict[int, tuple[object, int, str | None]] = handler.__dict__.setdefault(_MEMO, {})
        known = prefixes.get(id(lineage))
        if known is not None and known[0] is lineage and 0 < known[1] <= len(value) \
                and getattr(value[known[1] - 1], "id", None) == known[2]:
            start = known[1]
        if value:
            prefixes[id(lineage)] = (lineage, len(value), getattr(value[-1], "id", None))
    seen = handler.seen
    for index in range(start, len(value)):
        item = value[index]
        if isinstance(item, BaseMessage) and item.id is not None:
            seen.add(item.id)
    return len(value) - start


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
