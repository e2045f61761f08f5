"""MCP listings as tools (filter, prefix, name checks), result mapping, and the deferred catalog."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import mcp_types

from deerflow.config.paths import HomePaths
from deerflow.mcp.config import RoutingHints
from deerflow.mcp.deferral import DeferredCatalog, ServerInfo
from deerflow.mcp.results import map_result
from deerflow.mcp.tools import make_tool, server_specs

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")


def tool(name: str, description: str = "does things", schema: dict | None = None) -> mcp_types.Tool:
    return mcp_types.Tool(name=name, description=description, input_schema=schema or {"type": "object"})


def specs(tools, **options):
    warnings: list[str] = []
    options = {"prefix": "srv_", "include": None, "exclude": [], **options}
    return server_specs("srv", tools, warn=warnings.append, **options), warnings


def test_unsafe_names_are_dropped_with_a_warning_and_the_rest_prefixed():
    found, warnings = specs([tool("ok"), tool("bad\nname"), tool("<b>x</b>"), tool("a" * 70), tool("dot.ted"),
                             tool("dot_ted")])
    assert [s.name for s in found] == ["srv_ok", "srv_dot_ted"]
    assert [s.remote_name for s in found] == ["ok", "dot.ted"]  # calls use the server's own name
    assert len(warnings) == 4 and all(w.startswith("MCP server 'srv': tool ") for w in warnings)
    assert any("already has that name" in w for w in warnings)  # dot_ted collides with dot.ted
    assert any("longer than 64" in w for w in warnings)


def test_include_exclude_and_no_prefix():
    listing = [tool("read"), tool("write"), tool("delete")]
    found, _ = specs(listing, include=["read", "wr*"], exclude=["write"], prefix="")
    assert [s.name for s in found] == ["read"]


def test_the_langchain_tool_keeps_the_servers_schema_and_a_clean_description():
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    (spec,), _ = specs([tool("weather", "Weather\x07 for a city.\nMore.", schema)])
    made = make_tool(spec, caller=None)  # the caller is only needed to run it
    assert made.name == "srv_weather" and made.description == "Weather  for a city.\nMore."
    assert made.tool_call_schema["properties"] == schema["properties"]
    assert made.metadata == {"mcp_server": "srv", "mcp_tool": "weather"}


def test_results_map_text_structured_images_and_errors(tmp_path: Path):
    paths = HomePaths(tmp_path).thread("u", "t").ensure()
    result = mcp_types.CallToolResult(content=[
        mcp_types.TextContent(type="text", text="hello"),
        mcp_types.ImageContent(type="image", data=base64.b64encode(PNG).decode(), mime_type="image/png"),
        mcp_types.ImageContent(type="image", data="not base64!", mime_type="image/png"),
    ], structured_content={"n": 1})
    out = map_result(result, server="srv", tool="draw", call_id="call/1", paths=paths)
    assert out.images == ["/mnt/user-data/outputs/mcp/srv/draw-call_1-1.png"]
    assert (paths.outputs / "mcp/srv/draw-call_1-1.png").read_bytes() == PNG
    assert out.text.splitlines() == ["hello", f"[image saved to {out.images[0]} (70 bytes, image/png)]",
                                     "[image (image/png) dropped: invalid base64]"]
    assert out.artifact("srv", "draw")["structured_content"] == {"n": 1} and not out.is_error

    only_structured = mcp_types.CallToolResult(content=[], structured_content={"total": 3})
    assert json.loads(map_result(only_structured, server="s", tool="t", call_id="c", paths=None).text) == {"total": 3}
    error = mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text="quota exceeded")],
                                     is_error=True)
    mapped = map_result(error, server="s", tool="t", call_id="c", paths=None)
    assert mapped.is_error and mapped.text == "quota exceeded"


def catalog() -> DeferredCatalog:
    found, _ = specs([tool("get_time", "Current time in a timezone"), tool("convert", "Convert between zones"),
                      tool("add", "Add numbers")])
    hints = RoutingHints(keywords=["clock", "what time"], auto_promote=["get_time"], hint="for time questions")
    return DeferredCatalog({s.name: s for s in found}, {"srv": ServerInfo("time tools", hints)}, max_results=2)


def test_search_selects_by_name_and_ranks_keywords():
    deferred = catalog()
    picked = deferred.search("select:srv_add, get_time, nope")
    assert [s.name for s in picked.matches] == ["srv_add", "srv_get_time"] and picked.unknown == ["nope"]
    assert [s.name for s in deferred.search("time zone convert").matches][:1] == ["srv_convert"]
    assert deferred.search("!!!").matches == []


def test_promotions_count_only_for_the_current_catalog():
    deferred = catalog()
    assert deferred.promoted({"catalog_hash": deferred.hash, "names": ["srv_add", "gone"]}) == {"srv_add"}
    assert deferred.promoted({"catalog_hash": "stale", "names": ["srv_add"]}) == set()
    smaller = deferred.restrict(["srv_add"])
    assert smaller.hash != deferred.hash and list(smaller.specs) == ["srv_add"]


def test_routing_hints_promote_on_keywords_and_the_prompt_lists_names_only():
    deferred = catalog()
    assert deferred.auto_promotions("What time is it in Lima?") == ["srv_get_time"]
    assert deferred.auto_promotions("Add 2 and 3") == []
    section = deferred.prompt_section({"srv_get_time"})
    assert "- srv — time tools: srv_add, srv_convert" in section and "hint: for time questions" in section
    assert "Current time" not in section  # names, not descriptions or schemas
    assert deferred.prompt_section(set(deferred.specs)) is None
