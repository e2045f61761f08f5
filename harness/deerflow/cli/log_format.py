"""The CLI's log lines on stderr: one line a record, tracebacks only with ``--debug``."""

from __future__ import annotations

import logging
import sys
from typing import Any

from deerflow.errors import first_line

DEBUG_HINT = "deerflow --debug ... shows the traceback"
RUN_FAILURE_LOGGER = "deerflow.runs.execution"  # its failures also arrive as the run's error event
PG_POOL_LOGGER = "psycopg.pool"  # its failures arrive as one StoreUnavailable line (persistence/pgsql.py)


def configure_logging(*, debug: bool, config: Any = None) -> None:
    """Warnings and errors on stderr, one line each; tracebacks only with ``--debug``.

    A failed run is logged by the runtime *and* reported as the run's error event, which
    the renderer prints: without ``--debug`` the runtime's record is left out, so the failure
    is one line; with it, the runtime's debug record carries the traceback.  Once the
    config is known (``config``), its ``logging.format: json`` makes each line a JSON
    object, and its secrets (and the environment's) are redacted from every line.
    """
    from deerflow.logs import JsonFormatter, RedactFilter, config_secrets

    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(RedactFilter(config_secrets(config) if config is not None else ()))
    if config is not None and config.logging.format == "json":
        handler.setFormatter(JsonFormatter(tracebacks=debug))
    else:
        handler.setFormatter(_OneLine("%(name)s: %(levelname)s: %(message)s", debug=debug))
    if not debug:
        handler.addFilter(lambda record: not (record.name == RUN_FAILURE_LOGGER and record.levelno >= logging.WARNING))
        # a pool's every failed attempt to reach PostgreSQL: the command's own error names it once
        handler.addFilter(lambda record: not record.name.startswith(PG_POOL_LOGGER))
    handler.set_name("deerflow-cli")
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == "deerflow-cli"]:  # main() called again
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if debug else logging.WARNING)
    if debug:  # the libraries' chatter stays out; ours is what --debug is for
        for noisy in ("httpx", "httpcore", "asyncio", "aiosqlite", "urllib3", "openai", "mcp"):
            logging.getLogger(noisy).setLevel(logging.WARNING)


class _OneLine(logging.Formatter):
    """A formatter that keeps each record on one line unless tracebacks are wanted."""

    def __init__(self, fmt: str, *, debug: bool) -> None:
        super().__init__(fmt)
        self.debug = debug

    def format(self, record: logging.LogRecord) -> str:
        if self.debug:
            return super().format(record)
        line = record.getMessage().strip().splitlines()[0] if record.getMessage().strip() else ""
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            # the redacted form when the handler's RedactFilter made one
            line += f": {getattr(record, 'exc_error', None) or type(exc).__name__ + ': ' + first_line(exc)}" \
                    f" ({DEBUG_HINT})"
        return f"{record.name}: {record.levelname.lower()}: {line}"


__all__ = ["DEBUG_HINT", "configure_logging", "first_line"]
