"""The package boundaries SPEC §1 promises."""

import ast
import re
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
KNOWN_UPHILL: dict[str, list[str]] = {}


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


# --- the package graph (issue 21): every harness package has a layer; imports only go down ------

# Lowest first.  A package may import packages of lower layers, and of its own layer as long as
# no cycle forms; a new package must be placed here before the test passes.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "text", "threadfs", "resources", "_lazy", "outfile", "arguments"),  # import nothing but errors
    ("run_options", "reflection"),
    ("config",),
    ("persistence", "models"),
    ("runtime",),  # the core: RunContext, HostServices, events, interaction policy, consent, notes
    ("web", "acp", "plugins", "custom_agents", "sandbox", "browser", "notebooks", "memory", "mcp",
     "skills", "logs"),  # capabilities
    ("tools",),
    ("agents",),
    ("subagents",),
    ("runs",),  # the run's wiring: RunManager
    ("scheduling",),
    ("client", "cli", "terminal", "doctor", "lab", "__init__"),  # hosts in the harness
)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _runtime_imports(path: Path) -> list[tuple[int, str]]:
    """``deerflow...`` modules a file imports when it runs (module level or inside functions).

    Imports under ``if TYPE_CHECKING:`` are left out: they never execute, so they create no
    import-time dependency or cycle.  ``runtime/services.py`` relies on this to name the service
    classes of the capability packages it carries (so consumers get real types) without
    depending on them; pyright still checks those names.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and _is_type_checking(node)
               for stmt in node.body for n in ast.walk(stmt)}
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("deerflow.")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith("deerflow."):
                found.append((node.lineno, node.module))
            elif node.module == "deerflow":
                found += [(node.lineno, f"deerflow.{a.name}") for a in node.names]
    return found


def _package_graph(files: dict[str, Path]) -> dict[str, dict[str, list[str]]]:
    """Package → imported package → the importing ``module:line`` (harness modules only)."""
    graph: dict[str, dict[str, list[str]]] = {}
    for module, path in files.items():
        parts = module.split(".")
        if parts[0] != "deerflow":
            continue
        source = parts[1] if len(parts) > 1 else "__init__"
        graph.setdefault(source, {})
        for line, name in _runtime_imports(path):
            target = name.split(".")[1]
            if target != source:
                graph[source].setdefault(target, []).append(f"{module}:{line} imports {name}")
    return graph


def _cycles(graph: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """The strongly connected components of more than one package (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph.get(node, {}):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _layer_violations(graph: dict[str, dict[str, list[str]]]) -> list[str]:
    """Every import from a package to one of a higher layer, and every package with no layer."""
    rank = {name: i for i, layer in enumerate(LAYERS) for name in layer}
    problems = [f"{name}: not placed in LAYERS" for name in sorted(graph) if name not in rank]
    for source, targets in sorted(graph.items()):
        for target, where in sorted(targets.items()):
            if source in rank and target in rank and rank[target] > rank[source]:
                problems += [f"uphill {source} -> {target}: {w}" for w in where]
    return problems


def test_every_harness_package_imports_only_its_layer_or_below():
    assert _layer_violations(_package_graph(_modules())) == []


def test_no_import_cycle_between_harness_packages():
    assert _cycles(_package_graph(_modules())) == []


def test_the_package_check_sees_an_uphill_import_and_a_cycle(tmp_path):
    files = {}
    for module, text in {"deerflow.sandbox.x": "from deerflow.agents.lead_agent import make_lead_agent\n",
                         "deerflow.agents.y": "import deerflow.sandbox.x\n",
                         "deerflow.web.z": "def f():\n    from deerflow.browser import service\n",
                         "deerflow.browser.w": "from deerflow.web import z\n",
                         "deerflow.runtime.t": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                               "    from deerflow.tools.assembly import ToolCache\n",
                         "deerflow.newpkg": "from deerflow import errors\n"}.items():
        files[module] = tmp_path / f"{module}.py"
        files[module].write_text(text)
    graph = _package_graph(files)
    assert graph["runtime"] == {}  # TYPE_CHECKING only
    assert _layer_violations(graph) == [
        "newpkg: not placed in LAYERS",
        "uphill sandbox -> agents: deerflow.sandbox.x:1 imports deerflow.agents.lead_agent",
    ]
    assert _cycles(graph) == [["agents", "sandbox"], ["browser", "web"]]


def test_the_lead_agent_is_wired_in_one_place():
    """Hosts, subagent batches and test fixtures build a run's agent through ``deerflow.runs.wiring``,
    never by calling ``make_lead_agent`` / ``LeadAgentDeps`` themselves (issue 21: no copied wiring)."""
    allowed = {HARNESS / "agents" / "lead_agent.py", HARNESS / "runs" / "wiring.py"}
    callers = []
    for base in (*HOSTS, ROOT / "tests", ROOT / "bench"):
        for path in base.rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            names = {n.func.id if isinstance(n.func, ast.Name) else getattr(n.func, "attr", "")
                     for n in ast.walk(tree) if isinstance(n, ast.Call)}
            if names & {"make_lead_agent", "LeadAgentDeps"} and path not in allowed:
                callers.append(str(path.relative_to(ROOT)))
    assert callers == []


_INTO_MANAGER = re.compile(r"\b_?manager(\(\)\))?\.(store|home|loaded|services|checkpointer)\b")


def _reaching_into_the_manager(roots: list[Path], base: Path = ROOT) -> dict[str, list[str]]:
    """Lines outside ``runs/`` that read the run manager's own parts instead of asking it."""
    found: dict[str, list[str]] = {}
    for root in roots:
        for path in root.rglob("*.py"):
            if "runs" in path.relative_to(base).parts[:3]:
                continue
            hits = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()
                    if _INTO_MANAGER.search(line)]
            if hits:
                found[str(path.relative_to(base))] = hits
    return found


