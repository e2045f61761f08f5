"""Execution overhead: local vs bwrap (vs docker), side by side.

Measures, for each provider:

* ``python warm``  — the ``python`` tool running ``1+1`` on a warm kernel
  (tool call → pool thread → ZMQ → kernel → render → agent.ipynb rewrite);
  goal ≤ 20 ms;
* ``pool warm``    — the same without the LangChain tool layer;
* ``kernel cold``  — first cell of a new thread (kernel launch + ``1+1``);
  goal ≤ 1.5 s;
* ``bash true``    — one ``true`` command (process or bwrap sandbox start;
  docker: an exec into the thread's running container); goal ≤ 100 ms for bwrap;
* ``bash first``   — the first command of a new thread (docker: includes
  starting its container).

The docker column is measured when ``--docker-image`` (or the environment's
``DEERFLOW_TEST_DOCKER_IMAGE``) names an image present on the engine that
``DOCKER_HOST`` names; its warm pool keeps the measured threads' containers.

Run::

    .venv/bin/python bench/exec_overhead.py [--warm 200] [--cold 5] [--bash 50] [--docker-image IMG]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from langchain.tools import ToolRuntime
from timing import summary, timings

from deerflow.config.paths import ThreadPaths
from deerflow.config.schema import AppConfig
from deerflow.runtime.context import RunContext
from deerflow.runtime.services import HostServices
from deerflow.sandbox.execution.bwrap import BwrapSandboxProvider, find_bwrap
from deerflow.sandbox.execution.local import LocalSandboxProvider
from deerflow.sandbox.execution.provider import SandboxProvider
from deerflow.sandbox.kernels.kernel_pool import KernelPool
from deerflow.tools.builtins.exec_tools import exec_tools

GOALS = {"python warm": 0.020, "kernel cold": 1.5, "bash true": 0.100}






def _thread(root: Path, name: str) -> ThreadPaths:
    return ThreadPaths(root / name).ensure()


def measure(
    provider: SandboxProvider, root: Path, *, warm: int, cold: int, bash: int
) -> dict[str, list[float]]:
    """All measurements for one provider."""
    results: dict[str, list[float]] = {}
    with KernelPool(provider) as pool:
        paths = _thread(root, f"{provider.name}-warm")
        context = RunContext(
            user_id="bench", thread_id="warm", run_id="r", paths=paths, config=AppConfig(),
            services=HostServices(sandbox=provider, kernels=pool),
        )  # fmt: skip
        runtime = ToolRuntime(
            state={},
            context=context,
            config={},
            stream_writer=lambda _: None,
            tool_call_id="b",
            store=None,
        )
        tool = next(t for t in exec_tools(provider) if t.name == "python")
        pool.run_sync(paths, "1+1")
        for _ in range(20):  # warm-up
            tool.invoke({"code": "1+1", "runtime": runtime})
        results["python warm"] = timings(
            lambda: tool.invoke({"code": "1+1", "runtime": runtime}), warm
        )
        results["pool warm"] = timings(lambda: pool.run_sync(paths, "1+1"), warm)
        cold_paths = iter([_thread(root, f"{provider.name}-cold-{i}") for i in range(cold)])
        results["kernel cold"] = timings(lambda: pool.run_sync(next(cold_paths), "1+1"), cold)
    if provider.allows_bash:
        bash_paths = _thread(root, f"{provider.name}-bash")
        provider.execute(bash_paths, "true")
        results["bash true"] = timings(lambda: provider.execute(bash_paths, "true"), bash)
        first_paths = iter([_thread(root, f"{provider.name}-first-{i}") for i in range(cold)])
        results["bash first"] = timings(lambda: provider.execute(next(first_paths), "true"), cold)
    return results


def docker_provider(image: str | None) -> SandboxProvider | None:
    """The docker provider on ``image``, or ``None`` (with the reason printed) if unavailable."""
    if not image:
        print("no --docker-image: not measuring the docker provider")
        return None
    try:
        from deerflow.sandbox.docker.provider import DockerSandboxProvider, connect_docker

        client = connect_docker()
        client.images.get(image)
    except Exception as exc:  # any reason: print it and skip the column
        print(f"docker provider not measured: {exc}")
        return None
    return DockerSandboxProvider(client=client, image=image, warm_pool_size=4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--warm", type=int, default=200, help="warm python calls")
    parser.add_argument("--cold", type=int, default=5, help="cold kernel starts")
    parser.add_argument("--bash", type=int, default=50, help="bash commands")
    parser.add_argument("--docker-image", default=os.environ.get("DEERFLOW_TEST_DOCKER_IMAGE"),
                        help="measure the docker provider on this (present) image")
    args = parser.parse_args()
    providers: list[SandboxProvider] = [LocalSandboxProvider(allow_host_bash=True)]
    if find_bwrap():
        providers.append(BwrapSandboxProvider())
    else:
        print("bwrap not installed: not measuring the bwrap provider")
    docker = docker_provider(args.docker_image)
    if docker is not None:
        providers.append(docker)
    with tempfile.TemporaryDirectory(prefix="deerflow-bench-") as tmp:
        try:
            table = {
                p.name: measure(p, Path(tmp), warm=args.warm, cold=args.cold, bash=args.bash)
                for p in providers
            }
        finally:
            if docker is not None:
                docker.close()  # its containers, before their thread directories go
    metrics = ["python warm", "pool warm", "kernel cold", "bash true", "bash first"]
    names = list(table)
    print(f"{'metric':<12} | " + " | ".join(f"{n:<28}" for n in names) + " | goal")
    for metric in metrics:
        cells = [summary(table[n][metric], digits=1) if metric in table[n] else "-" for n in names]
        goal = f"<= {GOALS[metric] * 1000:g} ms" if metric in GOALS else ""
        print(f"{metric:<12} | " + " | ".join(f"{c:<28}" for c in cells) + f" | {goal}")
    print(f"samples: warm={args.warm} cold={args.cold} bash={args.bash}")


if __name__ == "__main__":
    main()
