"""The notebook a ``%%deerflow`` cell runs in: its context for the agent, and applying/undoing edits.

* :func:`context_option` names the calling notebook and cell for the run
  (``notebook_context: {"path", "cell_id"}``); the harness reads the cells above
  it (through the server's ContentsManager, or the notebook root in-process)
  and gives them to the agent as untrusted, read-only context.  The path comes
  from the kernel's session (``JPY_SESSION_NAME``, set by jupyter_server), the
  cell from the execute request (``cellId``, sent by JupyterLab).
  ``--no-context`` turns it off.
* :func:`edits_command` is ``%deerflow apply|discard [PROPOSAL]`` and
  ``%deerflow undo [RUN]`` on the current thread.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deerflow.errors import UserError

if TYPE_CHECKING:
    from deerflow.client import RunResult

SESSION_ENV = "JPY_SESSION_NAME"
ROOT_ENV = "DEERFLOW_NOTEBOOK_ROOT"


def calling_cell_id(shell: Any) -> str | None:
    """The id of the cell being executed, when the frontend sent one."""
    kernel = getattr(shell, "kernel", None)
    if kernel is None:
        parent = getattr(shell, "parent_header", None)
    else:
        try:
            parent = kernel.get_parent("shell")
        except TypeError:  # older ipykernel: get_parent() takes no channel
            parent = kernel.get_parent()
        except AttributeError:  # not an ipykernel (a test double, another frontend)
            return None
    metadata = (parent or {}).get("metadata") or {}
    cell_id = metadata.get("cellId")
    return cell_id if isinstance(cell_id, str) and cell_id else None


def notebook_path(backend_kind: str, env: Mapping[str, str] | None = None) -> str | None:
    """The notebook's path as the harness resolves it (None when the kernel does not know it).

    Under the server the session's path is already relative to the Jupyter root;
    in-process the harness reads files under ``$DEERFLOW_NOTEBOOK_ROOT`` (else the
    working directory), and a kernel works in its notebook's folder.
    """
    env = os.environ if env is None else env
    session = env.get(SESSION_ENV, "").strip()
    if not session.endswith(".ipynb"):
        return None
    if backend_kind == "server" and not os.path.isabs(session):
        return session
    here = Path.cwd() / Path(session).name
    root = Path(env.get(ROOT_ENV) or Path.cwd()).resolve()
    try:
        return here.resolve().relative_to(root).as_posix()
    except ValueError:
        return None


def context_option(shell: Any, backend_kind: str, *, enabled: bool) -> dict[str, Any]:
    """The run option naming the calling notebook ({} when off or unknown)."""
    if not enabled:
        return {}
    path = notebook_path(backend_kind)
    if path is None:
        return {}
    return {"notebook_context": {"path": path, "cell_id": calling_cell_id(shell)}}


def edits_command(session: Any, action: str, rest: str) -> dict[str, Any]:
    """``apply``/``discard`` a proposal or ``undo`` a run's edits on the current thread; prints what happened."""
    args = shlex.split(rest) if rest else []
    if len(args) > 1:
        raise UserError(f"%deerflow {action}: give at most one " + ("run id" if action == "undo" else "proposal id"))
    if session.thread_id is None:
        raise UserError(f"%deerflow {action}: no current thread yet (run %%deerflow first)")
    done = session.backend().notebook_edits(session.thread_id, action, args[0] if args else None)
    if action == "undo":
        print(f"restored {len(done['cells'])} cell(s) of {', '.join(done['paths'])} as they were before run "
              f"{done['run_id']} ({done['note']})")
    elif action == "apply":
        print(f"applied proposal {done['id']} to {done['path']}: {len(done['cells'])} cell(s) "
              f"({done['note']}); %deerflow undo restores them")
    else:
        print(f"discarded proposal {done['id']} ({done['path']})")
    return done


def run_proposals(session: Any, result: RunResult | None) -> list[dict[str, Any]]:
    """The pending notebook edit proposals a finished run made (none unless it called ``edit_notebook``)."""
    from deerflow.runtime import events as ev  # loaded already: the result's events are its

    if result is None or not any(isinstance(e, ev.ToolCall) and e.name == "edit_notebook"
                                 for e in result.events):
        return []
    try:
        found = session.backend().notebook_edits(result.thread_id, "list")
    except UserError:
        return []  # a backend without notebook edits: nothing to show
    return [p for p in found.get("proposals", []) if p.get("run_id") == result.run_id]


def show_proposals(session: Any, result: Any) -> None:
    """Below a run: each proposal's diff with Apply / Discard (text: the commands to type)."""
    proposals = run_proposals(session, result)
    if not proposals:
        return
    if not session.widgets:
        for p in proposals:
            print(f"proposal {p['id']} for {p['path']} (cells {', '.join(p['cells'])}): "
                  f"%deerflow apply {p['id']}  |  %deerflow discard {p['id']}")
        return
    import ipywidgets as widgets
    from IPython.display import display

    display(widgets.VBox([proposal_card(session, result.thread_id, p) for p in proposals]))


def proposal_card(session: Any, thread_id: str, proposal: Mapping[str, Any]) -> Any:
    """One proposal: its per-cell diff and the buttons that apply or discard it."""
    import ipywidgets as widgets

    from deerflow_kernel.markup import esc

    title = widgets.HTML(f"<b>Proposed edit to {esc(proposal['path'])}</b> "
                         f"(cells {esc(', '.join(proposal['cells']))}, proposal {esc(proposal['id'])})")
    diff = widgets.HTML(f"<pre style='font-size:90%;white-space:pre-wrap'>{esc(proposal['diff'])}</pre>")
    apply_button = widgets.Button(description="Apply", button_style="success", icon="check")
    discard_button = widgets.Button(description="Discard", icon="times")
    status = widgets.HTML()

    def act(action: str) -> None:
        apply_button.disabled = discard_button.disabled = True
        try:
            done = session.backend().notebook_edits(thread_id, action, proposal["id"])
        except UserError as exc:
            status.value = f"<span style='color:#b00'>{esc(str(exc))}</span>"
            apply_button.disabled = discard_button.disabled = action == "discard"
            return
        status.value = esc(f"applied ({done['note']}); %deerflow undo restores the cells" if action == "apply"
                           else "discarded")

    apply_button.on_click(lambda _: act("apply"))
    discard_button.on_click(lambda _: act("discard"))
    return widgets.VBox([title, diff, widgets.HBox([apply_button, discard_button]), status])
