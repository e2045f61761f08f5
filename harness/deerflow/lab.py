"""``deerflow lab``: JupyterLab on the user's own copy of the example notebooks.

The packaged notebooks (with their offline config and scripts) are copied into a folder the user
names, never over files already there; DeerFlow's workspace (the first two notebooks open) is added
to JupyterLab's workspaces once, so the layout the user leaves is theirs; then this process becomes
``jupyter lab``.  Kept out of ``cli.py`` so that the command line's module stays the dispatcher.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

EXAMPLES_DIR = Path("~/deerflow-notebooks")  # where `deerflow lab` puts the example notebooks
LAB_WORKSPACES = "lab-workspaces"  # under DEERFLOW_HOME: `deerflow lab`'s JupyterLab layouts


def run_lab(extra: list[str]) -> int:
    """JupyterLab on a copy of the example notebooks, on the offline config unless one is set."""
    from deerflow.config.paths import default_home
    from deerflow.resources import QUICKSTART

    root = ["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 and "--allow-root" not in extra else []
    if _not_a_server(extra):  # `deerflow lab --version`, `deerflow lab workspaces ...`: nothing to set up
        return _exec([sys.executable, "-m", "jupyter", "lab", *extra], dict(os.environ))
    folder_arg, extra = _take_option(extra, "--dir")
    folder = Path(folder_arg or EXAMPLES_DIR).expanduser().resolve()
    try:
        added = copy_examples(folder)
    except OSError as exc:
        print(f"deerflow: cannot copy the example notebooks to {folder}: {exc}", file=sys.stderr)
        return 1
    if added:
        print(f"Copied the example notebooks to {folder} (yours to edit; never overwritten).", file=sys.stderr)
    workspaces = default_home() / LAB_WORKSPACES
    try:
        open_examples = ["--LabApp.default_url=/lab/workspaces/" + add_lab_workspace(workspaces)]
    except (OSError, ValueError) as exc:
        print(f"Could not set up the notebooks' workspace in {workspaces} ({exc}): JupyterLab opens "
              "on the quickstart alone.", file=sys.stderr)
        open_examples = [f"--LabApp.default_url=/lab/tree/{QUICKSTART}"]
    env = dict(os.environ)
    if not env.get("DEERFLOW_CONFIG") and not Path("config.yaml").is_file() \
            and not (default_home() / "config.yaml").is_file():
        env["DEERFLOW_CONFIG"] = str(folder / "offline-config.yaml")
        print(f"No config.yaml found: using the offline example config ({env['DEERFLOW_CONFIG']}). "
              "See README to use a real model.", file=sys.stderr)
    return _exec([sys.executable, "-m", "jupyter", "lab", *root, f"--ServerApp.root_dir={folder}",
                  f"--LabApp.workspaces_dir={workspaces}", *open_examples, *extra], env)


def _not_a_server(extra: list[str]) -> bool:
    """Whether ``jupyter lab EXTRA`` only prints something or runs a subcommand."""
    return bool(extra and not extra[0].startswith("-")) or any(
        a in {"--version", "--help", "-h", "--help-all", "--paths"} for a in extra)


def _exec(cmd: list[str], env: dict[str, str]) -> int:
    """Become ``cmd``: signals and Ctrl-C reach jupyter lab directly, nothing is left behind."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(cmd[0], cmd, env)
    return 0  # not reached


def copy_examples(folder: Path) -> list[Path]:
    """Copy the packaged example notebooks (and their config and scripts) into ``folder``.

    Files already there are kept as they are (the user's edits win); returns the files added.
    """
    from deerflow.resources import notebooks_dir

    source = notebooks_dir()
    added = []
    for item in sorted(source.rglob("*")):
        relative = item.relative_to(source)
        if not item.is_file() or any(part.startswith(".") or part == "__pycache__" for part in relative.parts):
            continue
        target = folder / relative
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(item, target)
        added.append(target)
    return added


def add_lab_workspace(workspaces: Path) -> str:
    """Put DeerFlow's JupyterLab workspace (the example notebooks open) into ``workspaces``.

    Only when it is not there yet: JupyterLab saves the layout into it as the user works, and
    that layout is the user's to keep.  Returns the workspace's name (for ``/lab/workspaces/NAME``).

    Raises:
        OSError: the folder or the file cannot be written.
        ValueError: the packaged workspace is not a valid one.
    """
    from jupyterlab_server.workspaces_handler import WORKSPACE_EXTENSION, WorkspacesManager, slugify

    from deerflow.resources import lab_workspace

    raw = lab_workspace().read_text(encoding="utf-8")
    name = json.loads(raw)["metadata"]["id"].strip("/")
    workspaces.mkdir(parents=True, exist_ok=True)
    if not (workspaces / (slugify(name) + WORKSPACE_EXTENSION)).exists():
        WorkspacesManager(str(workspaces)).save(name, raw)
    return name


def _take_option(args: list[str], name: str) -> tuple[str | None, list[str]]:
    """``(value, the rest)`` for ``NAME VALUE`` or ``NAME=VALUE`` in ``args``."""
    rest, value, i = [], None, 0
    while i < len(args):
        if args[i] == name and i + 1 < len(args):
            value, i = args[i + 1], i + 2
            continue
        if args[i].startswith(name + "="):
            value = args[i].split("=", 1)[1]
        else:
            rest.append(args[i])
        i += 1
    return value, rest


__all__ = ["EXAMPLES_DIR", "LAB_WORKSPACES", "add_lab_workspace", "copy_examples", "run_lab"]