def test_hosts_ask_the_run_manager_instead_of_reaching_into_it():
    """Hosts use RunManager's methods (docs/ARCHITECTURE.md, 'What a host may ask of the run
    manager'); its store, paths, config holder and services stay its own."""
    roots = [ROOT / "harness" / "deerflow", ROOT / "extension" / "deerflow_jupyter", ROOT / "deerflow_kernel"]
    assert _reaching_into_the_manager(roots) == {}


def test_the_manager_check_sees_a_host_reaching_in(tmp_path):
    (tmp_path / "host.py").write_text("async def f(manager):\n    return await manager.store.aio.get_thread('t', 'u')\n")
    (tmp_path / "late.py").write_text("async def g(self):\n    return (await self.manager()).services.mcp\n")
    (tmp_path / "ok.py").write_text("async def f(manager):\n    return await manager.find_thread('t', 'u')\n")
    assert sorted(_reaching_into_the_manager([tmp_path], tmp_path)) == ["host.py", "late.py"]


_INTO_CLIENT = re.compile(r"\bclient\._[a-z]\w*")


def _reaching_into_the_client(roots: list[Path], base: Path = ROOT) -> dict[str, list[str]]:
    """Lines outside ``deerflow/client/`` that use a DeerFlow client's private parts (its async twin,
    its loaded config, its loop) instead of its public methods."""
    found: dict[str, list[str]] = {}
    for root in roots:
        for path in root.rglob("*.py"):
            if path.parent.name == "client" and path.parent.parent.name == "deerflow":
                continue  # the client package itself
            hits = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()
                    if _INTO_CLIENT.search(line)]
            if hits:
                found[str(path.relative_to(base))] = hits
    return found


def test_hosts_use_the_clients_public_methods():
    """The kernel's in-process backend and the CLI are hosts like any other: what they need of a
    client is a public method of it (so the sync and async clients stay the one API)."""
    roots = [ROOT / "harness" / "deerflow", ROOT / "extension" / "deerflow_jupyter", ROOT / "deerflow_kernel"]
    assert _reaching_into_the_client(roots) == {}


def test_the_client_check_sees_a_host_reaching_in(tmp_path):
    (tmp_path / "kernel.py").write_text("def f(self):\n    return self.client._async._loaded\n")
    (tmp_path / "cli.py").write_text("def g(client):\n    return client._call(client._async.manager())\n")
    (tmp_path / "ok.py").write_text("def f(self):\n    return self.client.loaded.path\n")
    assert sorted(_reaching_into_the_client([tmp_path], tmp_path)) == ["cli.py", "kernel.py"]
