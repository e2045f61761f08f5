"""The python tool on real kernels, on the host and inside bubblewrap."""

from __future__ import annotations

import asyncio
import http.server
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool
from nbclient import NotebookClient

from deerflow.config.paths import ThreadPaths
from deerflow.config.schema import AppConfig
from deerflow.runtime.context import RunContext
from deerflow.runtime.services import HostServices
from deerflow.sandbox.execution.bwrap import BwrapSandboxProvider, find_bwrap
from deerflow.sandbox.execution.local import LocalSandboxProvider
from deerflow.sandbox.execution.provider import SandboxProvider
from deerflow.sandbox.kernels.kernel_pool import KernelPool
from deerflow.tools.builtins.exec_tools import exec_tools
from fixtures.notebook_text import cell_outputs

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::UserWarning")]
needs_bwrap = pytest.mark.skipif(find_bwrap() is None, reason="bubblewrap (bwrap) is not installed")


@pytest.fixture(params=["local", pytest.param("bwrap", marks=needs_bwrap)])
def provider(request: pytest.FixtureRequest) -> Iterator[SandboxProvider]:
    if request.param == "local":
        yield LocalSandboxProvider()
        return
    sandbox = BwrapSandboxProvider()
    yield sandbox
    sandbox.close()


@pytest.fixture
def paths(tmp_path: Path) -> ThreadPaths:
    return ThreadPaths(tmp_path / "home" / "users" / "u" / "threads" / "t1").ensure()


@pytest.fixture
def pool(provider: SandboxProvider) -> Iterator[KernelPool]:
    with KernelPool(provider, default_timeout=60, interrupt_grace=2) as kernels:
        yield kernels


@pytest.fixture
def python_tool(provider: SandboxProvider) -> BaseTool:
    return next(t for t in exec_tools(provider) if t.name == "python")


@pytest.fixture
def runtime(paths: ThreadPaths, provider: SandboxProvider, pool: KernelPool) -> ToolRuntime:
    context = RunContext(
        user_id="u", thread_id="t1", run_id="r1", paths=paths, config=AppConfig(),
        services=HostServices(sandbox=provider, kernels=pool),
    )  # fmt: skip
    return ToolRuntime(
        state={},
        context=context,
        config={},
        stream_writer=lambda _: None,
        tool_call_id="c",
        store=None,
    )


def run(tool: BaseTool, runtime: ToolRuntime, code: str, **args: Any) -> ToolMessage:
    call = {
        "type": "tool_call",
        "id": "c",
        "name": "python",
        "args": {"code": code, "runtime": runtime, **args},
    }
    return tool.invoke(call)


def test_state_is_kept_between_calls(python_tool: BaseTool, runtime: ToolRuntime) -> None:
    run(python_tool, runtime, "import math\nradius = 2")
    assert run(python_tool, runtime, "round(math.pi * radius**2, 3)").content == "12.566"


def test_cwd_is_the_workspace_and_files_land_in_the_thread(
    python_tool: BaseTool, runtime: ToolRuntime, paths: ThreadPaths
) -> None:
    message = run(
        python_tool, runtime, "import os\nopen('made.txt', 'w').write('hello')\nprint(os.getcwd())"
    )
    assert message.content == "/mnt/user-data/workspace"
    assert (paths.workspace / "made.txt").read_text() == "hello"


def test_matplotlib_plot_is_saved_as_a_png(
    python_tool: BaseTool, runtime: ToolRuntime, paths: ThreadPaths
) -> None:
    code = "import matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\nplt.title('squares')\nplt.show()"
    message = run(python_tool, runtime, code)
    virtual = message.artifact["files"][0]
    assert virtual.startswith("/mnt/user-data/workspace/figures/") and virtual.endswith(".png")
    assert virtual in message.content
    host = paths.workspace / virtual.removeprefix("/mnt/user-data/workspace/")
    assert host.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


def test_errors_are_summarised_without_host_paths(
    python_tool: BaseTool, runtime: ToolRuntime, paths: ThreadPaths
) -> None:
    message = run(python_tool, runtime, "def ratio(a, b):\n    return a / b\n\nratio(1, 0)")
    assert message.artifact["status"] == "error"
    assert message.content.startswith("Error: ZeroDivisionError: division by zero")
    assert "in ratio: return a / b" in message.content
    assert str(paths.root) not in message.content


def test_infinite_loop_times_out_and_the_kernel_stays_usable(
    python_tool: BaseTool, runtime: ToolRuntime
) -> None:
    run(python_tool, runtime, "kept = 'still here'")
    message = run(python_tool, runtime, "while True:\n    pass", timeout=1)
    assert message.artifact["timed_out"] is True
    assert "timed out after 1s: the cell was interrupted" in message.content
    assert run(python_tool, runtime, "kept").content == "'still here'"


def test_a_kernel_that_ignores_interrupts_is_restarted(
    python_tool: BaseTool, runtime: ToolRuntime
) -> None:
    code = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    time.sleep(0.1)"
    message = run(python_tool, runtime, code, timeout=1)
    assert message.artifact["recovery"] == "restarted"
    assert "restarted, so all variables are gone" in message.content
    assert run(python_tool, runtime, "'signal' in dir()").content == "False"


