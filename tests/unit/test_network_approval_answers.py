"""A network approval is granted only by a person: an answer in an unattended run or a subagent denies."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from deerflow.agents.middlewares.network_approval import NetworkApprovalMiddleware
from deerflow.run_options import RunOptions
from deerflow.runtime.interaction_policy import RunInteractionPolicy
from deerflow.runtime.services import HostServices
from deerflow.sandbox.network.approval import ALLOW_ALWAYS, approval_request


class RecordingGate:
    def __init__(self) -> None:
        self.answers: list[str] = []

    def apply_answer(self, root: Path, *, run_id: str, targets: list[str], answer: str) -> None:
        self.answers.append(answer)


def run_middleware(mode: str, *, subagent: bool = False) -> tuple[list[str], list[dict[str, Any]]]:
    gate = RecordingGate()
    notices: list[dict[str, Any]] = []
    context = SimpleNamespace(
        interaction=RunInteractionPolicy.resolve({"interaction_mode": mode}),
        services=HostServices(sandbox=SimpleNamespace(egress=SimpleNamespace(gate=gate))),
        paths=SimpleNamespace(root=Path("/nonexistent")), run_id="r2",
        options=RunOptions(is_subagent=True) if subagent else RunOptions(),
    )
    request = approval_request(["example.org:443"], tool_call_id="c1", tool="bash")
    messages = [HumanMessage("fetch it"), AIMessage("", tool_calls=[{"name": "bash", "args": {}, "id": "c1"}]),
                ToolMessage("asked", tool_call_id="c1", artifact={"human_input": request}),
                HumanMessage(ALLOW_ALWAYS)]
    runtime = SimpleNamespace(context=context, stream_writer=notices.append)
    NetworkApprovalMiddleware().before_agent({"messages": messages}, runtime)
    return gate.answers, notices


def test_a_person_in_an_interactive_run_can_allow() -> None:
    answers, notices = run_middleware("interactive")
    assert answers == ["always"]
    assert notices[0]["data"]["decision"] == "allowed"


@pytest.mark.parametrize("mode", ["scheduled", "webhook", "autonomous"])
def test_an_answer_in_an_unattended_run_is_a_denial(mode: str) -> None:
    answers, notices = run_middleware(mode)
    assert answers == ["deny"]
    assert notices[0]["data"]["decision"] == "denied"
