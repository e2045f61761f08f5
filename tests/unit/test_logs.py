"""Log lines for an operator: JSON objects with their fields, and no secret in any format."""

from __future__ import annotations

import io
import json
import logging

from deerflow.config.schema import AppConfig
from deerflow.logs import JsonFormatter, RedactFilter, config_secrets

KEY = "lab-key-0123456789"


def config() -> AppConfig:
    return AppConfig.model_validate({
        "models": [{"name": "paid", "use": "langchain_openai:ChatOpenAI", "api_key": KEY}],
        "web": {"api_key": "search-key-abcdef"},
        "acp_agents": {"coder": {"command": "agent", "env": {"AGENT_SESSION": "acp-env-value-42"}}},
        "storage": {"url": "postgresql://lab:db-password-77@db.example/deerflow"},
    })


def capture(formatter: logging.Formatter, secrets: list[str]) -> tuple[logging.Logger, io.StringIO]:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(RedactFilter(secrets))
    handler.setFormatter(formatter)
    logger = logging.getLogger("deerflow.tests.logs")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return logger, out


def test_the_configs_keys_tokens_env_and_database_password_are_secrets():
    found = config_secrets(config(), env={"LAB_SERVICE_TOKEN": "tok-987654321", "HOME": "/home/lab",
                                          "MAX_TOKENS": "1000000000"})
    assert {KEY, "search-key-abcdef", "acp-env-value-42", "db-password-77", "tok-987654321"} <= set(found)
    assert "/home/lab" not in found and "1000000000" not in found


def test_ordinary_settings_named_near_a_secret_are_not_secrets():
    rules = {"authorization": {"enabled": True, "rules": []}, "limits": {"max_tokens_per_run": 5000},
             "models": [{"name": "paid-model", "use": "langchain_openai:ChatOpenAI", "max_tokens": 4096}]}
    assert config_secrets(AppConfig.model_validate(rules), env={}) == []


def test_a_json_line_has_its_fields_as_keys_and_no_secret_anywhere():
    logger, out = capture(JsonFormatter(tracebacks=True), config_secrets(config(), env={}))
    fields = {"user": "alice", "thread": "t-1", "run": "r-1", "status": "success", "duration_s": 1.5}
    logger.info("run finished %s", json.dumps(fields), extra={"fields": fields, "short_message": "run finished"})
    logger.warning("provider said: Incorrect API key %s (Bearer abcdefghijkl, sk-proj-zzzzzzzzzzzzzzzz)", KEY,
                   extra={"fields": {"key": KEY, "attempt": 2}})
    try:
        raise RuntimeError(f"401 for {KEY}")
    except RuntimeError:
        logger.exception("call failed")
    text = out.getvalue()
    lines = [json.loads(line) for line in text.splitlines()]
    assert lines[0]["message"] == "run finished" and lines[0]["logger"] == "deerflow.tests.logs"
    assert {k: lines[0][k] for k in fields} == fields and lines[0]["level"] == "info"
    assert lines[1]["key"] == "***" and lines[1]["attempt"] == 2
    assert "Bearer ***" in lines[1]["message"] and "sk-proj" not in lines[1]["message"]
    assert lines[2]["error"] == "RuntimeError: 401 for ***" and "Traceback" in lines[2]["traceback"]
    assert KEY not in text and "abcdefghijkl" not in text


def test_text_lines_are_redacted_too():
    logger, out = capture(logging.Formatter("%(levelname)s %(message)s"), [KEY])
    try:
        raise ValueError(f"bad key {KEY}")
    except ValueError:
        logger.exception("failed with %s", KEY)
    assert KEY not in out.getvalue() and "failed with ***" in out.getvalue() and "bad key ***" in out.getvalue()
