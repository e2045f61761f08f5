"""Token usage of a run: metered per model call, summed per run, reported per user, thread, day.

A :class:`UsageMeter` is a LangChain callback handler in the run's graph config.
Callbacks are inherited by everything the run calls (the title and summary
models, and subagents, whose graphs run with the lead's callbacks in context),
so every model call of a run passes through it.  It reads what the *provider*
reported (``usage_metadata`` on the answer, which ``ChatOpenAI`` fills from
``stream_options.include_usage`` when streaming) and never estimates: a call
without usage data is counted as ``unknown_calls``, and a total made only of
such calls is shown as "unknown", never as 0.

The optional per-run budget (``limits.max_tokens_per_run``) is enforced
*before* a model call: once the run's tokens reach it, the next call raises
:class:`TokenBudgetExceeded` and the run ends ``stopped`` (``stopped_by:
token_budget``).  A tool call already running is never cut.

The run's summary rides on its ``run_finished`` event and in its stored
result (``result["usage"]``); :func:`usage_report` sums stored runs for
``deerflow usage``.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from langchain_core.callbacks import AsyncCallbackHandler, BaseCallbackHandler

LEAD = "lead"
BUDGET_GUARD = "token_budget"
"""Key of the run's meter in ``RunContext.services``."""

_KEYS = ("input_tokens", "output_tokens", "total_tokens")


class TokenBudgetExceeded(Exception):
    """The run used its token budget; raised before the next model call."""

    def __init__(self, used: int, budget: int) -> None:
        super().__init__(f"the run used {used:,} tokens, its budget (limits.max_tokens_per_run) is {budget:,}")
        self.used = used
        self.budget = budget


