"""The in-process backend: the harness runs inside the kernel.

Used when the kernel was not started by a Jupyter server with the DeerFlow
extension (plain ``jupyter kernel``, nbclient, VS Code...).  It wraps the
synchronous :class:`~deerflow.client.DeerFlowClient`, which runs the harness
on its own event-loop thread, so the kernel's loop is never borrowed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from deerflow.run_options import RunOptions
from deerflow.runs.thread_files import ArtifactNotFound as ThreadArtifactNotFound
from deerflow.runtime import events as ev
from deerflow_kernel.backend import (
    ArtifactNotFound,
    Backend,
    BackendError,
    RunHandle,
    SkillInfo,
    ThreadInfo,
    UploadInfo,
)


class InProcessBackend(Backend):
    """Runs the harness in this process (config from the standard lookup)."""

    kind = "in-process"

    def __init__(self, client: Any | None = None) -> None:
        if client is None:
            from deerflow.client import DeerFlowClient

            client = DeerFlowClient()  # $DEERFLOW_USER, else the OS user (as the CLI and server)
        self.client = client

    def describe(self) -> dict[str, Any]:
        config_path = self.client.loaded.path
        models = [m.name for m in self.client.config.models] or ["(embedded offline model)"]
        return {"backend": "in-process (the harness runs in this kernel)",
                "config": str(config_path.resolve()) if config_path else "(none: defaults)",
                "home": str(self.client.home.home), "models": ", ".join(models)}

    def models(self) -> list[str] | None:
        return [m.name for m in self.client.config.models]

    def create_thread(self) -> str:
        return self.client.create_thread()

    def threads(self) -> list[ThreadInfo]:
        records = sorted(self.client.threads(), key=lambda r: r.updated_at, reverse=True)
        return [ThreadInfo(r.thread_id, r.title, r.updated_at) for r in records]

    def start(self, prompt: str, thread_id: str, options: RunOptions) -> RunHandle:
        def produce(emit: Callable[[ev.Event], None]) -> None:
            for event in self.client.stream(prompt, thread_id, **options.to_dict()):
                emit(event)

        return RunHandle(produce, self.client.cancel).start()

    def continue_prompt(self, thread_id: str, extra: str | None = None) -> str:
        from deerflow.cli import continuation_prompt

        return continuation_prompt(self.client, thread_id, extra)

    def start_reply(self, thread_id: str, answer: Any, options: RunOptions) -> RunHandle:
        def produce(emit: Callable[[ev.Event], None]) -> None:
            for event in self.client.stream_reply(thread_id, answer, **options.to_dict()):
                emit(event)

        return RunHandle(produce, self.client.cancel).start()

    def upload(self, thread_id: str, name: str, data: bytes) -> UploadInfo:
        from deerflow.runs.thread_files import UploadRejected

        try:
            info = self.client.upload(thread_id, data, name)
        except UploadRejected as exc:
            raise BackendError(str(exc)) from None
        return UploadInfo(info.name, info.virtual_path, info.size)

    def artifacts(self, thread_id: str) -> list[str]:
        return self.client.artifacts(thread_id)

    def read_artifact(self, thread_id: str, path: str) -> bytes:
        try:
            return self.client.read_artifact(thread_id, path)
        except ThreadArtifactNotFound as exc:
            raise ArtifactNotFound(str(exc)) from None

    def skills(self) -> list[SkillInfo]:
        return [SkillInfo(s.name, s.description, s.enabled) for s in self.client.skills()]

    def manage_skill(self, action: str, target: str, *, replace: bool = False) -> dict[str, Any]:
        if action == "install":  # SkillScanBlocked & co. are UserErrors: one line in the notebook
            return {"installed": True, **self.client.install_skill(target, replace=replace).to_dict()}
        info = self.client.enable_skill(target) if action == "enable" else self.client.disable_skill(target)
        return info.to_dict()

    def mcp(self, action: str) -> dict[str, Any]:
        from deerflow.mcp.config import config_problem

        if action == "reset":
            self.client.reset_mcp()
            return {"reset": True}
        problem = config_problem(self.client.loaded.extensions_path)
        if problem is not None:  # one line in the cell, not "no MCP servers configured"
            raise problem
        tools = self.client.mcp_tools() if action == "tools" else None
        return {"servers": self.client.mcp_servers(), **({"tools": tools} if tools is not None else {})}

    def memory(self, verb: str, argument: str = "") -> dict[str, Any]:
        from deerflow.memory.commands import act_on_home

        return act_on_home(self.client.config, self.client.home.home, self.client.user_id, verb, argument)

    def memory_change(self, run_id: str, *, agent: str | None = None, wait: float = 0.0) -> dict[str, Any] | None:
        change = self.client.learned_from_run(run_id, agent=agent, wait=wait)
        return change.to_dict() if change is not None else None

    def notebook_edits(self, thread_id: str, action: str, target: str | None = None,
                       **payload: Any) -> dict[str, Any]:
        return self.client.notebook_action(thread_id, action, target, **payload)

    def close(self) -> None:
        self.client.close()

