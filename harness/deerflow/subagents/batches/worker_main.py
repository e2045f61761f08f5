"""A batch worker in a process of its own: ``deerflow batches worker`` / ``python -m ...worker_main``.

It opens the same things a host would — the config, the batch store under
``$DEERFLOW_HOME`` (or PostgreSQL), a sandbox provider and kernel pool, a
subagent runtime — and runs a :class:`BatchWorker` until stopped (SIGTERM,
Ctrl-C) or, with ``--until-idle``, until no batch item is left unfinished.
Several workers may share one database: claims are atomic and leased.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path

from deerflow.arguments import OneLineParser
from deerflow.config.loader import LoadedConfig, load_config
from deerflow.config.paths import HomePaths, default_home
from deerflow.config.schema import AppConfig
from deerflow.errors import UserError, first_line
from deerflow.subagents.batches.submitter import item_runner, open_store
from deerflow.subagents.batches.worker import BatchWorker, WorkerStats
from deerflow.subagents.controller import SubagentController
from deerflow.subagents.runtime import SubagentRuntime


async def run_worker(loaded: LoadedConfig, home: HomePaths, *, concurrency: int | None = None,
                     lease_seconds: float | None = None, until_idle: bool = False) -> WorkerStats:
    """Run one worker over the configured batch store (see the module docstring)."""
    from deerflow.sandbox.factory import open_execution_services

    config, settings = loaded.config, loaded.config.subagents.batches
    async with AsyncExitStack() as stack:
        services = open_execution_services(config, stack)
        controller = SubagentController(name="deerflow-batch-subagents")
        stack.push_async_callback(controller.aclose)
        runtime = SubagentRuntime(controller, config_file=str(loaded.path) if loaded.path else None)
        store = await open_store(settings, home)
        stack.callback(store.close)
        worker = BatchWorker(store, item_runner(runtime, config, home, services),
                             concurrency=concurrency or settings.concurrency,
                             lease_seconds=lease_seconds or settings.lease_seconds)
        return await worker.run(until_idle=until_idle)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ...worker_main ARGV``: the exit status; a bad command line is one line and status 2."""
    from deerflow.subagents.cli import positive

    parser = OneLineParser(prog="deerflow batches worker", description="run durable batch items")
    parser.add_argument("--config", help="config.yaml to use")
    parser.add_argument("--home", help="DEERFLOW_HOME to use")
    parser.add_argument("--concurrency", type=positive(int), help="items run at the same time (default: config)")
    parser.add_argument("--lease", type=positive(float), help="lease seconds (default: config)")
    parser.add_argument("--until-idle", action="store_true", help="exit once no item is left unfinished")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        loaded = load_config(args.config)
    except UserError as exc:
        print(f"deerflow: {exc}", file=sys.stderr)
        return exc.exit_code
    _log_per_config(loaded.config)
    home = HomePaths(Path(args.home).expanduser() if args.home else default_home()).with_storage(
        loaded.config.storage)  # the thread folders the servers use
    try:
        stats = asyncio.run(run_worker(loaded, home, concurrency=args.concurrency, lease_seconds=args.lease,
                                       until_idle=args.until_idle))
    except UserError as exc:  # a sandbox or store the config names but that is not there: one line
        print(f"deerflow: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        logging.getLogger(__name__).debug("the worker stopped", exc_info=exc)
        print(f"deerflow: the batch worker stopped: {type(exc).__name__}: {first_line(exc)}", file=sys.stderr)
        return 1
    print(f"worker done: {stats.finished} items finished, {stats.cancelled} cancelled, "
          f"{stats.lost_leases} results discarded (lease lost)")
    return 0


def _log_per_config(config: AppConfig) -> None:
    """The worker's log lines: the config's format (``logging.format``), its secrets redacted."""
    from deerflow.logs import JsonFormatter, redacting

    for handler in logging.getLogger().handlers:
        redacting(handler, config)
        if config.logging.format == "json":
            handler.setFormatter(JsonFormatter())


if __name__ == "__main__":
    sys.exit(main())
