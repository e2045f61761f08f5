"""Built-in tools derive their args schema without the injected ``runtime`` (deerflow/tools/schema.py).

What the model sees must not change: every built-in tool's description and model-facing
schema equal LangChain's own derivation from the same function, and ``runtime`` is still
injected (a real tool call through ``ToolNode`` reads the thread's files).
"""

from __future__ import annotations

import pytest
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

from deerflow.sandbox.execution.local import LocalSandboxProvider
from deerflow.tools.builtins.exec_tools import exec_tools
from deerflow.tools.builtins.file_tools import FILE_READ_TOOLS, FILE_WRITE_TOOLS
from deerflow.tools.builtins.notebook_tools import notebook_tools
from deerflow.tools.builtins.present_files import present_files
from deerflow.tools.builtins.skill_tools import describe_skill, install_skill
from deerflow.tools.builtins.uploads_tool import list_uploaded_files
from deerflow.tools.builtins.view_image import view_image
from deerflow.tools.builtins.web_tools import web_tools
from deerflow.tools.schema import as_tool, function_tool

# How each tool was declared: its arguments documented in a Google-style docstring (parsed), or its
# description the function's docstring.
PARSED = {"ls", "read_file", "glob", "grep", "write_file", "str_replace", "describe_skill", "install_skill"}
DOCSTRING = {*PARSED, "list_uploaded_files", "view_image", "present_files"}


def builtin_tools() -> list[BaseTool]:
    return [*FILE_READ_TOOLS, *FILE_WRITE_TOOLS, *web_tools(), *notebook_tools(),
            *exec_tools(LocalSandboxProvider(allow_host_bash=True), python_timeout=30),
            present_files, list_uploaded_files, view_image, describe_skill, install_skill]


@pytest.mark.parametrize("tool", builtin_tools(), ids=lambda t: t.name)
def test_model_facing_schema_matches_langchains_derivation(tool: StructuredTool) -> None:
    reference = StructuredTool.from_function(
        func=tool.func, coroutine=tool.coroutine, name=tool.name,
        description=None if tool.name in DOCSTRING else tool.description,
        parse_docstring=tool.name in PARSED, response_format=tool.response_format)
    assert tool.description == reference.description
    assert tool.tool_call_schema.model_json_schema() == reference.tool_call_schema.model_json_schema()
    assert tool.args == reference.args
    # LangChain still knows to inject runtime; it is left out of the schema unless it is the only parameter
    assert "runtime" in tool._injected_args_keys
    fields = tool.args_schema.model_fields  # type: ignore[union-attr]
    assert ("runtime" in fields) == (tool.name == "list_uploaded_files"), sorted(fields)


def test_runtime_is_injected_through_tool_node() -> None:
    """A tool made by ``as_tool`` gets its ``ToolRuntime`` (and its arguments validated) in a real ToolNode."""
    seen: dict[str, object] = {}

    @as_tool("echo", parse_docstring=True)
    def echo(text: str, runtime: ToolRuntime, times: int = 1) -> str:
        """Repeat text.

        Args:
            text: What to repeat.
            times: How often.
        """
        seen["runtime"] = runtime
        return text * times

    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode([echo]))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    app = graph.compile()
    call = {"name": "echo", "args": {"text": "ab", "times": "2"}, "id": "c1", "type": "tool_call"}
    out = app.invoke({"messages": [AIMessage("", tool_calls=[call])]})
    assert out["messages"][-1].content == "abab"  # "2" validated to an int by the args schema
    runtime = seen["runtime"]
    assert isinstance(runtime, ToolRuntime) and runtime.tool_call_id == "c1"
    bad = {**call, "args": {"times": 1}, "id": "c2"}
    error = app.invoke({"messages": [AIMessage("", tool_calls=[bad])]})["messages"][-1]
    assert error.status == "error" and "text" in error.content  # missing argument reported to the model


def test_a_tool_with_only_runtime_still_gets_it() -> None:
    @as_tool("whoami")
    def whoami(runtime: ToolRuntime) -> str:
        """Say which call this is."""
        return f"call {runtime.tool_call_id}"

    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode([whoami]))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    call = {"name": "whoami", "args": {}, "id": "c9", "type": "tool_call"}
    out = graph.compile().invoke({"messages": [AIMessage("", tool_calls=[call])]})
    assert out["messages"][-1].content == "call c9"


def test_coroutine_tools_are_async() -> None:
    @as_tool("later")
    async def later(n: int, runtime: ToolRuntime) -> str:
        """Wait for nothing."""
        return str(n + 1)

    assert later.coroutine is not None and later.func is None
    assert later.tool_call_schema.model_json_schema()["properties"] == {"n": {"title": "N", "type": "integer"}}
    with pytest.raises(ValueError):
        function_tool(name="nothing")
