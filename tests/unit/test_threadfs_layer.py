"""Only one layer touches files by path: everything else goes through SafeDir.

Host-side code that opens, writes, renames or deletes by path follows any
symbolic link on the way, and the thread's folders are full of links the
agent's code may have planted.  So this test walks the source (AST) of the
three packages and fails when a module outside the list below calls a
path-based file primitive.  Each listed module says why it may: it touches
only the host's own files (config, databases, state outside every mount), or
it is the layer itself.  Adding a module here needs the same kind of reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = [ROOT / "harness" / "deerflow", ROOT / "extension" / "deerflow_jupyter", ROOT / "deerflow_kernel"]

# Calls that take a path and act on the file system.
_FUNCTIONS = {
    ("os", "open"), ("os", "replace"), ("os", "rename"), ("os", "unlink"), ("os", "remove"),
    ("os", "mkdir"), ("os", "makedirs"), ("os", "scandir"), ("os", "walk"), ("os", "listdir"),
    ("os", "rmdir"), ("os", "symlink"), ("os", "link"), ("os", "chmod"),
    ("shutil", "copyfile"), ("shutil", "copy"), ("shutil", "copy2"), ("shutil", "copytree"),
    ("shutil", "rmtree"), ("shutil", "move"), ("tempfile", "mkstemp"), ("tempfile", "mkdtemp"),
    ("tempfile", "NamedTemporaryFile"),
}
_METHODS = {"write_bytes", "write_text", "read_bytes", "read_text", "unlink", "mkdir", "touch", "rmdir",
            "iterdir", "rglob", "symlink_to", "hardlink_to", "rename"}

# Receivers whose methods of these names are the safe layer's, not pathlib's: a SafeDir
# (``root``, ``top``, ``sub``) or a VirtualFS (``vfs``, ``ctx.vfs``).  A heuristic by name,
# kept honest by using these names for nothing else.
_SAFE_RECEIVERS = {"root", "top", "sub", "vfs", "SafeDir"}

_HOST_ONLY = "host-private files only (config, databases, caches, state outside every mount)"
# module (relative to its package root's parent) -> why it may touch files by path
ALLOWED = {
    "deerflow/threadfs/root.py": "the layer itself: descriptor-relative calls",
    "deerflow/threadfs/_resolve.py": "the layer itself: openat2 and the O_NOFOLLOW walk",
    "deerflow/threadfs/_fdio.py": "the layer itself: temp files, listings and unlinks relative to a held directory",
    "deerflow/threadfs/tree.py": "the layer itself: remove_tree's descriptor-relative O_NOFOLLOW calls",
    "deerflow/sandbox/files/virtual_paths.py": "VirtualFS's own read_bytes (a facade over SafeDir)",
    "deerflow_kernel/result.py": "RunResult.read_bytes fetches over the server API, no file access",
    "deerflow/acp/mcp_servers.py": _HOST_ONLY,
    "deerflow/config/loader.py": _HOST_ONLY,
    "deerflow/cli/__init__.py": "opens /dev/null for stdout once stdout's reader has gone (deerflow ... | head)",
    "deerflow/doctor.py": "moves broken $DEERFLOW_HOME databases aside (host-private files)",
    "deerflow/lab.py": "copies the packaged example notebooks into a folder the user names (deerflow lab)",
    "deerflow/custom_agents/profile.py": _HOST_ONLY,
    "deerflow/custom_agents/store.py": _HOST_ONLY,
    "deerflow/mcp/config.py": _HOST_ONLY,
    "deerflow/mcp/credentials.py": _HOST_ONLY,
    "deerflow/mcp/transport.py": _HOST_ONLY,
    "deerflow/models/cassette.py": "cassette files the user names (the user's own files)",
    "deerflow/outfile.py": "export files the user names on the command line (--out: the user's own files)",
    "deerflow/models/script_format.py": "scripted-model files from config (the user's own files)",
    "deerflow/notebooks/stored.py": "makes $DEERFLOW_HOME/cache/notebooks (host-private); its "
                                   "entries are read and written through SafeDir",
    "deerflow/persistence/checkpointer.py": _HOST_ONLY,
    "deerflow/persistence/files.py": _HOST_ONLY,
    "deerflow/persistence/sqlite.py": _HOST_ONLY,
    "deerflow/plugins/loader.py": _HOST_ONLY,
    "deerflow/sandbox/execution/bwrap.py": "the sandbox's private skeleton under a mkdtemp directory",
    "deerflow/sandbox/network/egress_proxy.py": "the proxy's private socket directory (mkdtemp)",
    "deerflow/sandbox/kernels/kernel.py": "manager.json in a host-private mkdtemp directory (the runtime "
                                          "directory the sandbox sees goes through SafeDir)",
    "deerflow/sandbox/network/policy.py": _HOST_ONLY,
    "deerflow/sandbox/execution/limits.py": "cgroup control files under /sys/fs/cgroup, the host's own",
    "deerflow/sandbox/execution/local.py": "per-thread HOME folders under a private mkdtemp directory",
    "deerflow/sandbox/execution/process.py": "reads /proc to find a command's process tree",
    "deerflow/sandbox/execution/python_runtime.py": "the sandbox's private venv skeleton",
    "deerflow/sandbox/files/read_marks.py": "sandbox-state/, outside every mount",
    "deerflow/notebooks/records.py": "notebook-edits/ (proposals, undo records), outside every mount",
    "deerflow/sandbox/execution/supervisor.py": "runs inside the sandbox, as the agent's code",
    "deerflow/sandbox/files/uploads.py": "reads the source of a host-file upload (a file the caller vouches "
                                         "for); the uploads folder itself goes through SafeDir",
    "deerflow/skills/archive.py": "extracts archives into private temp directories (sources are read "
                                  "through SafeDir)",
    "deerflow/skills/catalog.py": "shipped and installed skill trees, never mounted writable",
    "deerflow/skills/installer.py": "the user's installed skills, never mounted writable",
    "deerflow/memory/store.py": _HOST_ONLY,
    "deerflow/skills/pending.py": "frozen copies under <thread>/pending-changes/, which no sandbox mounts",
    "deerflow/subagents/batches/sql.py": _HOST_ONLY,
    "deerflow_jupyter/handlers/quickstart.py": "reads the packaged quickstart template (package data)",
    "deerflow_jupyter/handlers/skills.py": "an uploaded archive into a private temp file",
    "deerflow_kernel/demo.py": "the user's demo output folder",
    "deerflow_kernel/prompt.py": "the user's own files (--with), in the user's kernel",
    "deerflow_kernel/server.py": "the user's own files, in the user's kernel",
    "deerflow_kernel/session.py": "the user's own files (uploads), in the user's kernel",
}


def _uses(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "open":
            found.append((node.lineno, "open()"))
        elif isinstance(func, ast.Attribute):
            if isinstance(func.value, ast.Name) and (func.value.id, func.attr) in _FUNCTIONS:
                found.append((node.lineno, f"{func.value.id}.{func.attr}()"))
            elif func.attr == "open" and isinstance(func.value, ast.BinOp) and isinstance(func.value.op, ast.Div):
                found.append((node.lineno, "(path / name).open()"))
            elif func.attr in _METHODS and not _safe_receiver(func.value):
                found.append((node.lineno, f".{func.attr}()"))
    return found


def _safe_receiver(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in _SAFE_RECEIVERS
    if isinstance(node, ast.Attribute):
        return node.attr in _SAFE_RECEIVERS or node.attr == "_safe"
    return False


def scan() -> dict[str, list[tuple[int, str]]]:
    out = {}
    for package in PACKAGES:
        for path in sorted(package.rglob("*.py")):
            uses = _uses(ast.parse(path.read_text(encoding="utf-8")))
            if uses:
                out[str(path.relative_to(package.parent))] = uses
    return out


def test_only_listed_modules_touch_files_by_path() -> None:
    found = scan()
    unlisted = {m: u for m, u in found.items() if m not in ALLOWED}
    assert not unlisted, (
        "these modules touch files by path; use deerflow.threadfs.SafeDir for anything under a "
        "thread's folders, or list the module in ALLOWED with the reason it is safe:\n"
        + "\n".join(f"  {m}: {', '.join(f'{what} line {n}' for n, what in u[:5])}" for m, u in unlisted.items())
    )


def test_the_list_has_no_stale_entries() -> None:
    found = scan()
    stale = sorted(m for m in ALLOWED if m not in found)
    assert not stale, f"no longer touch files by path; remove from ALLOWED: {stale}"
