"""The server backend: the kernel talks to the DeerFlow server extension over HTTP.

When JupyterLab starts the kernel, the extension has exported
``DEERFLOW_SERVER_URL`` and ``DEERFLOW_SERVER_TOKEN``; runs then execute in
the server's harness (shared with the chat panel) and the kernel only
streams their events.  A run is ``POST threads/{id}/runs/stream`` with
``stream_mode: ["custom"]``: each SSE ``custom`` message carries one typed
event, rebuilt with :func:`~deerflow.runtime.events.parse_event`, so the
views get exactly what the in-process backend gives them.

Run options the API keeps for internal callers (the ``internal`` scope of
:class:`~deerflow.run_options.RunOptions`: ``interaction_mode``, and the model
cassettes ``record``/``replay``, which are files in the kernel's filesystem)
cannot be sent; asking for them is a clear error, never a silently different run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from deerflow.agents.clarification_reply import prepare_reply
from deerflow.run_options import INTERNAL_OPTIONS, RunOptions
from deerflow.runtime.events import Event, parse_event
from deerflow.sandbox.files.virtual_paths import OUTPUTS
from deerflow_kernel.backend import (
    ArtifactNotFound,
    Backend,
    BackendError,
    RunHandle,
    SkillInfo,
    ThreadInfo,
    UploadInfo,
)

ASSISTANT_ID = "lead_agent"
FLAG_OF = {"interaction_mode": "--mode", "record": "--record", "replay": "--replay"}
"""The ``%%deerflow`` flag that sets an internal run option (named in the refusal)."""


class ServerBackend(Backend):
    """HTTP client of ``{server}deerflow/api/`` with token auth.

    Args:
        server_url: The Jupyter server's URL (``DEERFLOW_SERVER_URL``).
        token: The server's token (``DEERFLOW_SERVER_TOKEN``), may be empty.
        transport: An httpx transport, for tests.
    """

    kind = "server"

    def __init__(self, server_url: str, token: str = "", *, transport: httpx.BaseTransport | None = None) -> None:
        self.server_url = server_url if server_url.endswith("/") else server_url + "/"
        self.api = f"{self.server_url}deerflow/api/"
        headers = {"Authorization": f"token {token}"} if token else {}
        self._http = httpx.Client(base_url=self.api, headers=headers, transport=transport,
                                  timeout=httpx.Timeout(60.0, connect=10.0))

    # -- plumbing ----------------------------------------------------------------------------
    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise BackendError(f"cannot reach the DeerFlow server at {self.server_url} ({exc}); "
                               "is the Jupyter server still running?") from None
        _raise_for_status(response)
        return response

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        return self._request(method, path, **kwargs).json()

    # -- Backend -----------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        info = {"backend": "server (runs execute in the Jupyter server's DeerFlow extension)", "server": self.api}
        try:
            models = self.models()
        except BackendError as exc:
            models, info["models"] = None, f"(cannot list them: {exc})"
        if models is not None:
            info["models"] = ", ".join(models) or "(none configured)"
        return info

    def models(self) -> list[str] | None:
        """The server's configured models (its config, not the notebook's); None from a server without the route."""
        try:
            found = self._json("GET", "models")
        except BackendError as exc:
            if str(exc).endswith("(404)"):
                return None
            raise
        return [m["name"] for m in found.get("models", [])]

    def create_thread(self) -> str:
        return self._json("POST", "threads", json={})["thread_id"]

    def threads(self) -> list[ThreadInfo]:
        found = self._json("POST", "threads/search", json={"limit": 1000})
        return [ThreadInfo(t["thread_id"], (t.get("metadata") or {}).get("title"), t.get("updated_at"))
                for t in found]

    def start(self, prompt: str, thread_id: str, options: RunOptions) -> RunHandle:
        refused = [FLAG_OF.get(key, key) for key in sorted(INTERNAL_OPTIONS & options.to_dict().keys())]
        if refused:
            raise BackendError(f"{', '.join(refused)} only work when the harness runs in the kernel; this "
                               "kernel talks to the Jupyter server's DeerFlow (unset DEERFLOW_SERVER_URL "
                               "in the kernel to run in-process)")
        body = {"assistant_id": ASSISTANT_ID, "stream_mode": ["custom"],
                "input": {"messages": [{"role": "user", "content": prompt}]},
                "config": {"configurable": options.to_dict()}}
        path = f"threads/{_q(thread_id)}/runs/stream"
        return RunHandle(lambda emit: self._stream(path, body, emit),
                         lambda run_id: self.cancel(thread_id, run_id)).start()

    def start_reply(self, thread_id: str, answer: Any, options: RunOptions) -> RunHandle:
        state = self._json("GET", f"threads/{_q(thread_id)}/state")
        request = pending_from_json((state.get("values") or {}).get("messages") or [])
        return self.start(prepare_reply(request, answer), thread_id, options)

    def continue_prompt(self, thread_id: str, extra: str | None = None) -> str:
        from deerflow.cli import resume_prompt

        runs = self._json("GET", f"threads/{_q(thread_id)}/runs")  # newest first
        metadata = (runs[0].get("metadata") or {}) if runs else {}
        return resume_prompt(thread_id, metadata.get("deerflow_status"), metadata.get("error"), extra)

    def cancel(self, thread_id: str, run_id: str) -> bool:
        try:
            response = self._http.post(f"threads/{_q(thread_id)}/runs/{_q(run_id)}/cancel")
        except httpx.TransportError:
            return False
        return response.status_code == 200

    def upload(self, thread_id: str, name: str, data: bytes) -> UploadInfo:
        saved = self._json("POST", f"threads/{_q(thread_id)}/uploads", params={"name": name}, content=data)
        return UploadInfo(saved[0]["name"], saved[0]["virtual_path"], saved[0]["size"])

    def artifacts(self, thread_id: str) -> list[str]:
        return [a["path"] for a in self._json("GET", f"threads/{_q(thread_id)}/artifacts")]

    def read_artifact(self, thread_id: str, path: str) -> bytes:
        try:
            return self._request("GET", self._artifact_path(thread_id, path)).content
        except BackendError as exc:
            if str(exc).endswith("(404)"):
                raise ArtifactNotFound(str(exc)) from None
            raise

    def api_path(self) -> str:
        return urlsplit(self.api).path  # server-relative: any host name

    def artifact_url(self, thread_id: str, path: str) -> str | None:
        """A server-relative URL (``/base/deerflow/api/...``): it works whatever host name the browser
        used (``localhost``, ``127.0.0.1``) and behind JupyterHub, where the base path is the user's."""
        return urlsplit(self.api).path + self._artifact_path(thread_id, path)

    def skills(self) -> list[SkillInfo]:
        try:
            found = self._json("GET", "skills")
        except BackendError as exc:
            if "404" in str(exc):
                raise BackendError("this DeerFlow server has no skills endpoint yet") from None
            raise
        items = found.get("skills", found) if isinstance(found, dict) else found
        return [SkillInfo(s["name"], s.get("description", ""), s.get("enabled", True)) for s in items]

    def mcp(self, action: str) -> dict[str, Any]:
        if action == "reset":
            return self._json("POST", "mcp/reset", json={})
        return self._json("GET", "mcp/tools" if action == "tools" else "mcp/servers")

    def manage_skill(self, action: str, target: str, *, replace: bool = False) -> dict[str, Any]:
        if action != "install":
            return self._json("PUT", f"skills/{_q(target)}", json={"enabled": action == "enable"})
        package = Path(target).expanduser()
        if not package.is_file():
            raise BackendError(f"{target}: the server installs a .skill or .zip archive file")
        return self._json("POST", "skills/install", params={"name": package.name, "replace": str(replace).lower()},
                          content=package.read_bytes())

    def memory(self, verb: str, argument: str = "") -> dict[str, Any]:
        if verb == "add":
            return self._json("POST", "memory", json={"text": argument})
        if verb == "forget":
            return self._json("DELETE", f"memory/{_q(argument)}")
        if verb == "clear":
            return self._json("DELETE", "memory")
        if verb == "undo":
            return self._json("POST", "memory/undo", json={"run": argument or None})
        if verb == "edit":
            fact_id, _, text = argument.partition(" ")
            return self._json("PATCH", f"memory/{_q(fact_id)}", json={"text": text.strip().strip("'\"")})
        if verb == "prompt":
            return self._json("GET", "memory/prompt", params={"topic": argument})
        if verb == "changes":
            return self._json("GET", "memory/changes")
        return self._json("GET", "memory/export" if verb == "export" else "memory")

    def memory_change(self, run_id: str, *, agent: str | None = None, wait: float = 0.0) -> dict[str, Any] | None:
        params = {"run": run_id, "wait": str(min(wait, 120.0)), **({"agent": agent} if agent else {})}
        timeout = httpx.Timeout(60.0, connect=10.0, read=min(wait, 120.0) + 30.0)
        return self._json("GET", "memory/changes", params=params, timeout=timeout)["change"]

    def notebook_edits(self, thread_id: str, action: str, target: str | None = None,
                       **payload: Any) -> dict[str, Any]:
        if action == "list":
            return self._json("GET", f"threads/{_q(thread_id)}/notebook-edits")
        body = {"run_id": target} if action in {"undo", "insert"} else {"proposal_id": target}
        body.update(payload)
        return self._json("POST", f"threads/{_q(thread_id)}/notebook-edits/{action}", json=body)

    def close(self) -> None:
        self._http.close()

    # -- helpers -----------------------------------------------------------------------------
    @staticmethod
    def _artifact_path(thread_id: str, path: str) -> str:
        prefix = f"{OUTPUTS}/"
        relative = path[len(prefix):] if path.startswith(prefix) else path.lstrip("/")
        return f"threads/{_q(thread_id)}/artifacts/{quote(relative)}"

    def _stream(self, path: str, body: dict[str, Any], emit: Callable[[Event], None]) -> None:
        """POST a streaming run and emit each ``custom`` SSE message as a typed event."""
        timeout = httpx.Timeout(60.0, connect=10.0, read=120.0)  # the server sends heartbeats
        try:
            with self._http.stream("POST", path, json=body, timeout=timeout) as response:
                if response.status_code >= 400:
                    response.read()
                    _raise_for_status(response, hint=model_hint)
                for kind, data in iter_sse(response.iter_lines()):
                    if kind == "custom":
                        emit(parse_event(data))
                    elif kind == "end":
                        return
        except httpx.TransportError as exc:
            raise BackendError(f"lost the event stream from {self.server_url} ({exc})") from None


