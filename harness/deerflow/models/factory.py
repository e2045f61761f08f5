"""Turning a model name into a chat model.

Resolution, in order:

1. ``replay`` given → a :class:`ReplayChatModel` on that cassette (offline).
2. A named model (or ``default_model``, or the first entry) from ``models``.
3. No model configured but ``OPENAI_API_KEY`` set → ``ChatOpenAI`` with
   ``$OPENAI_MODEL`` (default ``gpt-4.1-mini``) and ``$OPENAI_BASE_URL``.
4. Otherwise the embedded offline model: a :class:`ScriptedChatModel` playing
   ``$DEERFLOW_SCRIPT`` or the packaged quickstart script.  Every run using it
   says so (the ``notice``).

Every model that is not offline is wrapped in a :class:`GuardedChatModel`
(deadlines, checked answers, the entry's ``compat`` settings).  ``record`` wraps
whatever was resolved in a :class:`RecordingChatModel`, outside the guard, so a
failed call is recorded as the failure the run saw.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from langchain_core.language_models import BaseChatModel
from pydantic import ValidationError

from deerflow.config.schema import AppConfig, ModelConfig
from deerflow.errors import ConfigError
from deerflow.reflection import resolve_variable

DEFAULT_SCRIPT = Path(__file__).parent / "scripts" / "quickstart.yaml"
OFFLINE_NOTICE = (
    "Using the embedded offline model (a scripted conversation): no model is configured "
    "and OPENAI_API_KEY is not set. See README 'Use a real model'."
)

CONFIGURED_OFFLINE_NOTICE = (
    "Using an offline model (scripted or replayed answers, no network): its answers do not depend "
    "on your prompt."
)


@dataclass(frozen=True)
class ResolvedModel:
    """A ready chat model and what it is."""

    model: BaseChatModel
    name: str
    entry: ModelConfig | None
    offline: bool = False
    notice: str | None = None

    @property
    def supports_vision(self) -> bool:
        return bool(self.entry and self.entry.supports_vision)


def create_chat_model(
    config: AppConfig,
    name: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    config_file: str | None = None,
    record: str | Path | None = None,
    replay: str | Path | None = None,
) -> ResolvedModel:
    """Resolve and instantiate the chat model for a run.

    Raises:
        ConfigError: unknown model name, unimportable class, bad constructor arguments.
    """
    env = os.environ if env is None else env
    if replay is not None:
        from deerflow.models.replay import ReplayChatModel

        return ResolvedModel(ReplayChatModel(cassette=Path(replay)), f"replay:{Path(replay).name}", None, offline=True,
                             notice=f"Replaying recorded model answers from {Path(replay).name}.")
    resolved = _resolve(config, name, env=env, config_file=config_file)
    if record is not None:
        from deerflow.models.replay import RecordingChatModel

        wrapped = RecordingChatModel(inner=resolved.model, cassette=Path(record))
        resolved = ResolvedModel(wrapped, resolved.name, resolved.entry, resolved.offline, resolved.notice)
    return resolved


def _resolve(config: AppConfig, name: str | None, *, env: Mapping[str, str], config_file: str | None) -> ResolvedModel:
    if config.models:
        wanted = name or config.default_model or config.models[0].name
        entry = config.model(wanted)
        if entry is None:
            known = ", ".join(m.name for m in config.models)
            raise ConfigError(f"unknown model {wanted!r}; configured models: {known}", file=config_file, key="models")
        model = instantiate(entry, config_file=config_file)
        if _is_offline(model):
            return ResolvedModel(model, entry.name, entry, offline=True, notice=CONFIGURED_OFFLINE_NOTICE)
        return ResolvedModel(guard(model, entry), entry.name, entry)
    if name and name not in {"offline", "scripted"}:
        raise ConfigError(f"unknown model {name!r}: no models are configured", file=config_file, key="models")
    if env.get("OPENAI_API_KEY") and name is None:
        entry = ModelConfig.model_validate({  # model, base_url: extra keys, for the model class
            "name": "openai", "use": "langchain_openai:ChatOpenAI",
            "model": env.get("OPENAI_MODEL", "gpt-4.1-mini"),
            "base_url": env.get("OPENAI_BASE_URL") or None,
        })
        return ResolvedModel(guard(instantiate(entry, config_file=config_file), entry), entry.name, entry)
    return offline_model(env)


def guard(model: BaseChatModel, entry: ModelConfig) -> BaseChatModel:
    """``model`` with the entry's deadlines, retries and compat settings (:mod:`deerflow.models.guard`)."""
    from deerflow.models.guard import CallLimits, GuardedChatModel

    limits = CallLimits(entry.timeouts.first_token, entry.timeouts.idle, entry.timeouts.total)
    return GuardedChatModel(
        inner=model, where=describe(model, entry), limits=limits, retries=entry.retries,
        tool_choice=entry.compat.tool_choice, content_null=entry.compat.content_null,
        require_finish_reason=entry.compat.require_finish_reason and "openai" in model._llm_type.lower(),
    )


