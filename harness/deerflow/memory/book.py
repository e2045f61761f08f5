"""A user's facts in LangGraph's ``BaseStore``: list, add, change, forget, rank.

Facts live in the store under the namespace ``("memory", user_id, agent)``:
``agent`` is a custom agent's name, or ``_default`` for the lead agent, so a
custom agent remembers apart from the default one and one user never reads
another's namespace.  The key is the fact's id; the value holds the text
(normalized to one line, stored and injected verbatim), its category,
confidence, source and times.

All methods are synchronous (``SqliteStore`` is); async callers run them with
:func:`asyncio.to_thread`.
"""

from __future__ import annotations

import logging
import math
import re
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from langgraph.store.base import BaseStore

from deerflow.config.paths import check_id
from deerflow.errors import NotFoundError, UserError
from deerflow.memory.guard import markup_reason, normalize_fact_text

logger = logging.getLogger(__name__)

Category = Literal["preference", "context", "project", "skill"]
CATEGORIES: tuple[str, ...] = ("preference", "context", "project", "skill")
DEFAULT_AGENT = "_default"
_LIST_LIMIT = 10_000
_WORD = re.compile(r"[a-z0-9]{3,}")
_STOP = frozenset(["the", "and", "for", "with", "that", "this", "from", "have", "your", "you", "are", "was", "were", "will", "what", "when", "which", "about", "into", "they", "them", "their", "there", "then", "than", "been", "being", "also", "just", "only", "some", "such", "very", "more", "most"])


@dataclass
class Fact:
    """One remembered fact about the user."""

    id: str
    text: str
    category: str = "context"
    confidence: float = 1.0
    source: dict[str, Any] = field(default_factory=dict)  # {"kind": "user"|"extracted", "thread_id", "run_id"}
    created_at: float = 0.0
    updated_at: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_value(cls, key: str, value: dict[str, Any]) -> Fact:
        return cls(id=key, text=str(value.get("text", "")), category=str(value.get("category", "context")),
                   confidence=float(value.get("confidence", 1.0)), source=dict(value.get("source") or {}),
                   created_at=float(value.get("created_at", 0.0)), updated_at=float(value.get("updated_at", 0.0)))


def namespace(user_id: str, agent: str | None = None) -> tuple[str, str, str]:
    """The store namespace of a user's (and custom agent's) facts."""
    return ("memory", check_id(user_id, kind="user"), check_id(agent, kind="agent") if agent else DEFAULT_AGENT)


