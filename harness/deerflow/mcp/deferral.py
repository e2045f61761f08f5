"""Deferred MCP schemas: names in the prompt, schemas only once promoted.

With ``tool_search.enabled`` a run's MCP tools are *deferred*: the model sees
their names (and their server's description) but not their parameter
schemas, which keeps large catalogs out of every request.  ``tool_search``
finds tools (``select:a,b`` or keywords) and *promotes* them: their names are
written to the thread's ``promoted`` state together with the catalog hash, and
from the next model call on their schemas are bound like any other tool.

* The catalog hash covers every deferred tool's contract, so a promotion made
  against an older catalog (a server changed its tools, the config changed)
  no longer counts: the ``promoted`` reducer starts over.
* Promotion is visibility only.  Authorization already removed what the user
  may not use, and an active skill's ``allowed-tools`` policy still filters and
  blocks promoted tools: the two concerns never meet here.
* Routing hints may promote a few tools up front (keywords found in the
  user's message); they never hide or forbid anything.

Everything here is pure: the middleware and the ``tool_search`` tool hold the
state handling.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from deerflow.mcp.config import RoutingHints
from deerflow.mcp.tools import ToolSpec

SELECT = "select:"
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class ServerInfo:
    """What the prompt may say about a server (never credentials)."""

    description: str | None = None
    routing: RoutingHints = field(default_factory=RoutingHints)


@dataclass(frozen=True)
class SearchResult:
    matches: list[ToolSpec]
    unknown: list[str]


def catalog_hash(specs: Iterable[ToolSpec]) -> str:
    """A short hash of the deferred tools' contracts (order-independent)."""
    digest = hashlib.sha256("\n".join(sorted(f"{s.name}:{s.digest}" for s in specs)).encode())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class DeferredCatalog:
    """The deferred tools of one run."""

    specs: Mapping[str, ToolSpec]
    servers: Mapping[str, ServerInfo] = field(default_factory=dict)
    max_results: int = 5

    @cached_property
    def hash(self) -> str:
        return catalog_hash(self.specs.values())

    def restrict(self, names: Iterable[str]) -> DeferredCatalog:
        """Only the tools the run really offers (after priority and authorization)."""
        keep = set(names)
        return DeferredCatalog({n: s for n, s in self.specs.items() if n in keep}, self.servers, self.max_results)

    def promoted(self, state_value: Any) -> set[str]:
        """Names promoted against *this* catalog (a promotion for another hash does not count)."""
        if not isinstance(state_value, Mapping) or state_value.get("catalog_hash") != self.hash:
            return set()
        return {n for n in state_value.get("names") or [] if n in self.specs}

    def search(self, query: str) -> SearchResult:
        """``select:a,b`` picks by name (prefixed, or the server's own name when unique); else keywords."""
        query = query.strip()
        if query.lower().startswith(SELECT):
            wanted = [w.strip() for w in query[len(SELECT):].split(",") if w.strip()]
            matches, unknown = [], []
            for word in wanted:
                spec = self._by_name(word)
                if spec is None:
                    unknown.append(word)
                else:
                    matches.append(spec)
            return SearchResult(list({s.name: s for s in matches}.values()), unknown)
        return SearchResult(self._rank(query)[: self.max_results], [])

    def _by_name(self, word: str) -> ToolSpec | None:
        if word in self.specs:
            return self.specs[word]
        remote = [s for s in self.specs.values() if s.remote_name == word]
        return remote[0] if len(remote) == 1 else None

    def _rank(self, query: str) -> list[ToolSpec]:
        terms = set(_WORD.findall(query.lower()))
        if not terms:
            return []
        scored = []
        for spec in self.specs.values():
            info = self.servers.get(spec.server, ServerInfo())
            name_words = set(_WORD.findall(spec.name.lower()))
            text_words = set(_WORD.findall(f"{spec.description} {info.description or ''}".lower()))
            hint_words = {w for k in info.routing.keywords for w in _WORD.findall(k.lower())}
            score = 3 * len(terms & name_words) + len(terms & text_words) + 2 * len(terms & hint_words)
            if score:
                scored.append((-score, spec.name, spec))
        return [spec for *_, spec in sorted(scored, key=lambda t: (t[0], t[1]))]

    def auto_promotions(self, text: str) -> list[str]:
        """Tools the routing hints promote for a user message (keyword match; a few at most)."""
        words = set(_WORD.findall(text.lower()))
        lowered = text.lower()
        chosen: list[str] = []
        for server, info in self.servers.items():
            hints = info.routing
            if not hints.auto_promote or not any(_keyword_in(k, words, lowered) for k in hints.keywords):
                continue
            for wanted in hints.auto_promote:
                spec = self._server_tool(server, wanted)
                if spec is not None and spec.name not in chosen:
                    chosen.append(spec.name)
        return chosen[: self.max_results]

    def _server_tool(self, server: str, wanted: str) -> ToolSpec | None:
        for spec in self.specs.values():
            if spec.server == server and wanted in (spec.remote_name, spec.name):
                return spec
        return None

    def prompt_section(self, promoted: set[str]) -> str | None:
        """The system prompt block listing deferred tools by name (None when all are promoted)."""
        waiting = [s for s in self.specs.values() if s.name not in promoted]
        if not waiting:
            return None
        lines = ["<deferred_tools>",
                 "These tools exist but their parameters are not loaded yet. Before calling one, load it "
                 "with tool_search: \"select:NAME[,NAME...]\" for names you know, or a few keywords to find "
                 "tools. Loaded tools can be called from your next step on."]
        for server in sorted({s.server for s in waiting}):
            info = self.servers.get(server, ServerInfo())
            names = ", ".join(sorted(s.name for s in waiting if s.server == server))
            about = f" — {info.description}" if info.description else ""
            lines.append(f"- {server}{about}: {names}")
            if info.routing.hint:
                lines.append(f"  hint: {info.routing.hint}")
        lines.append("</deferred_tools>")
        return "\n".join(lines)


def describe_specs(specs: Iterable[ToolSpec]) -> str:
    """What ``tool_search`` returns: each tool's name, description and parameter schema."""
    blocks = [f"## {s.name}\n{s.description}\nparameters: {json.dumps(s.input_schema, ensure_ascii=False)}"
              for s in specs]
    return "\n\n".join(blocks)


def _keyword_in(keyword: str, words: set[str], lowered: str) -> bool:
    keyword = keyword.strip().lower()
    if not keyword:
        return False
    return keyword in words if _WORD.fullmatch(keyword) else keyword in lowered