def describe(model: BaseChatModel, entry: ModelConfig) -> str:
    """``model 'local' (qwen2.5 at http://127.0.0.1:8080/v1)``: which model and server, without secrets."""
    from deerflow.models.provider_errors import public_url

    extras = entry.model_extra or {}
    served = extras.get("model") or getattr(model, "model_name", None) or type(model).__name__
    url = public_url(extras.get("base_url") or getattr(model, "openai_api_base", None))
    if url is None and "openai" in model._llm_type.lower():
        url = "https://api.openai.com/v1"
    return f"model {entry.name!r} ({served}" + (f" at {url})" if url else ")")


def _is_offline(model: BaseChatModel) -> bool:
    from deerflow.models.replay import ReplayChatModel
    from deerflow.models.scripted import ScriptedChatModel

    return isinstance(model, (ScriptedChatModel, ReplayChatModel))


def offline_model(env: Mapping[str, str] | None = None) -> ResolvedModel:
    """The embedded scripted model (``$DEERFLOW_SCRIPT`` or the quickstart script)."""
    from deerflow.models.scripted import ScriptedChatModel

    env = os.environ if env is None else env
    script = Path(env.get("DEERFLOW_SCRIPT") or DEFAULT_SCRIPT)
    if not script.is_file():
        raise ConfigError("DEERFLOW_SCRIPT points to a file that does not exist", file=str(script))
    model = ScriptedChatModel.from_file(script)
    return ResolvedModel(model, "offline", None, offline=True, notice=OFFLINE_NOTICE)


def resolve_script(value: str, *, config_file: str | None) -> str | Path:
    """A ``script:`` value: inline YAML, a path (relative to the config file), or a packaged script name."""
    if "\n" in value or value.lstrip().startswith(("turns:", "{", "[")):
        return value
    candidate = Path(value).expanduser()
    if not candidate.is_absolute() and config_file:
        candidate = Path(config_file).parent / candidate
    if candidate.is_file():
        return candidate
    packaged = DEFAULT_SCRIPT.parent / f"{value}.yaml"
    if packaged.is_file():
        return packaged
    raise ConfigError(f"script {value!r} is neither a file nor a packaged script", file=config_file, key="models.script")


def instantiate(entry: ModelConfig, *, config_file: str | None = None) -> BaseChatModel:
    """Build the model object for one config entry."""
    key = f"models[{entry.name}]"
    cls = resolve_variable(entry.use, key=f"{key}.use", file=config_file)
    if not (isinstance(cls, type) and issubclass(cls, BaseChatModel)):
        raise ConfigError(f"{entry.use!r} is not a langchain BaseChatModel class", file=config_file, key=f"{key}.use")
    kwargs = entry.init_kwargs()
    kwargs.pop("context_window", None)
    if isinstance(kwargs.get("script"), str):
        kwargs["script"] = resolve_script(kwargs["script"], config_file=config_file)
    if "stream_usage" in getattr(cls, "model_fields", {}) and "stream_usage" not in kwargs:
        kwargs["stream_usage"] = True  # usage when streaming (stream_options.include_usage); `stream_usage: false` opts out
    if "stream_chunk_timeout" in getattr(cls, "model_fields", {}) and "stream_chunk_timeout" not in kwargs:
        # langchain-openai's own 120 s limit between chunks would end a long prompt evaluation (minutes on a
        # CPU server) under the entry's `timeouts.first_token`; the guard's deadlines govern, `stream_chunk_timeout: N` opts in
        kwargs["stream_chunk_timeout"] = None
    try:
        return cls(**kwargs)
    except ValidationError as exc:  # a field of the entry: name it (never its value: it may be a key)
        field, problem = _first_problem(exc)
        where = f"{key}.{field}" if field else key
        raise ConfigError(f"{problem} ({entry.use})", file=config_file, key=where) from None
    except (TypeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"cannot create {entry.use}: {first}", file=config_file, key=key) from None


def _first_problem(exc: ValidationError) -> tuple[str, str]:
    """``(field path, message)`` of the first error; more errors are counted, not listed."""
    errors = exc.errors(include_input=False, include_url=False)
    if not errors:
        return "", str(exc).splitlines()[0]
    first = errors[0]
    field = ".".join(str(part) for part in first.get("loc", ()))
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return field, f"{first.get('msg', 'invalid value')}{more}"
