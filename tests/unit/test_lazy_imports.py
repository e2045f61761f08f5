"""Importing the CLI or the embedded client must not load heavy optional capabilities.

``nbformat`` pulls in ``jsonschema``, whose ``rfc3987_syntax`` dependency compiles
a grammar at import (over a second); the MCP SDK, Playwright and the OpenAI
client are only needed when a run uses them.  These tests check *which* modules
an import loads (structure, not timing), in a fresh interpreter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("nbformat", "jsonschema", "rfc3987_syntax", "mcp", "mcp_types", "playwright", "langchain_openai")
REPO = Path(__file__).resolve().parents[2]


def loaded_after(statement: str) -> set[str]:
    """Top-level package names in ``sys.modules`` after running ``statement`` in a new interpreter."""
    code = f"{statement}\nimport json, sys\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO / "harness"), str(REPO / "extension"), str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                          check=True)
    return set(json.loads(done.stdout.splitlines()[-1]))


@pytest.mark.parametrize("statement", ["import deerflow.cli", "from deerflow.cli import build_parser; build_parser()"])
def test_cli_import_loads_no_heavy_capability(statement: str) -> None:
    loaded = loaded_after(statement)
    assert not loaded & set(HEAVY), f"{statement!r} imported {sorted(loaded & set(HEAVY))}"
    # --help needs only the parser: the agent stack (LangChain, LangGraph) stays unloaded too.
    assert not loaded & {"langchain", "langchain_core", "langgraph"}, sorted(loaded)
    # nor asyncio (with ssl and socket, about a third of the CLI's import): commands import it when they run.
    assert not loaded & {"asyncio", "ssl"}, sorted(loaded & {"asyncio", "ssl"})


def test_client_import_loads_no_heavy_capability() -> None:
    loaded = loaded_after("import deerflow.client")
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))
    # The python tool's kernel stack loads with the first kernel start, not with the client.
    assert not loaded & set(KERNEL_STACK), sorted(loaded & set(KERNEL_STACK))


KERNEL_STACK = ("jupyter_client", "zmq", "traitlets")


def test_offline_run_imports_only_what_it_uses(tmp_path: Path) -> None:
    """A whole offline ``chat`` on a new home (the CLI's ``deerflow run "hi"``): its script writes and reads
    files, so no kernel, notebook format, MCP SDK, browser, docker or OpenAI client is loaded."""
    statement = ("import os\n"
                 f"os.environ.update(DEERFLOW_HOME={str(tmp_path / 'home')!r}, "
                 f"DEERFLOW_NOTEBOOK_ROOT={str(tmp_path)!r})\n"
                 "for k in [k for k in os.environ if k.startswith(('OPENAI_', 'DEERFLOW_CONFIG'))]: del os.environ[k]\n"
                 f"os.chdir({str(tmp_path)!r})\n"
                 "from deerflow.client import DeerFlowClient\n"
                 "with DeerFlowClient() as c:\n"
                 "    result = c.chat('hi')\n"
                 "assert result.status == 'success', result\n"
                 "assert result.artifacts, result")
    loaded = loaded_after(statement)
    # nor LangGraph's SQLite store (sqlite_vec, numpy): a new home's memory store opens on its first write
    unwanted = {*HEAVY, *KERNEL_STACK, "openai", "docker", "sqlite_vec", "numpy"}
    assert not loaded & unwanted, sorted(loaded & unwanted)
    assert {"langgraph", "langchain"} <= loaded  # the run did run the agent


def test_kernel_start_still_imports_jupyter_client() -> None:
    """The lazy import is on the path that needs it: the spec manager class comes from jupyter_client."""
    statement = ("from deerflow.sandbox.kernels.kernel import _fixed_spec_manager_class\n"
                 "from jupyter_client.kernelspec import KernelSpec, KernelSpecManager\n"
                 "cls = _fixed_spec_manager_class()\n"
                 "spec = KernelSpec(argv=['python'], display_name='x', language='python')\n"
                 "assert issubclass(cls, KernelSpecManager) and cls(spec).get_kernel_spec('any') is spec")
    assert "jupyter_client" in loaded_after(statement)


# What a run's host imports before the run uses a notebook, a browser or docker.
RUN_PATH = ("import deerflow.runs.manager, deerflow.notebooks.host, deerflow.notebooks.service, "
            "deerflow.tools.builtins.notebook_tools, deerflow.sandbox.kernels.kernel_pool, deerflow.sandbox.kernels.cell_output\n"
            "import deerflow.mcp.manager, deerflow.mcp.tasks, deerflow.mcp.results, deerflow.mcp.task_tools\n"
            "from deerflow.notebooks.access import FileNotebookAccess\n"
            "FileNotebookAccess.from_env()")


def test_run_path_loads_no_notebook_format_mcp_sdk_browser_or_docker() -> None:
    """Opening a host and starting a run (no notebook, no MCP server) must not pay for nbformat's schema
    stack or the MCP SDK: each loads with its first use (a notebook read, a session)."""
    loaded = loaded_after(RUN_PATH)
    unwanted = {"nbformat", "jsonschema", "rfc3987_syntax", "mcp", "mcp_types", "playwright", "docker"}
    assert not loaded & unwanted, sorted(loaded & unwanted)


def test_notebook_read_loads_nbformat_when_used(tmp_path: Path) -> None:
    """The lazy import is on the path that needs it: reading a notebook still parses it with nbformat."""
    (tmp_path / "a.ipynb").write_text(json.dumps(
        {"nbformat": 4, "nbformat_minor": 5, "metadata": {},
         "cells": [{"cell_type": "code", "id": "c1", "metadata": {}, "source": "1+1", "outputs": [],
                    "execution_count": None}]}))
    statement = ("import asyncio\nfrom deerflow.notebooks.access import FileNotebookAccess\n"
                 f"nb = asyncio.run(FileNotebookAccess({str(tmp_path)!r}).read('a.ipynb')).nb\n"
                 "assert type(nb).__name__ == 'NotebookNode' and nb.cells[0].source == '1+1', nb")
    assert "nbformat" in loaded_after(statement)


def test_lazy_package_exports_still_resolve() -> None:
    """The packages whose names became lazy still export them (and reject unknown names)."""
    import deerflow.custom_agents as agents
    import deerflow.mcp as mcp
    import deerflow.scheduling as scheduling
    import deerflow.skills as skills

    for package in (agents, mcp, scheduling, skills):
        for name in package.__all__:
            assert getattr(package, name) is not None, f"{package.__name__}.{name}"
    with pytest.raises(AttributeError):
        _ = mcp.NoSuchName