@dataclass
class Tally:
    """Tokens and calls of one model, one source, or the whole run."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    calls: int = 0
    unknown_calls: int = 0  # calls whose provider reported no usage

    def add(self, usage: Mapping[str, int] | None) -> None:
        self.calls += 1
        if usage is None:
            self.unknown_calls += 1
            return
        for key in _KEYS:
            setattr(self, key, getattr(self, key) + int(usage.get(key) or 0))

    def merge(self, other: Mapping[str, Any]) -> None:
        for key in (*_KEYS, "calls", "unknown_calls"):
            value = other.get(key)
            if isinstance(value, int):
                setattr(self, key, getattr(self, key) + value)

    @property
    def known(self) -> bool:
        """False when every call so far came without usage data (the total is unknown, not 0)."""
        return self.calls == 0 or self.unknown_calls < self.calls

    def to_dict(self) -> dict[str, int]:
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "total_tokens": self.total_tokens, "calls": self.calls, "unknown_calls": self.unknown_calls}


@dataclass
class _Call:
    source: str
    model: str
    started: float = field(default_factory=time.monotonic)


class _ModelEventsOnly(BaseCallbackHandler):
    """A handler that hears only model events: LangChain skips it for the many chain events of a step."""

    @property
    def ignore_chain(self) -> bool:
        return True

    @property
    def ignore_agent(self) -> bool:
        return True

    @property
    def ignore_retriever(self) -> bool:
        return True

    @property
    def ignore_custom_event(self) -> bool:
        return True


class UsageMeter(_ModelEventsOnly):
    """Counts the provider-reported usage of every model call of one run (thread-safe).

    Args:
        default_model: The run's model name, used when a call does not name its model.
        budget: ``limits.max_tokens_per_run`` (None: no budget).
    """

    raise_error = True  # the budget's exception must end the run, not be logged and ignored
    run_inline = True  # cheap, and the lock makes it safe on the subagents' loop too

    def __init__(self, *, default_model: str, budget: int | None = None) -> None:
        self.default_model = default_model
        self.budget = budget
        self._lock = threading.Lock()
        self._calls: dict[UUID, _Call] = {}
        self.total = Tally()
        self.by_model: dict[str, Tally] = {}
        self.by_source: dict[str, Tally] = {}
        self.on_call: Any = None  # called with (model, usage or None, seconds) after each call (metrics)

    def callbacks(self) -> list[BaseCallbackHandler]:
        """What a run's graph config carries: this meter, and its :class:`BudgetGuard` when there is a budget."""
        return [self] if self.budget is None else [self, BudgetGuard(self)]

    def on_chat_model_start(self, serialized: dict[str, Any], messages: Any, *, run_id: UUID,
                            metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self._start(run_id, metadata)  # a chat model's refusal is the BudgetGuard's

    def on_llm_start(self, serialized: dict[str, Any], prompts: Any, *, run_id: UUID,
                     metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self.refuse_over_budget(None)  # a plain LLM (none of DeerFlow's models): refused here
        self._start(run_id, metadata)

    def refuse_over_budget(self, run_id: UUID | None) -> None:
        """Raise :class:`TokenBudgetExceeded` once the run's tokens reach its budget (and forget ``run_id``)."""
        with self._lock:
            if self.budget is not None and self.total.total_tokens >= self.budget:
                if run_id is not None:
                    self._calls.pop(run_id, None)
                raise TokenBudgetExceeded(self.total.total_tokens, self.budget)

    def _start(self, run_id: UUID, metadata: Mapping[str, Any] | None) -> None:
        metadata = metadata or {}
        with self._lock:
            subagent = metadata.get("subagent_type")
            model = metadata.get("ls_model_name")
            self._calls[run_id] = _Call(f"subagent:{subagent}" if isinstance(subagent, str) else LEAD,
                                        model if isinstance(model, str) and model else self.default_model)

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        usage = provider_usage(response)
        with self._lock:
            call = self._calls.pop(run_id, None) or _Call(LEAD, self.default_model)
            for tally in (self.total, self.by_model.setdefault(call.model, Tally()),
                          self.by_source.setdefault(call.source, Tally())):
                tally.add(usage)
        if self.on_call is not None:
            self.on_call(call.model, usage, time.monotonic() - call.started)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            self._calls.pop(run_id, None)

    def summary(self) -> dict[str, Any] | None:
        """The run's usage for events and the run record (None when the run made no model call)."""
        with self._lock:
            if self.total.calls == 0:
                return None
            return {**self.total.to_dict(),
                    "by_model": {k: v.to_dict() for k, v in sorted(self.by_model.items())},
                    "by_source": {k: v.to_dict() for k, v in sorted(self.by_source.items())}}


class BudgetGuard(_ModelEventsOnly, AsyncCallbackHandler):
    """Refuses a chat model call once the run's tokens reach ``limits.max_tokens_per_run``.

    A handler of its own, asynchronous and not inline, because of how LangChain starts a
    model call: it makes one ``on_chat_model_start`` coroutine per handler, awaits the inline
    handlers' one by one, then gathers the others.  A refusal raised by an inline handler left
    the coroutines of the handlers after it never awaited (a ``RuntimeWarning`` at collection);
    raised here, every inline handler has had its event and the gathered ones are tasks.  It
    hears nothing else (``ignore_llm``: no task per streamed token).  Only a run with a budget
    carries one (:meth:`UsageMeter.callbacks`).
    """

    raise_error = True
    run_inline = False

    def __init__(self, meter: UsageMeter) -> None:
        self.meter = meter

    @property
    def ignore_llm(self) -> bool:
        return True

    async def on_chat_model_start(self, serialized: dict[str, Any], messages: Any, *, run_id: UUID,
                                  **kwargs: Any) -> None:
        self.meter.refuse_over_budget(run_id)


def provider_usage(response: Any) -> dict[str, int] | None:
    """``input/output/total_tokens`` the provider reported for one call (None: it reported none)."""
    for generations in getattr(response, "generations", None) or []:
        for generation in generations:
            found = getattr(getattr(generation, "message", None), "usage_metadata", None)
            if found:
                return _normalized(found.get("input_tokens"), found.get("output_tokens"), found.get("total_tokens"))
    token_usage = (getattr(response, "llm_output", None) or {}).get("token_usage")
    if isinstance(token_usage, Mapping) and token_usage:
        return _normalized(token_usage.get("prompt_tokens"), token_usage.get("completion_tokens"),
                           token_usage.get("total_tokens"))
    return None


def _normalized(prompt: Any, completion: Any, total: Any) -> dict[str, int] | None:
    if not any(isinstance(v, int) for v in (prompt, completion, total)):
        return None
    i, o = int(prompt or 0), int(completion or 0)
    return {"input_tokens": i, "output_tokens": o, "total_tokens": int(total) if isinstance(total, int) else i + o}


def summary_line(usage: Mapping[str, Any] | None) -> str:
    """One line for a terminal or a footer: ``tokens: 1,234 (1,000 in / 234 out) in 3 model calls``."""
    if not usage or not usage.get("calls"):
        return "tokens: none (no model call)"
    calls, unknown = int(usage["calls"]), int(usage.get("unknown_calls") or 0)
    plural = "s" if calls != 1 else ""
    if unknown == calls:
        return f"tokens: unknown (the model reported no usage) in {calls} model call{plural}"
    line = (f"tokens: {usage['total_tokens']:,} ({usage['input_tokens']:,} in / {usage['output_tokens']:,} out)"
            f" in {calls} model call{plural}")
    return line + (f", {unknown} without usage data" if unknown else "")


# -- reports over stored runs ----------------------------------------------------------------

GROUPINGS = ("user", "thread", "day", "model")


@dataclass
class UsageRow:
    key: str
    runs: int = 0
    tally: Tally = field(default_factory=Tally)

    def to_dict(self) -> dict[str, Any]:
        total = self.tally.to_dict()
        return {"key": self.key, "runs": self.runs, **total,
                "total_tokens": total["total_tokens"] if self.tally.known else None}


def usage_report(runs: Iterable[Any], *, by: str = "day") -> list[UsageRow]:
    """Sum the usage of stored runs (``RunRecord``s) grouped ``by`` user, thread, day (UTC) or model."""
    if by not in GROUPINGS:
        raise ValueError(f"--by must be one of {', '.join(GROUPINGS)}")
    rows: dict[str, UsageRow] = {}
    for run in runs:
        usage = (run.result or {}).get("usage")
        if not isinstance(usage, Mapping):
            continue
        parts = usage.get("by_model") if by == "model" else {_key(run, by): usage}
        for key, part in (parts or {}).items():
            if isinstance(part, Mapping):
                row = rows.setdefault(key, UsageRow(key))
                row.runs += 1
                row.tally.merge(part)
    return sorted(rows.values(), key=lambda r: r.key)


def _key(run: Any, by: str) -> str:
    if by == "user":
        return str(run.user_id)
    if by == "thread":
        return str(run.thread_id)
    return dt.datetime.fromtimestamp(run.created_at, dt.UTC).date().isoformat()


def check_daily_budget(store: Any, user_id: str, budget: int | None, *, now: float | None = None) -> None:
    """Refuse a new run once ``user_id``'s finished runs of the day (UTC) used ``budget`` tokens.

    Only provider-reported tokens count (a call without usage data adds nothing it
    could be blamed for); runs still going are counted once they finish, so a run is
    never cut by this check, only the next one refused.

    Raises:
        BudgetSpent: the budget is spent; the message says how much and until when.
    """
    if budget is None:
        return
    today = dt.datetime.fromtimestamp(time.time() if now is None else now, dt.UTC).date()
    midnight = dt.datetime(today.year, today.month, today.day, tzinfo=dt.UTC).timestamp()
    used = sum(row.tally.total_tokens for row in usage_report(store.runs_since(midnight, user_id=user_id), by="user"))
    if used >= budget:
        from deerflow.errors import BudgetSpent

        raise BudgetSpent(f"daily token budget spent: {user_id} used {used:,} of {budget:,} tokens today "
                          "(usage.daily_token_budget); new runs are accepted again after 00:00 UTC")


def parse_since(text: str | None) -> float | None:
    """``--since YYYY-MM-DD`` (UTC midnight) as a timestamp; ValueError with the expected form."""
    if not text:
        return None
    try:
        day = dt.date.fromisoformat(text)
    except ValueError:
        raise ValueError(f"--since expects a date like 2026-01-31, got {text!r}") from None
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC).timestamp()
