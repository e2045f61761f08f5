"""Long-term memory per user: facts in LangGraph's ``BaseStore``, learned after runs, shown as data.

* :mod:`.book` — a user's (and custom agent's) facts: list, add, forget, rank;
* :mod:`.guard` — what may become a fact (no orders, no data URLs, no markup);
* :mod:`.extraction` — sources (user messages, final answers), the model's proposals;
* :mod:`.prompt` — the ``<user_memory>`` block of the system prompt;
* :mod:`.service` — the host's store, injection and debounced extraction;
* :mod:`.store` — opening ``SqliteStore`` / ``PostgresStore``.
"""

from deerflow.memory.book import CATEGORIES, Fact, MemoryBook, namespace
from deerflow.memory.extraction import Applied, Exchange
from deerflow.memory.service import MEMORY_SERVICE, MemoryService, memory_enabled, note_settled_run

__all__ = ["CATEGORIES", "MEMORY_SERVICE", "Applied", "Exchange", "Fact", "MemoryBook", "MemoryService",
           "memory_enabled", "namespace", "note_settled_run"]