def test_a_dead_kernel_is_replaced(python_tool: BaseTool, runtime: ToolRuntime) -> None:
    message = run(python_tool, runtime, "import os\nos._exit(1)")
    assert message.artifact["recovery"] == "died"
    assert run(python_tool, runtime, "2 + 2").content == "4"


def test_server_secrets_are_not_visible_to_python(
    python_tool: BaseTool, runtime: ToolRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_API_KEY", "sk-do-not-leak")
    code = (
        "import os\n"
        "print(sorted(k for k in os.environ if 'FAKE' in k))\n"
        "print(b'sk-do-not-leak' in open('/proc/self/environ', 'rb').read())"
    )
    assert run(python_tool, runtime, code).content == "[]\nFalse"


def _cell_texts(nb: nbformat.NotebookNode) -> list[list[tuple[str, str]]]:
    """Comparable text of every code cell's outputs."""
    texts = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        row = []
        for out in cell_outputs(cell):  # one print may arrive in pieces, however the kernel flushed it
            if out.output_type == "stream":
                row.append((out.name, out.text))
            elif out.output_type == "error":
                row.append(("error", f"{out.ename}: {out.evalue}"))
            else:
                row.append((out.output_type, out.data.get("text/plain", "")))
        texts.append(row)
    return texts


def test_agent_notebook_is_valid_and_reruns_to_the_same_outputs(
    python_tool: BaseTool, runtime: ToolRuntime, paths: ThreadPaths
) -> None:
    cells = [
        "import statistics\ndata = [3, 1, 4, 1, 5, 9, 2, 6]\nprint('n =', len(data))",
        "statistics.median(data)",
        "for i in range(3):\n    print(i)\nsorted(data)[:3]",
        "data[100]",
        "open('result.txt', 'w').write(str(sum(data)))",
    ]
    for code in cells:
        run(python_tool, runtime, code)
    recorded = nbformat.read(paths.workspace / "agent.ipynb", as_version=4)
    nbformat.validate(recorded)
    assert [c.source for c in recorded.cells] == cells
    rerun = nbformat.read(paths.workspace / "agent.ipynb", as_version=4)
    NotebookClient(
        rerun, timeout=60, allow_errors=True, resources={"metadata": {"path": str(paths.workspace)}}
    ).execute()
    assert _cell_texts(rerun) == _cell_texts(recorded)
    assert _cell_texts(recorded)[1] == [("execute_result", "3.5")]


@needs_bwrap
def test_sandboxed_kernel_sees_no_host_files_nor_host_network(
    tmp_path: Path, paths: ThreadPaths
) -> None:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"host-only-page")

        def log_message(self, *args: object) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    provider = BwrapSandboxProvider(network="isolated")
    code = (
        "import os, urllib.request\n"
        f"print(os.path.exists('/root'), os.path.exists({str(tmp_path)!r}))\n"
        f"urllib.request.urlopen('http://127.0.0.1:{server.server_address[1]}/', timeout=5).read()"
    )
    try:
        with KernelPool(provider) as kernels:
            result = kernels.run_sync(paths, code)
    finally:
        server.shutdown()
        server.server_close()
        provider.close()
    assert result.text.startswith("False False")
    assert result.error is not None and "host-only-page" not in result.text


def _wait(predicate: Any, limit: float = 20.0) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def _pid_alive(pid: int) -> bool:
    try:
        return (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]) != "Z"
    except FileNotFoundError:
        return False


def test_idle_kernels_are_shut_down_and_the_next_cell_says_so(paths: ThreadPaths) -> None:
    with KernelPool(LocalSandboxProvider(), idle_timeout=0.5) as kernels:
        kernels.run_sync(paths, "x = 1")
        assert _wait(lambda: kernels.active_threads() == [])
        result = kernels.run_sync(paths, "'x' in dir()")
    assert result.fresh_kernel
    assert result.text == "False"
    notes = [c.source for c in nbformat.read(paths.workspace / "agent.ipynb", as_version=4).cells]
    assert any("new Python kernel" in n for n in notes)


def test_closing_the_pool_stops_every_kernel(tmp_path: Path) -> None:
    threads = [ThreadPaths(tmp_path / f"t{i}").ensure() for i in range(2)]
    kernels = KernelPool(LocalSandboxProvider())
    pids = [int(kernels.run_sync(p, "import os; os.getpid()").text) for p in threads]
    assert len(kernels.active_threads()) == 2
    kernels.close()
    assert all(_wait(lambda pid=pid: not _pid_alive(pid)) for pid in pids)
    with pytest.raises(RuntimeError, match="closed"):
        kernels.run_sync(threads[0], "1")


async def test_cancelling_the_caller_interrupts_the_running_cell(paths: ThreadPaths) -> None:
    async with KernelPool(LocalSandboxProvider(), default_timeout=120) as kernels:
        await kernels.run(paths, "kept = 7")
        task = asyncio.create_task(
            kernels.run(paths, "import time\nwhile True:\n    time.sleep(0.05)")
        )
        await asyncio.sleep(1.0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        result = await kernels.run(paths, "kept", timeout=10)
    assert result.text == "7"
    assert not result.timed_out
