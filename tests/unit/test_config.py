"""config.yaml: lookup order, $VAR interpolation, validation errors that name the key."""

from pathlib import Path

import pytest

from deerflow.config import find_config_path, find_extensions_path, load_config
from deerflow.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_lookup_order_env_then_cwd_then_home(tmp_path, monkeypatch):
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    explicit = write(tmp_path / "explicit.yaml", "{}")
    env = {"DEERFLOW_HOME": str(home)}
    assert find_config_path(env, cwd) is None
    write(home / "config.yaml", "{}")
    assert find_config_path(env, cwd) == home / "config.yaml"
    write(cwd / "config.yaml", "{}")
    assert find_config_path(env, cwd) == cwd / "config.yaml"
    assert find_config_path({**env, "DEERFLOW_CONFIG": str(explicit)}, cwd) == explicit


def test_missing_explicit_config_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        find_config_path({"DEERFLOW_CONFIG": str(tmp_path / "nope.yaml")}, tmp_path)


def test_extensions_config_lookup(tmp_path):
    cfg = write(tmp_path / "config.yaml", "{}")
    home = {"DEERFLOW_HOME": str(tmp_path / "h")}
    assert find_extensions_path(cfg, home) == tmp_path / "h" / "extensions_config.json"
    write(tmp_path / "extensions_config.json", "{}")
    assert find_extensions_path(cfg, home) == tmp_path / "extensions_config.json"
    assert find_extensions_path(cfg, {**home, "DEERFLOW_EXTENSIONS_CONFIG": "/x/e.json"}) == Path("/x/e.json")



def test_the_extensions_file_beside_the_config_counts_when_it_is_read_not_when_loaded(tmp_path):
    """SPEC §2's order (explicit, beside config.yaml if it exists, home), judged at each read."""
    cfg = write(tmp_path / "config.yaml", "{}")
    env = {"DEERFLOW_HOME": str(tmp_path / "h")}
    loaded = load_config(cfg, env=env)
    assert loaded.extensions_path == tmp_path / "h" / "extensions_config.json"
    beside = write(tmp_path / "extensions_config.json", "{}")
    assert loaded.extensions_path == beside  # created after the load: found without a reload
    beside.unlink()
    assert loaded.extensions_path == tmp_path / "h" / "extensions_config.json"
    explicit = load_config(cfg, env={**env, "DEERFLOW_EXTENSIONS_CONFIG": str(tmp_path / "e.json")})
    write(tmp_path / "extensions_config.json", "{}")
    assert explicit.extensions_path == tmp_path / "e.json"  # the variable still wins, existing or not

def test_env_interpolation(tmp_path):
    cfg = write(tmp_path / "c.yaml", """
models:
  - name: m
    use: langchain_openai:ChatOpenAI
    api_key: $MY_KEY
    base_url: ${MY_URL}
    note: $$literal
""")
    loaded = load_config(cfg, env={"MY_KEY": "k-1", "MY_URL": "http://127.0.0.1:1/v1"})
    kwargs = loaded.config.models[0].init_kwargs()
    assert kwargs["api_key"] == "k-1"
    assert kwargs["base_url"] == "http://127.0.0.1:1/v1"
    assert kwargs["note"] == "$literal"


def test_missing_env_var_names_key_and_variable(tmp_path):
    cfg = write(tmp_path / "c.yaml", "models:\n  - name: m\n    use: a:B\n    api_key: $NOPE_NOT_SET\n")
    with pytest.raises(ConfigError) as info:
        load_config(cfg, env={})
    msg = str(info.value)
    assert str(cfg) in msg
    assert "models[0].api_key" in msg
    assert "$NOPE_NOT_SET" in msg


def test_malformed_yaml_reports_line(tmp_path):
    cfg = write(tmp_path / "c.yaml", "models:\n  - name: m\n    use: [unclosed\n")
    with pytest.raises(ConfigError, match=r"malformed YAML at line \d+"):
        load_config(cfg, env={})


def test_unknown_key_is_named(tmp_path):
    cfg = write(tmp_path / "c.yaml", "sandbox:\n  usee: local\n")
    with pytest.raises(ConfigError) as info:
        load_config(cfg, env={})
    assert "'sandbox.usee'" in str(info.value)
    assert "unknown key" in str(info.value)


def test_wrong_type_is_named(tmp_path):
    cfg = write(tmp_path / "c.yaml", "sandbox:\n  command_timeout: soon\n")
    with pytest.raises(ConfigError) as info:
        load_config(cfg, env={})
    assert "'sandbox.command_timeout'" in str(info.value)


def test_top_level_must_be_mapping(tmp_path):
    cfg = write(tmp_path / "c.yaml", "- just\n- a list\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_config(cfg, env={})


def test_example_config_is_valid_and_documents_every_section():
    text = (ROOT / "config.example.yaml").read_text()
    loaded = load_config(ROOT / "config.example.yaml", env={"OPENAI_API_KEY": "x", "OPENAI_BASE_URL": "http://h/v1"})
    for section in type(loaded.config).model_fields:
        assert f"\n{section}:" in "\n" + text or f"\n# {section}:" in "\n" + text, section
