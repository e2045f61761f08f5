"""The configuration reference is generated from the schema, and config.example.yaml mentions every key of it."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from deerflow.config.schema import AppConfig

ROOT = Path(__file__).resolve().parents[2]


def _docs_generator():
    """docs/_ext/deerflow_docs.py, the Sphinx extension that writes the reference pages (no Sphinx needed)."""
    spec = importlib.util.spec_from_file_location("deerflow_docs", ROOT / "docs" / "_ext" / "deerflow_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_schema_key_is_in_the_reference_with_its_type_and_default() -> None:
    keys = {key: (kind, default) for key, kind, default, _ in _docs_generator().config_keys(AppConfig)}
    for name, field in AppConfig.model_fields.items():
        assert (field.alias or name) in keys
    assert keys["storage.run_lease_seconds"][1] == repr(AppConfig().storage.run_lease_seconds)
    assert keys["models[].timeouts.first_token"] == ("float | null", "300.0")


def test_config_example_mentions_every_key_of_the_schema() -> None:
    example = (ROOT / "config.example.yaml").read_text(encoding="utf-8")
    missing = []
    for key, *_ in _docs_generator().config_keys(AppConfig):
        leaf = re.split(r"[.\]]", key)[-1]
        if not re.search(rf"(^|[\s{{,#-]){re.escape(leaf)}\s*:", example, flags=re.M):
            missing.append(key)
    assert not missing, f"config.example.yaml does not mention {missing}"


def test_the_error_list_holds_the_user_errors_a_person_meets() -> None:
    found = {(module, text) for module, _kind, text in _docs_generator().user_errors()}
    modules = {module for module, _ in found}
    assert {"deerflow.config.loader", "deerflow.runtime.usage"} <= modules
    assert any(text.startswith("daily token budget spent") for _, text in found)
