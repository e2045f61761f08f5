"""The shape of ``config.yaml``.

Every section is a pydantic model that forbids unknown keys, so a typo is an
error naming the key instead of a silently ignored setting.  Model entries are
the one exception: extra keys there are keyword arguments for the model class
(``temperature``, ``max_tokens``, ``script``...), because any ``BaseChatModel``
may be plugged in.  The ``storage`` section, which resolves one URL into the
keys its consumers read, is in :mod:`deerflow.config.storage`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from deerflow.config.section import Section
from deerflow.config.storage import StorageConfig
from deerflow.config.values import check_environment, parse_size


def _import_path(value: str) -> str:
    module, _, attr = value.partition(":")
    if not module or not attr:
        raise ValueError("must look like 'package.module:attribute'")
    return value


ImportPath = Annotated[str, AfterValidator(_import_path)]
"""A ``use:`` value: ``module:attribute`` (imported only when the thing is built)."""


class ModelTimeouts(Section):
    """Deadlines of one model call, in seconds (see :mod:`deerflow.models.guard`)."""

    first_token: float | None = Field(default=300.0, gt=0, description="Until the first token (prompt "
        "processing on a CPU server can take minutes for a long prompt).")
    idle: float | None = Field(default=60.0, gt=0, description="Between two streamed chunks.")
    total: float | None = Field(default=1200.0, gt=0, description="For the whole call.")


class ModelCompat(Section):
    """Settings for OpenAI-compatible servers that differ from OpenAI (README: 'Local servers')."""

    tool_choice: Literal["auto", "required"] | None = Field(default=None, description="Sent whenever tools "
        "are bound (llama-cpp-python's server ignores tools without it).")
    content_null: Literal["null", "space"] = Field(default="null", description="'space': an assistant "
        "message with tool calls and no text is sent with content ' ' instead of null (servers that answer "
        "null with HTTP 500).")
    require_finish_reason: bool = Field(default=True, description="A stream that ends without a "
        "finish_reason is an error (the connection closed early).")


class ModelConfig(BaseModel):
    """One chat model the agent may use."""

    model_config = ConfigDict(extra="allow", protected_namespaces=())

    name: str = Field(min_length=1, description="Name runs select the model by.")
    use: ImportPath = Field(description="'module:Class' of any langchain BaseChatModel.")
    display_name: str | None = None
    supports_vision: bool = False
    supports_thinking: bool = False
    context_window: int | None = Field(default=None, gt=0)
    timeouts: ModelTimeouts = Field(default_factory=ModelTimeouts)
    retries: int = Field(default=0, ge=0, le=5, description="Tries again after a stall or a dropped "
        "connection, only while nothing has been streamed yet.")
    compat: ModelCompat = Field(default_factory=ModelCompat)

    def init_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for the model class: everything but our own keys."""
        ours = {"name", "use", "display_name", "supports_vision", "supports_thinking", "timeouts", "retries",
                "compat"}
        data = self.model_dump(exclude_none=True)
        return {k: v for k, v in data.items() if k not in ours}


class ToolGroupConfig(Section):
    name: str = Field(min_length=1)
    description: str | None = None


