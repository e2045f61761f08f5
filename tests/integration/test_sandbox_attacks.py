"""Attacks planted from inside the sandbox (bubblewrap and Docker) on the host-side readers and writers (issue #16).

Each test runs the real agent (embedded client, ``sandbox.use: bwrap``, and again with ``docker``
where an engine and the test image are there) on a
scripted model that plays what a prompt-injected model would: its own
``python`` cell plants a symlink, a directory swap, a FIFO... at the exact path
a host-side writer or reader is about to use, and the next tool call makes the
host act on it.  A host canary outside the thread (a directory with a secret
file, under ``tmp_path``) must stay unchanged, its content must never appear in
any event, and nothing new may appear in it.  The canary, the sandbox parameter and the helpers
are in ``fixtures/sandbox_attacks.py``; the attacks that make the host do unbounded work (a
huge file, a crowded notebook, a pathological traceback) are in
``test_sandbox_attacks_bounded.py``.

The link targets are absolute *host* paths: they do not exist inside the
sandbox, and they do not need to: the host, not the sandbox, would follow them.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from deerflow import AsyncDeerFlowClient, DeerFlowClient
from deerflow.client import RunResult
from deerflow.config.paths import HomePaths
from deerflow.runs.thread_files import ArtifactNotFound
from deerflow.runtime import events as ev
from fixtures.mcp_servers import call, stdio_entry, write_extensions
from fixtures.sandbox_attacks import (  # canary_fixture registers the fixture `canary`
    OUT,
    SECRET,
    WS,
    Canary,
    all_text,
    assert_untouched,
    canary_fixture,  # noqa: F401
    config,
    py,
    tool_results,
)
from fixtures.web_browser import PAGES, need_chromium
from fixtures.web_server import serve

pytestmark = [
    pytest.mark.integration,
]

RACE_CALLS = 200  # the bound: >= 200 attempts per racing tool
PER_RUN = 50  # the loop guard allows 50 calls of one tool per run
PER_TURN = 25  # parallel tool calls per scripted turn
PNG_B64 = base64.b64encode(
    base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
    )
).decode()

# A kernel-side thread that swaps directory ``d`` with the symlink ``swap`` (to the host canary
# directory) with renameat2(RENAME_EXCHANGE) until ``_swap_stop`` is set; counts its swaps.
SWAPPER = """
import ctypes, os, threading
_libc = ctypes.CDLL(None, use_errno=True)
os.makedirs('d', exist_ok=True)
open('d/canary.txt', 'w').write('decoy-in-workspace')
if not os.path.lexists('swap'):
    os.symlink({canary!r}, 'swap')
_swap_stop = threading.Event()
_swaps = [0]
def _swap_loop():
    while not _swap_stop.is_set():
        if _libc.renameat2(-100, b'd', -100, b'swap', 2) == 0:  # AT_FDCWD, RENAME_EXCHANGE
            _swaps[0] += 1
