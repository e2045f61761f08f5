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