class ToolConfig(BaseModel):
    """A tool resolved from ``use: module:attr`` (a BaseTool or a factory)."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(min_length=1)
    group: str = Field(min_length=1)
    use: ImportPath

    def options(self) -> dict[str, Any]:
        return {k: v for k, v in self.model_dump().items() if k not in {"name", "group", "use"}}


class AuthorizationRule(Section):
    """Allow/deny lists for the users it names ('*' = everyone)."""

    users: list[str] = Field(default_factory=lambda: ["*"])
    allow: list[str] | None = None
    deny: list[str] = Field(default_factory=list)


class AuthorizationConfig(Section):
    enabled: bool = False
    rules: list[AuthorizationRule] = Field(default_factory=list)


class SandboxConfig(Section):
    use: Literal["local", "bwrap", "docker"] = "local"
    allow_host_bash: bool = False
    network: Literal["isolated", "open", "allowlist"] = "isolated"
    allowed_hosts: list[str] = Field(default_factory=list)
    egress_hosts: dict[str, str] = Field(default_factory=dict)
    command_timeout: float = Field(default=60.0, gt=0)
    python_timeout: float = Field(default=120.0, gt=0)
    kernel_idle_timeout: float = Field(default=900.0, gt=0)
    image: str = "python:3.11-slim"
    memory_limit: str | None = Field(default=None, description="bwrap and docker: memory cap, e.g. '2g' "
        "(bwrap: a cgroup where the server can make one, else an address-space rlimit per process).")
    cpu_limit: float | None = Field(default=None, description="docker: CPUs (a rate, e.g. 1.5).")
    cpu_time_limit: float | None = Field(default=None, gt=0, description="bwrap: CPU seconds per process "
        "(RLIMIT_CPU; a kernel's accumulate over its life, past them it is restarted).")
    pids_limit: int | None = Field(default=512, ge=1, description="bwrap and docker: processes and threads "
        "at once, per command or kernel (bwrap) or per container (docker).")
    environment: dict[str, str] = Field(default_factory=dict, description="Variables the agent's code "
        "gets besides the fixed allowlist (PATH, HOME, LANG/LANGUAGE/LC_*/TZ, TERM; nothing else of the "
        "server's environment). Values are passed as written: never put credentials here.")
    warm_pool_size: int = Field(default=0, ge=0)
    docker_python: Literal["host", "image"] = Field(
        default="host", description="docker: 'host' binds the server's Python read-only into the container "
        "(same packages; needs a glibc image as new as the host's); 'image' uses the image's python3, which "
        "must have ipykernel.")

    @field_validator("memory_limit")
    @classmethod
    def _memory_is_a_size(cls, value: str | None) -> str | None:
        if value is not None:
            parse_size(value)
        return value

    @field_validator("environment")
    @classmethod
    def _environment_names(cls, value: dict[str, str]) -> dict[str, str]:
        return check_environment(value)


class SkillsConfig(Section):
    """Skills (:mod:`deerflow.skills`): where public skills are and how the model discovers them.

    ``path`` replaces the repository's ``skills/public`` (its ``public/`` subfolder
    when it has one; relative to the config file).  ``container_path`` is the
    virtual-path contract and cannot move.  Enabled state is per user, in
    ``extensions_config.json`` (``skills``), not here.
    """

    path: str | None = None
    container_path: Literal["/mnt/skills"] = "/mnt/skills"
    deferred_discovery: bool = False


class SubagentTypeConfig(Section):
    """A custom subagent type: its own prompt, tools, model and limits."""

    description: str = Field(min_length=1, description="What the lead is told this type is for.")
    prompt: str = Field(min_length=1, description="The subagent's system prompt.")
    tools: list[str] | None = Field(default=None, description="Tool names it may use (None: the defaults).")
    model: str = Field(default="inherit", description="A model name, or 'inherit' (the lead's model).")
    skills: list[str] | None = Field(default=None, description="Tools its skills may use (None: no own limit).")
    max_turns: int | None = Field(default=None, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)
    timeout_seconds: float | None = Field(default=None, gt=0)


class BatchesConfig(Section):
    """Durable batches: items in SQL, run by a bounded worker pool."""

    enabled: bool = False
    backend: Literal["sqlite", "postgres"] = "sqlite"
    sqlite_path: str | None = None
    postgres_url: str | None = None
    concurrency: int = Field(default=4, ge=1, le=64)
    lease_seconds: float = Field(default=120.0, gt=0)
    max_items: int = Field(default=500, ge=1, le=10_000)


class SubagentsConfig(Section):
    enabled: bool = False
    max_concurrent: int = Field(default=3, ge=1, le=16)
    max_total_per_run: int = Field(default=10, ge=1, le=50)
    timeout_seconds: float = Field(default=900.0, gt=0)
    max_turns: int = Field(default=30, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)
    poll_interval: float = Field(default=0.5, gt=0)
    receipts_enabled: bool = True
    types: dict[str, SubagentTypeConfig] = Field(default_factory=dict)
    batches: BatchesConfig = Field(default_factory=BatchesConfig)


class SummarizationConfig(Section):
    """When a long conversation is folded into a summary (:mod:`deerflow.agents.summary`).

    On by default: with no trigger configured, a real model whose context window
    is known (``context_window`` on its entry, or its provider profile) summarizes
    before a request would reach ~75% of the window, counting the system prompt
    and tool schemas (``deerflow.agents.middlewares.summarization``).  ``enabled:
    false`` turns it off; ``enabled: true`` written out asks for explicit triggers.
    """

    enabled: bool = True
    trigger_tokens: int | None = Field(default=None, gt=0)
    trigger_messages: int | None = Field(default=None, gt=0)
    trigger_fraction: float | None = Field(default=None, gt=0, le=1)
    keep_messages: int = Field(default=20, ge=1)
    model_name: str | None = None

    @property
    def has_trigger(self) -> bool:
        return bool(self.trigger_tokens or self.trigger_messages or self.trigger_fraction)

    @model_validator(mode="after")
    def _enabled_needs_a_trigger(self) -> SummarizationConfig:
        if "enabled" in self.model_fields_set and self.enabled and not self.has_trigger:
            raise ValueError("enabled summarization needs a trigger: set trigger_tokens, "
                             "trigger_messages or trigger_fraction")
        return self


class TitleConfig(Section):
    enabled: bool = True
    max_chars: int = Field(default=60, ge=8, le=200)
    use_model: bool = False


class ToolOutputConfig(Section):
    max_chars: int = Field(default=20_000, ge=500)
    synopsis_chars: int = Field(default=2_000, ge=100)


class ReadBeforeWriteConfig(Section):
    enabled: bool = True


class LoopDetectionConfig(Section):
    enabled: bool = True
    warn_after: int = Field(default=3, ge=2)
    stop_after: int = Field(default=5, ge=2)
    max_calls_per_tool: int = Field(default=50, ge=1)

    @model_validator(mode="after")
    def _warn_before_stop(self) -> LoopDetectionConfig:
        if self.stop_after <= self.warn_after:
            raise ValueError(f"stop_after ({self.stop_after}) must be greater than warn_after ({self.warn_after})")
        return self


class BrowserConfig(Section):
    enabled: bool = False
    executable_path: str | None = None
    headless: bool = True
    max_sessions: int = Field(default=4, ge=1)
    allow_private_addresses: bool = False
    cdp_url: str | None = None
    allow_unguarded_cdp: bool = False
    idle_timeout: float = Field(default=900.0, gt=0)
    navigation_timeout: float = Field(default=30.0, gt=0)


class WebConfig(Section):
    enabled: bool = True
    search_provider: str = "duckduckgo"
    max_fetch_bytes: int = Field(default=2_000_000, ge=1_000)
    fetch_timeout: float = Field(default=20.0, gt=0)
    allow_private_addresses: bool = False
    api_key: str | None = None
    base_url: str | None = None


class AcpAgentConfig(Section):
    """An external agent spoken to over ACP (stdio); see :mod:`deerflow.acp`."""

    command: str = Field(min_length=1, description="The ACP adapter executable (a name on PATH or a path).")
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    description: str | None = None
    permissions: Literal["auto", "deny", "allow"] = Field(
        default="auto", description="Answer to the agent's permission requests: auto = allow in "
        "interactive runs, deny in unattended ones; deny; allow.")
    timeout_seconds: float = Field(default=600.0, gt=0, description="Deadline of one invoke_acp_agent call.")


class McpConfig(Section):
    """Host settings of MCP (the servers themselves live in extensions_config.json)."""

    session_idle_timeout: float = Field(default=600.0, gt=0, description="Close unused sessions after this.")
    retry_failed_after: float = Field(default=60.0, ge=0, description="Try a failed server again after this.")


class ToolSearchConfig(Section):
    """Deferred MCP schemas: names only until ``tool_search`` promotes them."""

    enabled: bool = False
    max_results: int = Field(default=5, ge=1, le=20)


class UploadsConfig(Section):
    max_file_bytes: int = Field(default=100 * 1024 * 1024, ge=1)
    max_files: int = Field(default=200, ge=1)


class MemoryEmbeddingConfig(Section):
    """An embedding model for semantic search over facts (LangGraph's store index)."""

    use: ImportPath = Field(description="'module:Class' of a langchain Embeddings class (e.g. "
                     "'langchain_openai:OpenAIEmbeddings').")
    dims: int = Field(ge=1, le=8192, description="Length of the model's vectors.")
    kwargs: dict[str, Any] = Field(default_factory=dict, description="Keyword arguments for the class "
                                   "(model, base_url, api_key...).")


class MemoryConfig(Section):
    """Long-term memory per user (:mod:`deerflow.memory`): what is remembered across threads."""

    enabled: bool = Field(default=True, description="Extract facts after runs and keep them.")
    injection_enabled: bool = Field(default=True, description="Put relevant facts in the system prompt.")
    model_name: str | None = Field(default=None, description="Model that extracts facts (default: the run's).")
    from_unattended: bool = Field(default=False, description="Learn from scheduled/webhook/autonomous runs too.")
    confidence_threshold: float = Field(default=0.7, ge=0, le=1)
    max_facts: int = Field(default=100, ge=1, le=10_000)
    max_injection_tokens: int = Field(default=2000, ge=0)
    debounce_seconds: float = Field(default=5.0, ge=0, description="Wait for a quiet spell before extracting.")
    extraction_timeout: float = Field(default=60.0, gt=0, description="Deadline of one extraction.")
    shutdown_grace_seconds: float = Field(default=10.0, ge=0,
                                          description="At shutdown, pending extractions run for at most this.")
    embedding: MemoryEmbeddingConfig | None = Field(
        default=None, description="Rank facts by meaning with this embedding model (LangGraph's store index); "
        "without it, facts are ranked by shared words.")


class PluginConfig(Section):
    """A Python extension loaded once at startup (see :mod:`deerflow.plugins`).

    Exactly one of ``entry_point`` (a name in the ``deerflow.plugins`` entry-point
    group of an installed package) or ``path`` (a local package directory or a
    ``.py`` file, relative to this config file) is given.  Plugins run with the
    host's privileges; they are configured here only, never through the API.
    """

    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,39}$", description="Plugin id (route prefix, logs).")
    entry_point: str | None = None
    path: str | None = None
    enabled: bool = True
    options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_source(self) -> PluginConfig:
        if (self.entry_point is None) == (self.path is None):
            raise ValueError("give exactly one of entry_point or path")
        return self


