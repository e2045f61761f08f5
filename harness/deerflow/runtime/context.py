"""The per-run context every middleware and tool receives.

LangGraph passes it as ``Runtime.context`` (tools see it as ``runtime.context``
through ``ToolRuntime``).  It carries identity (user, thread, run), the thread's
host directories, the application config and the run's options, so no code deep
in the harness needs a global to find them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from deerflow.config.paths import ThreadPaths
from deerflow.config.schema import AppConfig
from deerflow.run_options import RunOptions
from deerflow.runtime.interaction_policy import RunInteractionPolicy
from deerflow.runtime.services import HostServices


@dataclass
class RunContext:
    """Identity, paths, config and options of one run.

    Attributes:
        user_id: Owner of the thread (the Jupyter user, or ``local`` for the CLI).
        thread_id: The thread the run belongs to.
        run_id: Unique id of this run.
        paths: Host directories of the thread (uploads, workspace, outputs).
        config: The application config in force for this run.
        model_name: Name of the model entry used by the lead agent.
        interaction_mode: Resolved interaction mode (``interactive`` by default).
        interaction: The run's interaction policy, the one source for mode-dependent
            behaviour (clarification, network approval...).  Resolved from
            ``interaction_mode`` when not given; when given, it sets ``interaction_mode``.
        options: The run's options (:class:`~deerflow.run_options.RunOptions`), as the
            run manager parsed them; read as attributes (``context.options.agent_name``).
        services: Host-provided capabilities (:class:`~deerflow.runtime.services.HostServices`:
            sandbox provider, kernel pool...); one absent (``None``) is simply not available.
        chat_model: The run's own chat model instance; the lead agent's model requests go to it
            (a compiled graph is shared by runs: see :mod:`deerflow.agents.graph_cache`).
        folders_ready: The thread's folders were made while the run was prepared (off the event
            loop, by :func:`~deerflow.runs.wiring.wire_run_context`); otherwise the run's first
            node makes them, off the loop too.
    """

    user_id: str
    thread_id: str
    run_id: str
    paths: ThreadPaths
    config: AppConfig
    model_name: str | None = None
    interaction_mode: str = "interactive"
    options: RunOptions = field(default_factory=RunOptions)
    services: HostServices = field(default_factory=HostServices)
    interaction: RunInteractionPolicy = field(default_factory=RunInteractionPolicy)
    chat_model: Any = None
    folders_ready: bool = False

    def __post_init__(self) -> None:
        if self.interaction.source == "default" and self.interaction_mode != self.interaction.mode:
            self.interaction = RunInteractionPolicy.resolve(RunOptions(interaction_mode=self.interaction_mode))
        self.interaction_mode = self.interaction.mode
