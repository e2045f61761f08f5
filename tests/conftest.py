"""Shared test setup.

* ``tests/`` is importable (``fixtures.*``).
* The whole session runs with ``HOME``, the XDG dirs and the user-level Jupyter/IPython dirs in a
  temporary folder, set before anything starts, so no test (nor a server or kernel it starts)
  writes into the real home: no ``notebook_secret``, runtime files or settings left there.  The
  venv's own ``etc/jupyter`` (which enables the DeerFlow extension) is still found: it lives
  under ``sys.prefix``, not in those user-level dirs.
* ``DEERFLOW_LOOP_GUARD=1``: a sync metadata-store call on an event loop's thread raises
  (:mod:`deerflow.persistence.aio`), in the tests and in every server they start.
* ``deerflow_home`` gives a test a fresh DEERFLOW_HOME.
* Hypothesis runs without its per-example deadline (a timing assertion; see below).
* At the end of the session (of each pytest-xdist worker), processes that tests started and left
  running are listed, killed and reaped, and the session fails: a leak must be seen, not inherited
  by the next CI step.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from fixtures.processes import ProcessInfo, end_processes, leftover_children  # noqa: E402

# No timing assertions: Hypothesis's default 200 ms deadline per example failed a property test
# on a loaded CI machine (one example took 255 ms, its replay 0.5 ms). Examples still run to
# completion and every property is still checked.
hypothesis_settings.register_profile("deerflow", deadline=None)
hypothesis_settings.load_profile("deerflow")

# Where each variable points inside the session's temporary home.
ISOLATED_DIRS = {
    "HOME": ".",
    "XDG_CONFIG_HOME": ".config",
    "XDG_DATA_HOME": ".local/share",
    "XDG_CACHE_HOME": ".cache",
    "XDG_STATE_HOME": ".local/state",
    "JUPYTER_CONFIG_DIR": ".jupyter",
    "JUPYTER_DATA_DIR": ".local/share/jupyter",
    "JUPYTER_RUNTIME_DIR": ".local/share/jupyter/runtime",
    "IPYTHONDIR": ".ipython",
    "MPLCONFIGDIR": ".config/matplotlib",
}
LEAK_SETTLE_SECONDS = 5.0  # servers stopped by the last fixtures may still be exiting
_HOME = pytest.StashKey[tuple[Path, dict[str, str | None]]]()
_LEAKED = pytest.StashKey[list[ProcessInfo]]()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Point HOME and the user-level dirs into a fresh folder before any test or server starts."""
    home = Path(tempfile.mkdtemp(prefix="deerflow-tests-home-"))
    saved = {name: os.environ.get(name) for name in ISOLATED_DIRS}
    for name, relative in ISOLATED_DIRS.items():
        path = home / relative
        path.mkdir(parents=True, exist_ok=True)
        os.environ[name] = str(path)
    # The tests' threads belong to `local` whoever runs them (unset by tests of the default identity).
    saved["DEERFLOW_USER"] = os.environ.get("DEERFLOW_USER")
    os.environ["DEERFLOW_USER"] = "local"
    # The metadata store refuses sync calls on a thread running an event loop (servers started by
    # tests inherit it): a call that would block the server's loop fails a test instead.
    saved["DEERFLOW_LOOP_GUARD"] = os.environ.get("DEERFLOW_LOOP_GUARD")
    os.environ["DEERFLOW_LOOP_GUARD"] = "1"
    config.stash[_HOME] = (home, saved)
    # Removed at interpreter exit, after the atexit hooks registered later (IPython's shells write
    # their history into IPYTHONDIR from one).
    atexit.register(shutil.rmtree, home, ignore_errors=True)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Give the environment back (the session's home goes at exit)."""
    _, saved = config.stash.get(_HOME, (None, {}))
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Kill what the tests left running; fail the session if there was anything.

    Under pytest-xdist each worker checks its own descendants and hands what it killed to the
    controller (``workeroutput``, read in :func:`pytest_testnodedown`), which fails the session and
    names them; the controller runs no test, and its children are the workers themselves.
    """
    if session.config.pluginmanager.has_plugin("dsession"):
        if session.config.stash.get(_LEAKED, []) and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        return
    deadline = time.monotonic() + LEAK_SETTLE_SECONDS
    left = leftover_children()
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = leftover_children()
    if left:
        leaked = end_processes(left)
        session.config.stash[_LEAKED] = leaked
        workeroutput = getattr(session.config, "workeroutput", None)
        if workeroutput is not None:  # a pytest-xdist worker: its controller reports them
            workeroutput["deerflow_leaked"] = [[info.pid, info.started, info.command] for info in leaked]
        if session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """pytest-xdist controller: collect what a finished worker killed at its end (see above)."""
    for pid, started, command in getattr(node, "workeroutput", {}).get("deerflow_leaked", []):
        node.config.stash.setdefault(_LEAKED, []).append(ProcessInfo(pid, started, command))


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    """Name the leaked processes last, where a reader of the CI log looks."""
    leaked = config.stash.get(_LEAKED, [])
    if leaked:
        terminalreporter.section("processes left behind by the tests", sep="!", red=True, bold=True)
        for info in leaked:
            terminalreporter.line(f"pid {info.pid}: {info.command[:300]}", red=True)
        terminalreporter.line(f"{len(leaked)} process(es) outlived the tests; killed now. Stop what a test "
                              "starts (fixtures.processes.running_process / stop_process).", red=True)



@pytest.fixture
def deerflow_home(tmp_path, monkeypatch) -> Path:
    """A fresh DEERFLOW_HOME, no ambient config, no real API key."""
    home = tmp_path / "deerflow-home"
    home.mkdir()
    monkeypatch.setenv("DEERFLOW_HOME", str(home))
    monkeypatch.delenv("DEERFLOW_CONFIG", raising=False)
    monkeypatch.delenv("DEERFLOW_EXTENSIONS_CONFIG", raising=False)
    monkeypatch.delenv("DEERFLOW_SCRIPT", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    return home


# fixtures.postgres: one throwaway PostgreSQL cluster per session, started only when a test asks.
pytest_plugins = ["pytest_jupyter.jupyter_server", "fixtures.postgres"]


# The example notebooks are executed once per session: tests/integration/test_notebooks.py keeps each
# notebook it executed and checked here, and the docs site test (run after it) renders those instead of
# executing all eight again. Run alone, the docs test executes them itself.
EXECUTED_NOTEBOOKS = "executed-notebooks"
LAST_MODULES = ("test_docs_site.py",)


@pytest.fixture(scope="session")
def executed_notebooks_dir(tmp_path_factory) -> Path:
    """Where this session's checked, executed example notebooks are kept (one folder per session)."""
    folder = tmp_path_factory.getbasetemp() / EXECUTED_NOTEBOOKS
    folder.mkdir(exist_ok=True)
    return folder


def pytest_collection_modifyitems(config, items) -> None:
    """The docs site's tests last: by then the example notebooks have been executed (see above)."""
    items.sort(key=lambda item: item.path.name in LAST_MODULES)  # stable: every other order is kept
