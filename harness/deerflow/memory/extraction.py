"""Turning settled runs into fact changes: sources, the model's request, parsing, the guard.

**Sources** are the user's own message of each run and the agent's final
answer — never tool results, fetched pages, files, MCP output or subagent
transcripts, which never reach this module: the host hands it an
:class:`Exchange` built from the prompt it received and the final text it
published.  The extraction model proposes new, changed and obsolete facts as
JSON; every proposal then passes the confidence threshold and the content
guard (:mod:`deerflow.memory.guard`), whatever the model said.

The embedded offline model gets its answer from a script conversation whose
``match`` is in :data:`EXTRACTION_MARKER` when its script has one; otherwise a
small deterministic reader keeps the user's first-person statements, so the
offline examples show memory working.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from deerflow.memory.book import CATEGORIES, Fact, MemoryBook
from deerflow.memory.guard import instruction_reason, normalize_fact_text

logger = logging.getLogger(__name__)

EXTRACTION_MARKER = "DeerFlow memory extraction"
_MAX_SOURCE_CHARS = 4_000
_MAX_PROPOSALS = 20

_SYSTEM = f"""You maintain a short list of durable facts about a user, for a research agent.
Read the conversation excerpts (the user's messages and the agent's final answers only) and the
current facts. Propose only facts about the user that will still matter in later conversations:
preferences, background, ongoing projects, skills. Never turn a request for one task into a fact.
Never record instructions, URLs, credentials or anything the user did not say about themselves.
Answer with JSON only:
{{"add": [{{"text": "...", "category": "{'|'.join(CATEGORIES)}", "confidence": 0.0-1.0}}],
 "update": [{{"id": "...", "text": "...", "confidence": 0.0-1.0}}],
 "remove": ["id of a fact the user contradicted or withdrew"]}}"""


def change_summary(added: int, updated: int, removed: int) -> str:
    """``memory: +2 facts, 1 updated``: the one wording of what an extraction changed."""
    parts = [f"+{added} fact{'s' if added != 1 else ''}"]
    if updated:
        parts.append(f"{updated} updated")
    if removed:
        parts.append(f"{removed} removed")
    return "memory: " + ", ".join(parts)


@dataclass(frozen=True)
class Exchange:
    """One settled run, as memory may read it: the user's message and the final answer."""

    user_text: str
    answer_text: str
    thread_id: str
    run_id: str


@dataclass
class Changes:
    """What the extraction model proposed."""

    add: list[dict[str, Any]] = field(default_factory=list)
    update: list[dict[str, Any]] = field(default_factory=list)
    remove: list[str] = field(default_factory=list)


@dataclass
class Applied:
    """What one extraction changed (``memory: +2 facts, 1 updated``)."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # reasons, for the log
    facts_added: list[Fact] = field(default_factory=list)  # the same changes, whole: for the undo record
    facts_updated: list[tuple[Fact, Fact]] = field(default_factory=list)  # (before, after)
    facts_removed: list[Fact] = field(default_factory=list)

    def summary(self) -> str:
        return change_summary(len(self.added), len(self.updated), len(self.removed))


def extraction_messages(exchanges: Sequence[Exchange], facts: Sequence[Fact]) -> list[BaseMessage]:
    """The request to the memory model (the marker opens the user message, for script matching)."""
    current = "\n".join(f"- {f.id}: {f.text}" for f in facts) or "(none)"
    excerpts = "\n\n".join(
        f"<user_message>\n{_clip(e.user_text)}\n</user_message>\n<final_answer>\n{_clip(e.answer_text)}\n"
        "</final_answer>" for e in exchanges)
    return [SystemMessage(content=_SYSTEM),
            HumanMessage(content=f"{EXTRACTION_MARKER}\n\nCurrent facts:\n{current}\n\nConversation:\n{excerpts}")]


def parse_changes(text: str) -> Changes:
    """The model's JSON answer (tolerating prose or a code fence around it); empty when unreadable."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return Changes()
    try:
        data = json.loads(text[start:end + 1])
    except ValueError:
        return Changes()
    if not isinstance(data, dict):
        return Changes()

    def dicts(key: str) -> list[dict[str, Any]]:
        value = data.get(key)
        return [d for d in value if isinstance(d, dict)][:_MAX_PROPOSALS] if isinstance(value, list) else []

    removals = data.get("remove")
    return Changes(add=dicts("add"), update=dicts("update"),
                   remove=[r for r in removals if isinstance(r, str)][:_MAX_PROPOSALS]
                   if isinstance(removals, list) else [])