def iter_sse(lines: Iterator[str]) -> Iterator[tuple[str, str]]:
    """``(event, data)`` pairs of a Server-Sent Events stream (comments skipped)."""
    kind, data = "message", []
    for line in lines:
        if not line:
            if data:
                yield kind, "\n".join(data)
            kind, data = "message", []
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "event":
                kind = value
            elif name == "data":
                data.append(value)
    if data:
        yield kind, "\n".join(data)


def pending_from_json(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The clarification a thread waits on, from its state's JSON messages (trailing tool results)."""
    for message in reversed(messages):
        if not isinstance(message, dict) or message.get("type") != "tool":
            return None
        artifact = message.get("artifact")
        request = artifact.get("human_input") if isinstance(artifact, dict) else None
        if isinstance(request, dict):
            return request
    return None


def _raise_for_status(response: httpx.Response, *, hint: Callable[[str], str] | None = None) -> None:
    if response.status_code < 400:
        return
    try:
        detail = response.json().get("detail") or response.reason_phrase
    except (json.JSONDecodeError, AttributeError, UnicodeDecodeError):
        detail = response.text[:300] or response.reason_phrase
    if response.status_code == 404 and str(detail).startswith("unknown thread"):
        detail = f"{detail} (%deerflow threads lists yours)"
    raise BackendError(f"DeerFlow server: {detail} ({response.status_code})" + (hint(detail) if hint else ""))


def model_hint(detail: str) -> str:
    """Why a model a notebook names may be unknown: the server's config is not the notebook's."""
    if "unknown model" not in detail or not os.environ.get("DEERFLOW_CONFIG"):
        return ""
    return (" (this kernel runs its agents in the Jupyter server's DeerFlow, which uses the server's own "
            "config; DEERFLOW_CONFIG set in the notebook does not apply to it. Start the server with that "
            "config (DEERFLOW_CONFIG=... jupyter lab), or unset DEERFLOW_SERVER_URL in the kernel to run in-process)")


def _q(value: str) -> str:
    return quote(value, safe="")
