"""web_search and image_search against local fakes of each provider's HTTP contract, plus live checks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from deerflow.config.schema import WebConfig
from deerflow.errors import ConfigError
from deerflow.tools.builtins.web_tools import web_tools
from deerflow.tools.errors import ToolFailure
from deerflow.web.search import make_search_provider
from deerflow.web.service import WebService
from fixtures.web_runtime import tool_runtime
from fixtures.web_search_fakes import INJECTION, duckduckgo_routes, searxng_routes, tavily_routes
from fixtures.web_server import serve

pytestmark = pytest.mark.integration


def tool(name: str):
    return next(t for t in web_tools() if t.name == name)


async def call(tmp_path: Path, config: WebConfig, name: str, query: str, **args):
    runtime = tool_runtime(tmp_path, {"web": WebService.from_config(config)})
    return await tool(name).ainvoke({"type": "tool_call", "id": "c1", "name": name,
                                     "args": {"query": query, "runtime": runtime, **args}})


async def test_duckduckgo_results_are_unwrapped_ads_skipped_and_snippets_neutralized(tmp_path: Path) -> None:
    with serve(duckduckgo_routes()) as fake:
        config = WebConfig(search_provider="duckduckgo", base_url=fake.url(""))
        message = await call(tmp_path, config, "web_search", "honey bees")
    text = message.content
    assert "1. Waggle dance - honey bees\n   https://bees.example/waggle\n   Bees dance to share directions." in text
    assert "https://hive.example/queen" in text
    assert "ads.example" not in text
    assert INJECTION not in text and "instruction-like passage(s) removed" in text
    assert "duckduckgo web search for 'honey bees'" in text
    assert [r["url"] for r in message.artifact["results"]] == ["https://bees.example/waggle",
                                                                 "https://hive.example/queen"]


async def test_duckduckgo_images_use_the_vqd_token(tmp_path: Path) -> None:
    with serve(duckduckgo_routes()) as fake:
        config = WebConfig(search_provider="duckduckgo", base_url=fake.url(""))
        message = await call(tmp_path, config, "image_search", "bee")
    assert "Honey bee on lavender (1200×800)" in message.content
    assert "image: https://img.example/bee.jpg" in message.content
    assert message.artifact["results"][0]["page_url"] == "https://bees.example/photo"


async def test_tavily_sends_its_key_and_returns_results_and_images(tmp_path: Path) -> None:
    with serve(tavily_routes("tvly-test")) as fake:
        config = WebConfig(search_provider="tavily", base_url=fake.url(""), api_key="tvly-test")
        found = await call(tmp_path, config, "web_search", "bee communication", max_results=2)
        images = await call(tmp_path, config, "image_search", "hive")
        wrong = WebConfig(search_provider="tavily", base_url=fake.url(""), api_key="tvly-wrong")
        with pytest.raises(ToolFailure, match="tavily answered HTTP 401"):
            await call(tmp_path, wrong, "web_search", "x")
    assert "Bee communication\n   https://bees.example/comm\n   Bees use pheromones." in found.content
    assert INJECTION not in found.content
    assert "A hive in spring" in images.content and "https://img.example/hive.jpg" in images.content


async def test_searxng_general_and_image_categories(tmp_path: Path) -> None:
    with serve(searxng_routes()) as fake:
        config = WebConfig(search_provider="searxng", base_url=fake.url(""))
        found = await call(tmp_path, config, "web_search", "beekeeping")
        images = await call(tmp_path, config, "image_search", "comb")
    assert "Beekeeping basics\n   https://bees.example/basics\n   Start with one hive." in found.content
    assert "Comb (640×480)" in images.content and "https://img.example/comb.png" in images.content


async def test_an_unreachable_or_failing_provider_is_a_model_error(tmp_path: Path) -> None:
    with serve({}) as fake:
        config = WebConfig(search_provider="searxng", base_url=fake.url(""))
        with pytest.raises(ToolFailure, match="searxng answered HTTP 404") as info:
            await call(tmp_path, config, "web_search", "anything")
    assert info.value.code == "search_failed"
    with pytest.raises(ToolFailure, match="query is empty"):
        await call(tmp_path, config, "web_search", "  ")


@pytest.mark.parametrize(("web", "message"), [
    ({"search_provider": "bing"}, "unknown search provider 'bing'"),
    ({"search_provider": "searxng"}, "needs web.base_url"),
    ({"search_provider": "tavily"}, "needs an API key"),
    ({"search_provider": "collections:OrderedDict"}, "is not a SearchProvider class"),
])
def test_bad_provider_settings_are_config_errors(monkeypatch, web: dict, message: str) -> None:
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    with pytest.raises(ConfigError, match=message) as info:
        make_search_provider(WebConfig(**web), config_file="config.yaml")
    assert "config.yaml" in str(info.value)


# -- live checks: only with a key (or an instance) in the environment ------------------------------

LIVE = {
    "duckduckgo": (os.environ.get("DEERFLOW_LIVE_DUCKDUCKGO"), {"search_provider": "duckduckgo"}),
    "tavily": (os.environ.get("TAVILY_API_KEY"), {"search_provider": "tavily"}),
    "searxng": (os.environ.get("SEARXNG_URL"), {"search_provider": "searxng", "base_url": os.environ.get("SEARXNG_URL")}),
}
_WHY = {"duckduckgo": "set DEERFLOW_LIVE_DUCKDUCKGO=1 to search the real DuckDuckGo",
        "tavily": "set TAVILY_API_KEY to search the real Tavily",
        "searxng": "set SEARXNG_URL to an instance with the JSON format enabled"}


@pytest.mark.parametrize("provider", sorted(LIVE))
async def test_live_provider(tmp_path: Path, provider: str) -> None:
    key, web = LIVE[provider]
    if not key:
        pytest.skip(_WHY[provider])
    message = await call(tmp_path, WebConfig(**web), "web_search", "Python programming language")
    assert message.artifact["results"], message.content
    assert all(r["url"].startswith("http") for r in message.artifact["results"])
