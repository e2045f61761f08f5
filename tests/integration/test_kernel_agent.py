"""A real agent run: tools find the sandbox and kernel pool in the run context."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, ToolMessage

from deerflow.agents.middlewares.tool_errors import ToolErrorHandlingMiddleware
from deerflow.config.paths import ThreadPaths
from deerflow.config.schema import AppConfig
from deerflow.models.scripted import ScriptedChatModel
from deerflow.runtime.context import RunContext
from deerflow.runtime.services import HostServices
from deerflow.sandbox.execution.bwrap import BwrapSandboxProvider, find_bwrap
from deerflow.sandbox.kernels.kernel_pool import KernelPool
from deerflow.tools.builtins.exec_tools import exec_tools

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(find_bwrap() is None, reason="bubblewrap (bwrap) is not installed"),
]

SCRIPT = [
    {"tool_calls": [{"name": "python", "args": {"code": "total = sum(range(10))\ntotal"}}]},
    {
        "tool_calls": [
            {"name": "bash", "args": {"command": "echo pwned > marker.txt; cat /proc/self/environ"}}
        ]
    },
    {"tool_calls": [{"name": "bash", "args": {"command": "chmod 777 . && ls -ld . | cut -c1-10"}}]},
    {
        "tool_calls": [
            {"name": "python", "args": {"code": "open('total.txt', 'w').write(str(total))"}}
        ]
    },
    "Done.",
]


@pytest.fixture
def services() -> Iterator[dict[str, object]]:
    provider = BwrapSandboxProvider()
    with KernelPool(provider) as kernels:
        yield {"sandbox": provider, "kernels": kernels}
    provider.close()


async def test_scripted_agent_uses_bash_and_python_through_the_run_context(
    tmp_path: Path, services: dict[str, object]
) -> None:
    paths = ThreadPaths(tmp_path / "threads" / "t1").ensure()
    agent = create_agent(
        ScriptedChatModel(script=SCRIPT),
        tools=exec_tools(services["sandbox"]),  # type: ignore[arg-type]
        middleware=[ToolErrorHandlingMiddleware()],
        context_schema=RunContext,
    )
    context = RunContext(
        user_id="u", thread_id="t1", run_id="r1", paths=paths, config=AppConfig(), services=HostServices(**services)
    )
    custom: list[dict[str, object]] = []
    final: dict[str, object] = {}
    async for mode, chunk in agent.astream(
        {"messages": [HumanMessage("go")]}, context=context, stream_mode=["custom", "values"]
    ):
        if mode == "custom":
            custom.append(chunk)
        else:
            final = chunk
    tool_messages = [m for m in final["messages"] if isinstance(m, ToolMessage)]
    python_result, blocked, warned, saved = tool_messages
    assert saved.artifact["status"] == "ok"
    assert python_result.content == "45"
    assert blocked.status == "error" and "blocked by the security audit" in blocked.content
    assert not (paths.workspace / "marker.txt").exists()
    assert "drwxrwxrwx" in warned.content and "[audit warning" in warned.content
    assert (paths.workspace / "total.txt").read_text() == "45"
    assert [(e["type"], e["level"]) for e in custom] == [("audit", "block"), ("audit", "warn")]