class MemoryBook:
    """The facts of one user (and one agent) in a ``BaseStore``."""

    def __init__(self, store: BaseStore, user_id: str, *, agent: str | None = None, max_facts: int = 100) -> None:
        self.store = store
        self.namespace = namespace(user_id, agent)
        self.max_facts = max_facts

    def list(self) -> list[Fact]:
        """All facts, newest first."""
        items = self.store.search(self.namespace, limit=_LIST_LIMIT)
        facts = [Fact.from_value(i.key, i.value) for i in items if tuple(i.namespace) == self.namespace]
        return sorted(facts, key=lambda f: f.updated_at, reverse=True)

    def get(self, fact_id: str) -> Fact:
        item = self.store.get(self.namespace, fact_id) if _valid_id(fact_id) else None
        if item is None:
            raise NotFoundError(f"no memory fact {fact_id!r} (see `deerflow memory list`)")
        return Fact.from_value(item.key, item.value)

    def add(self, text: str, *, category: str = "context", confidence: float = 1.0,
            source: dict[str, Any] | None = None) -> Fact:
        """Store a fact the user gave by hand; the cap removes the least useful old one.

        Raises:
            UserError: empty text, markup that could close the memory block, unknown category.
        """
        reason = markup_reason(text)
        if reason:
            raise UserError(reason)
        if category not in CATEGORIES:
            raise UserError(f"unknown category {category!r}; use one of: {', '.join(CATEGORIES)}")
        return self.put(normalize_fact_text(text), category=category, confidence=confidence,
                        source=source or {"kind": "user"})

    def put(self, text: str, *, category: str, confidence: float, source: dict[str, Any],
            fact_id: str | None = None) -> Fact:
        """Write a fact (new, or replacing ``fact_id``) and keep the book under its cap."""
        now = time.time()
        old = self._maybe(fact_id) if fact_id else None
        fact = Fact(id=fact_id or uuid.uuid4().hex[:12], text=normalize_fact_text(text), category=category,
                    confidence=round(float(confidence), 3), source=source,
                    created_at=old.created_at if old else now, updated_at=now)
        self.write(fact.id, {k: v for k, v in fact.to_dict().items() if k != "id"})
        self._enforce_cap(keep=fact.id)
        return fact

    @property
    def semantic(self) -> bool:
        """True when the store has an embedding index (``memory.embedding``)."""
        return bool(getattr(self.store, "index_config", None))

    def write(self, fact_id: str, value: dict[str, Any]) -> None:
        """Store a fact's value; with an index its text is embedded (a failing model: stored unembedded)."""
        if not self.semantic:
            self.store.put(self.namespace, fact_id, value, index=False)
            return
        try:
            self.store.put(self.namespace, fact_id, value)
        except Exception as exc:  # noqa: BLE001 - an embedding provider failed (network, quota): keep the fact
            logger.warning("memory: could not embed fact %s (%s: %s); ranked by words until it changes",
                           fact_id, type(exc).__name__, exc)
            self.store.put(self.namespace, fact_id, value, index=False)

    def edit(self, fact_id: str, text: str) -> Fact:
        """Correct a fact's text; it becomes the user's own (extraction no longer removes it).

        Raises:
            NotFoundError: not this user's fact.
            UserError: empty text or markup that could close the memory block.
        """
        old = self.get(fact_id)
        reason = markup_reason(text)
        if reason:
            raise UserError(reason)
        return self.put(text, category=old.category, confidence=1.0, fact_id=old.id,
                        source={**old.source, "kind": "user", "edited": True})

    def forget(self, fact_id: str) -> Fact:
        """Delete one fact; NotFoundError when it is not this user's."""
        fact = self.get(fact_id)
        self.store.delete(self.namespace, fact.id)
        return fact

    def clear(self) -> int:
        """Delete every fact; how many there were."""
        facts = self.list()
        for fact in facts:
            self.store.delete(self.namespace, fact.id)
        return len(facts)

    def export(self) -> dict[str, Any]:
        """Everything, as JSON-able data (``deerflow memory export``)."""
        return {"namespace": list(self.namespace), "facts": [f.to_dict() for f in self.list()]}

    def relevant(self, query: str, *, max_tokens: int) -> list[Fact]:
        """The facts worth showing for ``query``, best first, within ``max_tokens`` (≈4 chars each).

        Ranking is by meaning when ``memory.embedding`` gives the store an index
        (LangGraph's semantic search), else lexical (shared words, rarer words weigh
        more); plus confidence, so a fact about the topic at hand comes first and
        general preferences still appear when nothing matches.
        """
        facts = self.list()
        if self.semantic and query.strip() and facts:
            try:
                items = self.store.search(self.namespace, query=query, limit=len(facts))
            except Exception as exc:  # noqa: BLE001 - the embedding provider failed: words still rank
                logger.warning("memory: semantic search failed (%s: %s); ranking by words", type(exc).__name__, exc)
            else:
                scores = {i.key: i.score for i in items if i.score is not None}
                return fit_budget(rank(facts, query, similarity=scores), max_tokens)
        return fit_budget(rank(facts, query), max_tokens)

    def _maybe(self, fact_id: str) -> Fact | None:
        item = self.store.get(self.namespace, fact_id)
        return Fact.from_value(item.key, item.value) if item else None

    def _enforce_cap(self, *, keep: str) -> None:
        facts = self.list()
        if len(facts) <= self.max_facts:
            return
        victims = sorted((f for f in facts if f.id != keep), key=lambda f: (f.confidence, f.updated_at))
        for fact in victims[: len(facts) - self.max_facts]:
            self.store.delete(self.namespace, fact.id)


def _valid_id(fact_id: str) -> bool:
    return bool(re.fullmatch(r"[0-9a-f]{1,64}", fact_id or ""))


def words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def rank(facts: Sequence[Fact], query: str, *, similarity: dict[str, float] | None = None) -> list[Fact]:
    """Facts ordered by relevance to ``query``, then confidence, then recency.

    Relevance is the embedding ``similarity`` (fact id → cosine, from the store's
    index) where there is one, else lexical: shared words, rarer words weighing more.
    """
    query_words = words(query)
    vocab = [words(f.text) for f in facts]
    df: dict[str, int] = {}
    for ws in vocab:
        for w in ws:
            df[w] = df.get(w, 0) + 1
    n = len(facts) or 1

    def score(i: int) -> tuple[float, float, float]:
        shared = vocab[i] & query_words
        relevance = sum(math.log(1 + n / df[w]) for w in shared)
        if similarity is not None and facts[i].id in similarity:
            relevance = 3.0 * max(0.0, similarity[facts[i].id])  # a close meaning outweighs confidence
        bonus = 0.5 if facts[i].category == "preference" else 0.0
        return (relevance + facts[i].confidence + bonus, facts[i].confidence, facts[i].updated_at)

    order = sorted(range(len(facts)), key=score, reverse=True)
    return [facts[i] for i in order]


def fit_budget(facts: Iterable[Fact], max_tokens: int) -> list[Fact]:
    """The leading facts whose text fits in ``max_tokens`` (approximate: 4 characters a token)."""
    budget, chosen = max_tokens * 4, []
    for fact in facts:
        cost = len(fact.text) + 3
        if cost > budget:
            continue
        chosen.append(fact)
        budget -= cost
    return chosen
