"""Prometheus metrics and the per-run log line, for the operator of a shared server.

The metrics live in ``prometheus_client``'s default registry, which
jupyter_server already serves on its ``/metrics`` (so a Hub's Prometheus
scrapes them with Jupyter's own).  Labels stay low-cardinality: status, model
name, tool name, never a thread, run or user id.  Those go in the one
structured log line each run ends with (logger ``deerflow.runs``), which an
operator searches instead.
"""

from __future__ import annotations

import json
import logging
from collections import Counter as Count
from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

from deerflow.runtime import events as ev

run_log = logging.getLogger("deerflow.runs")

RUNS_STARTED = Counter("deerflow_runs_started", "Runs started")
RUNS_FINISHED = Counter("deerflow_runs_finished", "Runs finished, by final status", ["status"])
ACTIVE_RUNS = Gauge("deerflow_active_runs", "Runs executing now")
RUN_DURATION = Histogram("deerflow_run_duration_seconds", "Wall time of a run, by final status", ["status"],
                         buckets=(1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, float("inf")))
MODEL_CALLS = Counter("deerflow_model_calls", "Model calls, by model and whether the provider reported usage",
                      ["model", "usage"])
MODEL_TOKENS = Counter("deerflow_model_tokens", "Provider-reported tokens, by model and direction",
                       ["model", "direction"])
MODEL_LATENCY = Histogram("deerflow_model_call_seconds", "Wall time of a model call (streamed to its end), by model",
                          ["model"], buckets=(0.25, 0.5, 1, 2, 5, 10, 20, 40, 80, 160, float("inf")))
TOOL_CALLS = Counter("deerflow_tool_calls", "Tool calls of the lead agent, by tool and result status",
                     ["tool", "status"])
SANDBOX_STARTS = Counter("deerflow_sandbox_starts", "Sandboxed processes started (a shell command or a Python "
                         "kernel), by sandbox provider and kind", ["provider", "kind"])
GUARD_REFUSALS = Counter("deerflow_guard_refusals", "Refusals by a guard: a blocked URL (egress), a connection "
                         "the sandbox's egress proxy refused (sandbox_egress), a blocked skill (SkillScan), a path "
                         "escape, a blocked command, or a run stopped by a guard", ["guard"])
BATCH_QUEUE_DEPTH = Gauge("deerflow_batch_queue_depth", "Batch items pending or running, as the batch worker last "
                          "counted them")

# Tool result codes that mean a guard refused something (deerflow.tools.errors.ToolFailure codes).
GUARD_CODES = {"url_blocked": "egress", "skill_blocked": "skillscan", "path_outside_root": "path_escape",
               "path_outside_mounts": "path_escape", "command_blocked": "command"}


def run_started() -> None:
    RUNS_STARTED.inc()
    ACTIVE_RUNS.inc()


class _ModelSeries:
    """One model's labelled series, looked up once: ``labels()`` validates and locks at every call,
    and a run makes one model call a step."""

    def __init__(self, model: str) -> None:
        self.latency = MODEL_LATENCY.labels(model=model)
        self.calls = {usage: MODEL_CALLS.labels(model=model, usage=usage) for usage in ("reported", "unknown")}
        self.tokens = {d: MODEL_TOKENS.labels(model=model, direction=d) for d in ("input", "output")}


_MODEL_SERIES: dict[str, _ModelSeries] = {}  # bounded like the labels themselves: the configured model names
_MODEL_SERIES_MAX = 256


def _series(model: str) -> _ModelSeries:
    found = _MODEL_SERIES.get(model)
    if found is None:
        if len(_MODEL_SERIES) >= _MODEL_SERIES_MAX:
            _MODEL_SERIES.clear()
        found = _MODEL_SERIES[model] = _ModelSeries(model)
    return found


def model_call(model: str, usage: Mapping[str, int] | None, seconds: float) -> None:
    """Count one model call, its latency and its tokens (the usage meter calls this)."""
    series = _series(model)
    series.latency.observe(max(0.0, seconds))
    series.calls["reported" if usage is not None else "unknown"].inc()
    if usage is not None:
        series.tokens["input"].inc(usage.get("input_tokens", 0))
        series.tokens["output"].inc(usage.get("output_tokens", 0))


def sandbox_started(provider: str, kind: str) -> None:
    """Count one sandboxed process (``kind``: ``command`` or ``kernel``) of ``provider``."""
    SANDBOX_STARTS.labels(provider=provider, kind=kind).inc()


def guard_refused(guard: str) -> None:
    """Count one refusal that no tool result reports (the sandbox's egress proxy refusing a connection)."""
    GUARD_REFUSALS.labels(guard=guard).inc()


def batch_queue_depth(items: int) -> None:
    """The batch queue's depth, as the worker's heartbeat counted it."""
    BATCH_QUEUE_DEPTH.set(items)


def run_finished(*, user_id: str, finished: ev.RunFinished, events: Iterable[Any], seconds: float) -> None:
    """Record a run's end in the metrics and write its log line."""
    ACTIVE_RUNS.dec()
    RUNS_FINISHED.labels(status=finished.status).inc()
    RUN_DURATION.labels(status=finished.status).observe(max(0.0, seconds))
    tools: Count[tuple[str, str]] = Count((e.name, e.status) for e in events if isinstance(e, ev.ToolResult))
    for (name, status), n in tools.items():
        TOOL_CALLS.labels(tool=name, status=status).inc(n)
    guards = Count(GUARD_CODES[e.code] for e in events if isinstance(e, ev.ToolResult) and e.code in GUARD_CODES)
    if finished.status == "stopped":
        guards[finished.stopped_by or "guard"] += 1  # loop detection, token_budget...
    for guard, n in guards.items():
        GUARD_REFUSALS.labels(guard=guard).inc(n)
    usage = finished.usage or {}
    line = {
        "user": user_id, "thread": finished.thread_id, "run": finished.run_id, "status": finished.status,
        "duration_s": round(seconds, 3), "error": finished.error, "stopped_by": finished.stopped_by,
        "model_calls": usage.get("calls", 0), "tokens": usage.get("total_tokens") if _known(usage) else None,
        "input_tokens": usage.get("input_tokens"), "output_tokens": usage.get("output_tokens"),
        "tool_calls": sum(tools.values()), "tool_errors": sum(n for (_, s), n in tools.items() if s == "error"),
    }
    # text logs: the fields as JSON after the words; JSON logs (logging.format: json): top-level keys
    run_log.info("run finished %s", json.dumps(line, sort_keys=True),
                 extra={"fields": line, "short_message": "run finished"})


def _known(usage: Mapping[str, Any]) -> bool:
    """A total counts only if some call reported usage (else it is unknown, not 0)."""
    return bool(usage) and int(usage.get("unknown_calls") or 0) < int(usage.get("calls") or 0)