threading.Thread(target=_swap_loop, daemon=True).start()
print('swapper started')
"""
STOP_SWAPPER = "_swap_stop.set(); import time; time.sleep(0.2); print('swaps', _swaps[0])"


def test_cell_outputs_do_not_follow_a_planted_figures_link(tmp_path: Path, deerflow_home: Path,
                                                            canary: Canary) -> None:
    show = f"from IPython.display import Image, display\ndisplay(Image(data=__import__('base64').b64decode({PNG_B64!r})))"
    turns = [
        # ``figures`` itself is a link to the host directory
        {"tool_calls": [py(f"import os\nos.symlink({str(canary.dir)!r}, 'figures')\n{show}")]},
        # ``figures`` is real, and the exact names the next cells' images get are links
        {"tool_calls": [py("import os\nos.remove('figures'); os.mkdir('figures')\n"
                           f"for n in range(1, 10):\n    os.symlink({str(canary.file)!r}, f'figures/cell-{{n}}-1.png')\n"
                           f"{show}")]},
        {"tool_calls": [py(show)]},
        "Done.",
    ]
    before = canary.snapshot()
    with DeerFlowClient(config_path=config(tmp_path, turns, canary)) as client:
        result = client.chat("plot it")
        figures = HomePaths(deerflow_home).thread("local", result.thread_id).workspace / "figures"
    assert result.status == "success", result.error
    first, second, third = (e.text for e in tool_results(result, "python"))
    assert "not saved" in first and "symbolic link" in first  # the linked folder is refused
    # a link at the file's own name is replaced by the new file, never written through
    for name, text in (("cell-2-1.png", second), ("cell-3-1.png", third)):
        assert f"{WS}/figures/{name}" in text
        assert not (figures / name).is_symlink() and (figures / name).read_bytes().startswith(b"\x89PNG")
    assert (figures / "cell-4-1.png").is_symlink()  # planted links elsewhere stay the agent's own
    assert_untouched(canary, before, result)


def test_agent_notebook_is_not_written_through_planted_links(tmp_path: Path, deerflow_home: Path,
                                                             canary: Canary) -> None:
    plant = (
        "import os\n"
        "pids = set(range(1, 3000)) | {os.getpid(), os.getppid()}\n"
        "pids |= {int(v) for k, v in os.environ.items() if k.endswith('PID') and v.isdigit()}\n"
        "for pid in pids:\n"
        f"    os.symlink({str(canary.file)!r}, f'.agent.ipynb.{{pid}}.tmp')\n"
        "if os.path.lexists('agent.ipynb'):\n    os.remove('agent.ipynb')\n"
        f"os.symlink({str(canary.file)!r}, 'agent.ipynb')\n"
        "print(len(pids), 'links')"
    )
    turns = [{"tool_calls": [py(plant)]}, {"tool_calls": [py("1 + 1")]},
             {"tool_calls": [py(plant.replace("os.symlink(", "os.path.lexists(f'.agent.ipynb.{pid}.tmp') or os.symlink(", 1))]},
             {"tool_calls": [py("2 + 2")]}, "Done."]
    before = canary.snapshot()
    with DeerFlowClient(config_path=config(tmp_path, turns, canary)) as client:
        result = client.chat("compute")
        workspace = HomePaths(deerflow_home).thread("local", result.thread_id).workspace
    assert result.status == "success", result.error
    assert [e.status for e in tool_results(result, "python")] == ["success"] * 4
    assert_untouched(canary, before, result)
    assert (workspace / "agent.ipynb").is_file() and not (workspace / "agent.ipynb").is_symlink()
    assert "2 + 2" in (workspace / "agent.ipynb").read_text()


def test_mcp_images_are_not_saved_through_a_planted_server_folder(tmp_path: Path, deerflow_home: Path,
                                                                 canary: Canary) -> None:
    turns = [
        {"tool_calls": [py(f"import os\nos.makedirs('{OUT}/mcp', exist_ok=True)\n"
                           f"os.symlink({str(canary.dir)!r}, '{OUT}/mcp/test')")]},
        {"tool_calls": [call("test_image", caption="planted")]},
        "Done.",
    ]
    write_extensions(tmp_path / "extensions_config.json", {"test": stdio_entry()})
    before = canary.snapshot()
    with DeerFlowClient(config_path=config(tmp_path, turns, canary)) as client:
        result = client.chat("use the image tool")
    assert result.status == "success", result.error
    (image,) = tool_results(result, "test_image")
    assert "planted" in image.text  # the tool answered; only the save was refused
    assert not [e for e in result.events if isinstance(e, ev.Artifact)]
    assert_untouched(canary, before, result)


def race(tmp_path: Path, canary: Canary, calls: list[dict[str, Any]]) -> list[RunResult]:
    """Play ``calls`` against the swapping cell: one run starts the swapper, then runs of
    ``PER_RUN`` calls (the per-run cap of one tool), then a run stops it.  One thread,
    so the kernel and its swapping thread live across the runs."""
    turns: list[Any] = [{"tool_calls": [py(SWAPPER.format(canary=str(canary.dir)))]}, "Swapping."]
    for start in range(0, len(calls), PER_RUN):
        batch = calls[start:start + PER_RUN]
        turns += [*({"tool_calls": batch[i:i + PER_TURN]} for i in range(0, len(batch), PER_TURN)), "Batch done."]
    turns += [{"tool_calls": [py(STOP_SWAPPER)]}, "Done."]
    results = []
    with DeerFlowClient(config_path=config(tmp_path, turns, canary)) as client:
        results.append(client.chat("start"))
        thread_id = results[0].thread_id
        for _ in range(0, len(calls), PER_RUN):
            results.append(client.chat("go on", thread_id))
        results.append(client.chat("stop", thread_id))
    for result in results:
        assert result.status == "success", result.error
        assert not result.notices, result.notices
    return results


def _swaps(results: list[RunResult]) -> int:
    last = tool_results(results[-1], "python")[-1].text
    return int(last.split("swaps", 1)[1].split()[0])


def _answers(results: list[RunResult], name: str) -> list[ev.ToolResult]:
    return [a for r in results for a in tool_results(r, name)]


def test_write_file_racing_a_directory_swap_never_lands_on_the_host(tmp_path: Path, deerflow_home: Path,
                                                                    canary: Canary) -> None:
    writes = [call("write_file", path=f"{WS}/d/planted-{i}.txt", content=f"attack {i}") for i in range(RACE_CALLS)]
    before = canary.snapshot()
    results = race(tmp_path, canary, writes)
    assert _swaps(results) > 0  # the swap really ran while the writes did
    answers = _answers(results, "write_file")
    assert len(answers) == RACE_CALLS and not any("most allowed" in a.text for a in answers)
    assert_untouched(canary, before, *results)


def test_read_file_racing_a_directory_swap_never_reads_the_host(tmp_path: Path, deerflow_home: Path,
                                                                canary: Canary) -> None:
    # distinct arguments, or loop detection (rightly) stops 200 identical calls
    reads = [call("read_file", path=f"{WS}/d/canary.txt", start_line=1, end_line=i + 1) for i in range(RACE_CALLS)]
    before = canary.snapshot()
    results = race(tmp_path, canary, reads)
    assert _swaps(results) > 0
    answers = _answers(results, "read_file")
    assert len(answers) == RACE_CALLS and not any("most allowed" in a.text for a in answers)
    assert any("decoy-in-workspace" in a.text for a in answers)  # reads did happen
    assert_untouched(canary, before, *results)


async def test_read_file_on_a_fifo_fails_promptly_and_other_threads_run(tmp_path: Path, deerflow_home: Path,
                                                                        canary: Canary) -> None:
    turns = [{"tool_calls": [py("import os\nos.mkfifo('pipe')")]},
             {"tool_calls": [call("read_file", path=f"{WS}/pipe")]}, "Done."]
    async with AsyncDeerFlowClient(config_path=config(tmp_path, turns, canary)) as client:
        # (threads made first: two concurrent first calls would each open a run manager)
        threads = [await client.create_thread(), await client.create_thread()]
        # two threads at once, both reading their own FIFO; a hang guard, not a timing assertion
        first, second = await asyncio.wait_for(
            asyncio.gather(*(client.chat("read the pipe", t) for t in threads)), timeout=180)
    for result in (first, second):
        assert result.status == "success", result.error
        (read,) = tool_results(result, "read_file")
        assert read.status == "error" and "regular file" in read.text, read.text


def test_read_file_refuses_a_hard_link_to_a_host_file(tmp_path: Path, deerflow_home: Path,
                                                      canary: Canary) -> None:
    # The sandbox cannot make this link itself: a hard link cannot cross bwrap's bind mounts
    # (EXDEV), and the canary is not visible inside.  A co-tenant on the host, or an earlier
    # compromise, could; so the test plants it from the host side and checks the reader.
    turns = [{"tool_calls": [call("read_file", path=f"{WS}/linked.txt")]}, "Done."]
    before = canary.snapshot()
    with DeerFlowClient(config_path=config(tmp_path, turns, canary)) as client:
        thread_id = client.create_thread()
        workspace = HomePaths(deerflow_home).thread("local", thread_id).ensure().workspace
        os.link(canary.file, workspace / "linked.txt")
        result = client.chat("read the link", thread_id)
    assert result.status == "success", result.error
    (read,) = tool_results(result, "read_file")
    assert read.status == "error" and "link" in read.text, read.text
    assert SECRET not in all_text(result)
    assert canary.file.read_text() == SECRET and canary.snapshot().keys() == before.keys()


def test_artifacts_never_serve_a_planted_link(tmp_path: Path, deerflow_home: Path, canary: Canary) -> None:
    turns = [{"tool_calls": [py(f"import os\nos.symlink({str(canary.file)!r}, '{OUT}/report.txt')")]},
             {"tool_calls": [call("present_files", filepaths=[f"{OUT}/report.txt"])]}, "Done."]
    before = canary.snapshot()
    with DeerFlowClient(config_path=config(tmp_path, turns, canary)) as client:
        result = client.chat("present it")
        with pytest.raises(ArtifactNotFound) as refused:  # a user error, not the model-facing ToolFailure
            client.read_artifact(result.thread_id, f"{OUT}/report.txt")
    assert refused.value.code == "not_found"
    assert SECRET not in str(refused.value)
    assert_untouched(canary, before, result)


def test_browser_screenshots_are_not_written_through_planted_links(tmp_path: Path, deerflow_home: Path,
                                                                   canary: Canary) -> None:
    need_chromium()
    shot = call("browser_screenshot", filename="shot.png")
    auto = call("browser_screenshot")
    with serve(PAGES) as site:
        turns = [
            {"tool_calls": [call("browser_navigate", url=site.url("/form"))]},
            # ``screenshots`` itself is a link to the host directory
            {"tool_calls": [py(f"import os\nos.symlink({str(canary.dir)!r}, '{OUT}/screenshots')")]},
            {"tool_calls": [shot]}, {"tool_calls": [auto]},
            # a real folder, with links at the requested name and at the automatic names
            {"tool_calls": [py(f"import os\nos.remove('{OUT}/screenshots'); os.mkdir('{OUT}/screenshots')\n"
                               f"os.symlink({str(canary.file)!r}, '{OUT}/screenshots/shot.png')\n"
                               "for n in range(1, 20):\n"
                               f"    os.symlink({str(canary.file)!r}, f'{OUT}/screenshots/order-{{n:03d}}.png')")]},
            {"tool_calls": [shot]}, {"tool_calls": [auto]},
            "Done.",
        ]
        extra = {"browser": {"enabled": True, "allow_private_addresses": True}}
        before = canary.snapshot()
        with DeerFlowClient(config_path=config(tmp_path, turns, canary, **extra)) as client:
            result = client.chat("screenshot the form")
            outputs = HomePaths(deerflow_home).thread("local", result.thread_id).outputs
    assert result.status == "success", result.error
    through_dir, through_dir_auto, by_name, by_auto = tool_results(result, "browser_screenshot")
    for refused in (through_dir, through_dir_auto):
        assert refused.status == "error" and "symbolic link" in refused.text, refused.text
    assert by_name.status == "success", by_name.text
    saved = outputs / "screenshots" / "shot.png"  # the planted link was replaced, not followed
    assert not saved.is_symlink() and saved.read_bytes().startswith(b"\x89PNG")
    assert by_auto.status == "success" and "order-020.png" in by_auto.text, by_auto.text  # links skipped
    assert (outputs / "screenshots" / "order-001.png").is_symlink()
    assert_untouched(canary, before, result)


@pytest.fixture
def jp_server_config(deerflow_home: Path, tmp_path: Path, canary: Canary) -> dict[str, Any]:
    turns = [{"tool_calls": [py(f"import os\nos.symlink({str(canary.file)!r}, '{OUT}/report.txt')")]}, "Done."]
    return {
        "ServerApp": {"jpserver_extensions": {"deerflow_jupyter": True}},
        "DeerFlowExtension": {"export_kernel_env": False, "config_path": str(config(tmp_path, turns, canary)),
                              "home": str(deerflow_home), "owner": "owner"},
    }


async def test_the_artifact_route_never_serves_a_planted_link(jp_fetch, canary: Canary) -> None:
    api = ("deerflow", "api")
    thread = json.loads((await jp_fetch(*api, "threads", method="POST", body="{}")).body)["thread_id"]
    body = json.dumps({"assistant_id": "lead_agent", "input": {"messages": [{"role": "user", "content": "go"}]}})
    values = json.loads((await jp_fetch(*api, "threads", thread, "runs", "wait", method="POST", body=body)).body)
    assert any(m.get("name") == "python" for m in values["messages"])  # the planting cell ran
    with pytest.raises(HTTPClientError) as refused:
        await jp_fetch(*api, "threads", thread, "artifacts", "report.txt")
    assert refused.value.code == 404
    assert SECRET.encode() not in (refused.value.response.body or b"")
    listing = (await jp_fetch(*api, "threads", thread, "artifacts")).body
    assert SECRET.encode() not in listing and canary.file.read_text() == SECRET


def test_change_summaries_never_read_through_swaps_links_or_fifos(tmp_path: Path, deerflow_home: Path,
                                                                  canary: Canary) -> None:
    """The run's change summary snapshots the workspace while the agent's code keeps swapping ``d``
    with a link to the host directory, and a link and a FIFO sit in the workspace."""
    plant = (f"import os\nos.symlink({str(canary.file)!r}, 'leak.txt')\nos.mkfifo('pipe')\n"
             "open('note.txt', 'w').write('a real change')")
    before = canary.snapshot()
    results = race(tmp_path, canary, [py(plant)])  # the swapper runs through the whole run, snapshots included
    assert _swaps(results) > 0
    changes = [e for r in results for e in r.events if isinstance(e, ev.WorkspaceChanges)]
    assert any("note.txt" in repr(e) for e in changes), changes
    assert_untouched(canary, before, *results)


def test_uploads_cannot_be_planted_from_the_sandbox(tmp_path: Path, deerflow_home: Path, canary: Canary) -> None:
    """Uploads, the skills view and the ACP workspace are the host's to write: the sandbox sees them
    read-only (or not at all), so it cannot plant a link where the host writes next, and the next
    upload writes a new regular file."""
    attempt = ("import os\n"
               f"for where in ('/mnt/user-data/uploads/data.csv', '/mnt/skills/x', '/mnt/acp-workspace/x'):\n"
               f"    try:\n        os.symlink({str(canary.file)!r}, where)\n        print('planted', where)\n"
               "    except OSError as exc:\n        print('refused', where, exc.errno)")
    turns = [{"tool_calls": [py(attempt)]}, "Done."]
    before = canary.snapshot()
    with DeerFlowClient(config_path=config(tmp_path, turns, canary)) as client:
        result = client.chat("try it")
        client.upload(result.thread_id, b"a,b\n1,2\n", name="data.csv")
        uploads = HomePaths(deerflow_home).thread("local", result.thread_id).uploads
    (answer,) = tool_results(result, "python")
    assert "planted" not in answer.text and answer.text.count("refused") == 3, answer.text
    assert not (uploads / "data.csv").is_symlink() and (uploads / "data.csv").read_bytes() == b"a,b\n1,2\n"
    assert_untouched(canary, before, result)


def test_install_skill_never_copies_a_package_through_a_planted_link(tmp_path: Path, deerflow_home: Path,
                                                                     canary: Canary) -> None:
    """``install_skill`` freezes a copy of the package the agent names; a link on the way there
    (to another user's skills, relative, or to a host directory, absolute) is refused, not followed:
    the sandbox cannot read either, and an approval would install it as this user's skill."""
    public = tmp_path / "public" / "skill-creator"
    public.mkdir(parents=True)
    (public / "SKILL.md").write_text("---\nname: skill-creator\ndescription: Makes skills.\n"
                                     "allowed-tools: [install_skill, python]\n---\nWrite, then install.\n")
    theirs = deerflow_home / "users" / "bob" / "skills" / "bobs-skill"
    theirs.mkdir(parents=True)
    (theirs / "SKILL.md").write_text(f"---\nname: bobs-skill\ndescription: Bob's. {SECRET}\n---\nBody.\n")
    (canary.dir / "SKILL.md").write_text(f"---\nname: host-skill\ndescription: Host. {SECRET}\n---\nBody.\n")
    plant = (f"import os\nos.symlink('../../../../../bob/skills', 'theirs')\n"  # workspace -> .../users
             f"os.symlink({str(canary.dir.parent)!r}, 'host')")
    turns = [{"tool_calls": [py(plant)]},
             {"tool_calls": [call("install_skill", path=f"{WS}/theirs/bobs-skill")]},
             {"tool_calls": [call("install_skill", path=f"{WS}/host/{canary.dir.name}")]},
             "Done."]
    before = canary.snapshot()
    with DeerFlowClient(config_path=config(tmp_path, turns, canary, skills={"path": str(tmp_path / "public")})) as client:
        result = client.chat("install my skill")
        pending = HomePaths(deerflow_home).thread("local", result.thread_id).root / "pending-changes"
    assert result.status == "success", result.error
    answers = tool_results(result, "install_skill")
    assert len(answers) == 2
    for answer in answers:
        assert answer.status == "error" and "symbolic link" in answer.text, answer.text
    assert not pending.exists() or not any(pending.rglob("SKILL.md"))  # nothing frozen from outside
    assert_untouched(canary, before, result)
