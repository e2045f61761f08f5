"""The package boundaries SPEC §1 promises."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = ("deerflow_jupyter", "deerflow_kernel")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_harness_never_imports_the_jupyter_packages():
    offenders = {
        str(p.relative_to(ROOT)): sorted(_imports(p) & set(FORBIDDEN))
        for p in (ROOT / "harness" / "deerflow").rglob("*.py")
        if _imports(p) & set(FORBIDDEN)
    }
    assert offenders == {}


def test_the_boundary_check_sees_an_offending_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from deerflow_kernel import magics\nimport deerflow_jupyter.app\n")
    assert _imports(bad) >= {"deerflow_kernel", "deerflow_jupyter"}


def test_three_import_packages_live_where_the_spec_says():
    import deerflow
    import deerflow_jupyter
    import deerflow_kernel

    assert Path(deerflow.__file__).parent == ROOT / "harness" / "deerflow"
    assert Path(deerflow_jupyter.__file__).parent == ROOT / "extension" / "deerflow_jupyter"
    assert Path(deerflow_kernel.__file__).parent == ROOT / "deerflow_kernel"


# --- layers inside the harness (issue 21): imports only run downhill ----------------------------

HARNESS = ROOT / "harness" / "deerflow"
HOSTS = (HARNESS, ROOT / "extension" / "deerflow_jupyter", ROOT / "deerflow_kernel")
# The bottom layers: each may import only the modules listed (of deerflow), nothing above them.
BOTTOM = {
    "deerflow.errors": frozenset(),
    "deerflow.run_options": frozenset({"deerflow.errors"}),
}
# Capability packages that tools/ builds on: they must never import deerflow.tools.
CAPABILITIES = ("sandbox", "browser", "web", "mcp")
# Uphill imports still to be moved down (issue 21); the list may only shrink.
KNOWN_UPHILL = {
    "deerflow.mcp.manager": ["deerflow.tools.builtins.tool_search",
                             "deerflow.tools.builtins.tool_search.make_tool_search"],
    "deerflow.mcp.run_tools": ["deerflow.tools.builtins.tool_search",
                               "deerflow.tools.builtins.tool_search.TOOL_SEARCH"],
}


def _deerflow_imports(path: Path) -> set[str]:
    """The ``deerflow...`` modules a file imports (absolute imports, at any depth)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names if a.name.split(".")[0] == "deerflow")
        elif (isinstance(node, ast.ImportFrom) and node.module and node.level == 0
              and node.module.split(".")[0] == "deerflow"):
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def _uphill(files: dict[str, Path]) -> dict[str, list[str]]:
    """Imports that run uphill: from a bottom module to anything but what it may use, from a
    capability package into ``deerflow.tools``, and ``ToolFailure`` taken from ``deerflow.tools``."""
    offenders: dict[str, list[str]] = {}
    for module, path in files.items():
        found = _deerflow_imports(path)
        bad: set[str] = set()
        if module in BOTTOM:
            bad |= {n for n in found if not any(n == ok or n.startswith(ok + ".") for ok in BOTTOM[module])}
        if module.split(".")[1:2] and module.split(".")[1] in CAPABILITIES:
            bad |= {n for n in found if n == "deerflow.tools" or n.startswith("deerflow.tools.")}
        if module != "deerflow.tools.errors":
            bad |= {n for n in found if n.startswith("deerflow.tools.errors")}
        if bad:
            offenders[module] = sorted(bad)
    return offenders


def _modules() -> dict[str, Path]:
    files: dict[str, Path] = {}
    for base in HOSTS:
        for path in base.rglob("*.py"):
            parts = path.relative_to(base.parent).with_suffix("").parts
            files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return files


def test_imports_run_downhill_between_the_layers():
    assert _uphill(_modules()) == KNOWN_UPHILL


def test_the_layer_check_sees_an_uphill_import(tmp_path):
    errors = tmp_path / "errors.py"
    errors.write_text("from deerflow.config.paths import check_id\n")
    sandbox = tmp_path / "fs.py"
    sandbox.write_text("from deerflow.tools.errors import ToolFailure\n")
    web = tmp_path / "fetch.py"
    web.write_text("import deerflow.tools.assembly\n")
    fine = tmp_path / "ok.py"
    fine.write_text("from deerflow.errors import ToolFailure\nfrom deerflow.run_options import RunOptions\n")
    assert _uphill({"deerflow.errors": errors, "deerflow.sandbox.fs": sandbox, "deerflow.web.fetch": web,
                    "deerflow.browser.ok": fine}) == {
        "deerflow.errors": ["deerflow.config.paths", "deerflow.config.paths.check_id"],
        "deerflow.sandbox.fs": ["deerflow.tools.errors", "deerflow.tools.errors.ToolFailure"],
        "deerflow.web.fetch": ["deerflow.tools.assembly"],
    }