class LimitsConfig(Section):
    """Per-run limits an operator sets for everyone (a lab paying for a hosted model)."""

    max_tokens_per_run: int | None = Field(
        default=None, ge=1,
        description="Stop a run (status stopped, stopped_by token_budget) before a model call once its "
                    "model calls, subagents included, have used this many tokens.")


class UsageConfig(Section):
    """Token accounting per user (``deerflow usage``, the usage route)."""

    daily_token_budget: int | None = Field(
        default=None, ge=1,
        description="Refuse new runs of a user (HTTP 429, CLI exit status 4) once their finished runs of the "
                    "day (UTC) have used this many provider-reported tokens. A run already going is never cut; "
                    "calls whose model reports no usage cannot be counted.")


class LoggingConfig(Section):
    """How the server and the CLI write their logs (docs/OPERATIONS.md)."""

    format: Literal["text", "json"] = Field(
        default="text", description="json: one JSON object per line (the per-run line's user, thread, run, "
        "status and duration as keys; other lines with their fields), for a log shipper. Secrets from the config "
        "and the environment are redacted in either format.")
    level: Literal["debug", "info", "warning", "error"] = Field(
        default="info", description="The least severe DeerFlow record a server writes (the CLI shows warnings "
        "unless --debug).")


class AppConfig(Section):
    """The whole of ``config.yaml``."""

    models: list[ModelConfig] = Field(default_factory=list)
    default_model: str | None = None
    tool_groups: list[ToolGroupConfig] = Field(default_factory=list)
    tools: list[ToolConfig] = Field(default_factory=list)
    authorization: AuthorizationConfig = Field(default_factory=AuthorizationConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    skills: SkillsConfig = Field(default_factory=SkillsConfig)
    subagents: SubagentsConfig = Field(default_factory=SubagentsConfig)
    summarization: SummarizationConfig = Field(default_factory=SummarizationConfig)
    title: TitleConfig = Field(default_factory=TitleConfig)
    tool_output: ToolOutputConfig = Field(default_factory=ToolOutputConfig)
    read_before_write: ReadBeforeWriteConfig = Field(default_factory=ReadBeforeWriteConfig)
    loop_detection: LoopDetectionConfig = Field(default_factory=LoopDetectionConfig)
    browser: BrowserConfig = Field(default_factory=BrowserConfig)
    web: WebConfig = Field(default_factory=WebConfig)
    acp_agents: dict[str, AcpAgentConfig] = Field(default_factory=dict)
    mcp: McpConfig = Field(default_factory=McpConfig)
    tool_search: ToolSearchConfig = Field(default_factory=ToolSearchConfig)
    storage: StorageConfig = Field(default_factory=StorageConfig)
    uploads: UploadsConfig = Field(default_factory=UploadsConfig)
    plugins: list[PluginConfig] = Field(default_factory=list)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    usage: UsageConfig = Field(default_factory=UsageConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)

    notebook_edits: Literal["propose", "apply"] = Field(
        default="propose", description="What edit_notebook does with the user's notebooks: `propose` a diff "
        "the user applies (%deerflow apply), or `apply` it (undo with %deerflow undo). Unattended runs "
        "only propose.")

    @field_validator("models")
    @classmethod
    def _unique_model_names(cls, models: list[ModelConfig]) -> list[ModelConfig]:
        seen: set[str] = set()
        for m in models:
            if m.name in seen:
                raise ValueError(f"model name {m.name!r} is used twice")
            seen.add(m.name)
        return models

    def model(self, name: str) -> ModelConfig | None:
        return next((m for m in self.models if m.name == name), None)