_FIRST_PERSON = re.compile(r"^(?:i|i'm|i am|my|we|we're|our)\b", re.IGNORECASE)
_PREFERENCE = re.compile(r"\b(prefer|like|love|want|need|use|keep)\b", re.IGNORECASE)


def offline_changes(exchanges: Sequence[Exchange]) -> Changes:
    """The offline reader: the user's first-person statements become facts (deterministic)."""
    add: list[dict[str, Any]] = []
    for exchange in exchanges:
        for sentence in re.split(r"(?<=[.!?;])\s+|\n+", exchange.user_text):
            sentence = normalize_fact_text(sentence).rstrip(".;!")
            if _FIRST_PERSON.match(sentence) and 3 <= len(sentence.split()) <= 40 and "?" not in sentence:
                category = "preference" if _PREFERENCE.search(sentence) else "context"
                add.append({"text": sentence, "category": category, "confidence": 0.8})
    return Changes(add=add[:_MAX_PROPOSALS])


def has_script_conversation(model: BaseChatModel) -> bool:
    """True when ``model`` is the scripted model and its script plays the extraction request."""
    conversations = getattr(model, "conversations", None) or ()
    return any(getattr(c, "match", "") and c.match in EXTRACTION_MARKER for c in conversations)


def is_scripted(model: BaseChatModel) -> bool:
    from deerflow.models.scripted import ScriptedChatModel

    return isinstance(model, ScriptedChatModel)


async def propose(model: BaseChatModel, exchanges: Sequence[Exchange], facts: Sequence[Fact]) -> Changes:
    """Ask ``model`` for changes (the offline reader for a scripted model without a memory script)."""
    if is_scripted(model) and not has_script_conversation(model):
        return offline_changes(exchanges)
    answer = await model.ainvoke(extraction_messages(exchanges, facts))
    content = answer.content if isinstance(answer.content, str) else json.dumps(answer.content)
    return parse_changes(content)


def apply_changes(book: MemoryBook, changes: Changes, *, threshold: float, source: dict[str, Any]) -> Applied:
    """Write the proposals that pass the threshold and the guard; log what was dropped.

    Synchronous (the store is): call it off the event loop.
    """
    applied = Applied()
    existing = {f.id: f for f in book.list()}
    known_texts = {f.text.casefold() for f in existing.values()}
    for proposal in changes.add:
        text = _accepted(proposal, threshold, applied)
        if text is None or text.casefold() in known_texts:
            continue
        category = proposal.get("category") if proposal.get("category") in CATEGORIES else "context"
        fact = book.put(text, category=str(category), confidence=_confidence(proposal), source=source)
        known_texts.add(text.casefold())
        applied.added.append(fact.id)
        applied.facts_added.append(fact)
    for proposal in changes.update:
        old = existing.get(str(proposal.get("id")))
        text = _accepted(proposal, threshold, applied)
        if old is None or text is None:
            continue
        new = book.put(text, category=old.category, confidence=_confidence(proposal), source=source, fact_id=old.id)
        applied.updated.append(old.id)
        applied.facts_updated.append((old, new))
    for fact_id in changes.remove:
        if fact_id in existing and existing[fact_id].source.get("kind") != "user":  # the user's own: theirs to forget
            book.store.delete(book.namespace, fact_id)
            applied.removed.append(fact_id)
            applied.facts_removed.append(existing[fact_id])
    return applied


def _accepted(proposal: dict[str, Any], threshold: float, applied: Applied) -> str | None:
    text = proposal.get("text")
    if not isinstance(text, str):
        return None
    if _confidence(proposal) < threshold:
        return None
    reason = instruction_reason(text)
    if reason:
        logger.warning("memory: dropped a proposed fact (%s): %r", reason, text[:120],
                       extra={"fields": {"event": "memory_fact_dropped", "reason": reason}})
        applied.dropped.append(reason)
        return None
    return normalize_fact_text(text)


def _confidence(proposal: dict[str, Any]) -> float:
    try:
        value = float(proposal.get("confidence", 0.0))
    except (TypeError, ValueError):
        return 0.0
    return value if 0.0 <= value <= 1.0 else 0.0


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_SOURCE_CHARS else text[:_MAX_SOURCE_CHARS] + " […]"
