"""A trivial tool shared by the benchmarks (loaded by config as ``bench_tools:echo``)."""

from langchain_core.tools import tool


@tool
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text
