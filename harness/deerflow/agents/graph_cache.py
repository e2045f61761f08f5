"""Compiled lead-agent graphs reused across runs that would build the same graph.

``create_agent`` costs tens of milliseconds of CPU per run (LangGraph compiles the
graph, inspects every node and tool signature, LangChain wraps each middleware
hook for tracing), yet two runs of the same user with the same options, config,
model entry, prompt and tool objects build identical graphs.  A compiled graph is
reentrant (LangGraph serves one graph to many threads): everything a run owns
reaches it at call time through ``RunContext`` — identity, paths, services, and
the run's own chat model (:class:`RunModelMiddleware` puts it into every model
request, so a cached graph never calls an earlier run's model).

The key holds everything the graph is built from: the config object, the user
(the authorization policy and its middleware are per user), the model entry, the
system prompt (which names the date, the tools, the skills and the interaction
guidance), the identities of the tool objects, the middleware options and whether
tracing is on.  Tools are keyed by identity and the entry keeps them alive,
so an id in a key can never be reused by another object while the entry lives.
A run with per-run objects bound into its graph (a conversation reader, a custom
agent's tools, MCP tools or notices, plugin middlewares — fresh instances per run by
the plugin contract —, a recording or replaying model) is not cached
(:func:`graph_key` returns None).  The host clears the cache when its config changes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.tools import BaseTool

MAX_GRAPHS = 16


@dataclass(frozen=True)
class _Entry:
    graph: Any
    pinned: tuple[Any, ...]  # the objects whose ids are in the key, kept alive with the entry


class GraphCache:
    """A small LRU of compiled graphs, keyed by :func:`graph_key`; safe across threads."""

    def __init__(self, max_entries: int = MAX_GRAPHS) -> None:
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self._max = max_entries
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable | None, pinned: Sequence[Any], build: Callable[[], Any]) -> Any:
        """The graph for ``key`` (``build()`` on a miss); a ``None`` key always builds, never stores."""
        if key is None:
            return build()
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                return entry.graph
            self.misses += 1
        graph = build()
        with self._lock:
            self._entries[key] = _Entry(graph, tuple(pinned))
            self._entries.move_to_end(key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)
        return graph

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


def tool_identity(tools: Sequence[BaseTool]) -> tuple[tuple[str, int], ...]:
    """The tools as (name, id) pairs: the same objects in the same order, or another key."""
    return tuple((t.name, id(t)) for t in tools)
