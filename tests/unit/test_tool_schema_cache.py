"""Offline models bind the OpenAI-format schema of each tool, converted once per tool object."""

from __future__ import annotations

from langchain_core.tools import StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from deerflow.models.scripted import openai_tool_schema


def shout(text: str) -> str:
    """Say it louder."""
    return text.upper()


def test_schema_is_converted_once_and_equals_a_fresh_conversion() -> None:
    tool = StructuredTool.from_function(shout)
    first = openai_tool_schema(tool)
    assert first == convert_to_openai_tool(tool)
    assert openai_tool_schema(tool) is first  # the next model call reuses it


def test_a_changed_description_or_another_tool_is_converted_again() -> None:
    tool = StructuredTool.from_function(shout)
    first = openai_tool_schema(tool)
    tool.description = "Say it much louder."
    assert openai_tool_schema(tool)["function"]["description"] == "Say it much louder."
    other = StructuredTool.from_function(shout, name="yell")
    assert openai_tool_schema(other)["function"]["name"] == "yell"
    assert openai_tool_schema({"type": "function", "function": {"name": "raw", "parameters": {}}})[
        "function"]["name"] == "raw"
    assert first["function"]["description"] == "Say it louder."
