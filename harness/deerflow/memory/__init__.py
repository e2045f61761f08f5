"""Long-term memory per user: facts in LangGraph's ``BaseStore``, learned after runs, shown as data.

* :mod:`.book` — a user's (and custom agent's) facts: list, add, forget, rank;
* :mod:`.guard` — what may become a fact (no orders, no data URLs, no markup);
* :mod:`.extraction` — sources (user messages, final answers), the model's proposals;
* :mod:`.prompt` — the ``<user_memory>`` block of the system prompt;
* :mod:`.service` — the host's store, injection and debounced extraction;
* :mod:`.store` — opening ``SqliteStore`` / ``PostgresStore``.
"""

from typing import TYPE_CHECKING

from deerflow._lazy import lazy_exports

if TYPE_CHECKING:  # the names for type checkers; at run time __getattr__ imports them on first use
    from deerflow.memory.book import CATEGORIES, Fact, MemoryBook, namespace
    from deerflow.memory.extraction import Applied, Exchange
    from deerflow.memory.service import MemoryService, memory_enabled, note_settled_run

# Imported on first use: ``deerflow --help`` wires in the ``memory`` command without LangGraph's store.
_EXPORTS = {
    "CATEGORIES": "book", "Fact": "book", "MemoryBook": "book", "namespace": "book",
    "Applied": "extraction", "Exchange": "extraction",
    "MemoryService": "service", "memory_enabled": "service",
    "note_settled_run": "service",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)

__all__ = ["CATEGORIES", "Applied", "Exchange", "Fact", "MemoryBook", "MemoryService",
           "memory_enabled", "namespace", "note_settled_run"]
