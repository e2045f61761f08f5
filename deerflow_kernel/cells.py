"""Hand-over: the agent's python cells, shown as code and moved into the user's notebook.

* :func:`code_html` highlights code with pygments (inline styles: no stylesheet
  to ship, and it survives a saved notebook) and adds a **copy** button.  The
  button is an inline ``onclick`` calling ``navigator.clipboard`` — the nearest
  real copy without a JupyterLab extension of our own; it works in live widget
  views (JupyterLab renders widget HTML as is) on ``localhost``/HTTPS, and
  where a sanitizer strips it (a saved, untrusted notebook) the code is still
  plain selectable text.
* :func:`insert_below` is the view's **insert as a new cell below**: a widget
  click is a comm message, not an execute request, so IPython's
  ``set_next_input`` cannot reach the frontend from there.  It goes through
  the notebook edit mechanism of issue 26 instead (``notebook-edits/insert``:
  the server's ContentsManager writes the cell below the ``%%deerflow`` cell,
  with an undo record), whose note says whether the open notebook updates live
  or must be reloaded.
* :func:`cells_command` is ``%deerflow cells [--run R] [--print]``: during a
  magic's execution ``set_next_input(..., replace=False)`` *is* honoured, so
  it puts the run's cells into one new cell below (or prints them).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from deerflow.errors import UserError
from deerflow.runtime import events as ev
from deerflow.runtime.events import short_id
from deerflow_kernel.controls import XSRF_JS
from deerflow_kernel.markup import esc

PYTHON_TOOL = "python"
MAX_CODE_CHARS = 20_000
_PRE = "margin:0;padding:4px 6px;background:#f7f7f7;overflow:auto;max-height:360px;font-size:90%"
_COPY_JS = ("navigator.clipboard&&navigator.clipboard.writeText(this.parentNode.querySelector('pre').innerText)"
            ".then(()=>{this.textContent='copied'},()=>{this.textContent='select the code to copy'})")


_INSERT_JS = (
    "(async b=>{const d=b.dataset,s=b.nextElementSibling;b.disabled=true;"
    + XSRF_JS
    + "try{const r=await fetch(d.api+'threads/'+encodeURIComponent(d.thread)+'/notebook-edits/insert',"
    "{method:'POST',credentials:'same-origin',headers:{'Content-Type':'application/json','X-XSRFToken':x},"
    "body:JSON.stringify({path:d.path,run_id:d.run,number:d.cell?+d.cell:undefined,operations:[{op:'insert',after:d.after,cell_type:'code',"
    "source:b.closest('.deerflow-code-block').querySelector('pre').innerText.replace(/\\n$/,'')}]})});"
    "const j=await r.json().catch(()=>({}));"
    "s.textContent=r.ok?'inserted below the %%deerflow cell of '+d.path+': if the notebook does not show it, "
    "use File \u2192 Reload Notebook from Disk before saving (%deerflow undo removes it)'+(j.files?'; '+j.files:'')"
    ":(r.status===422&&/unknown cell id/.test(j.message||'')?'save the notebook (Ctrl+S), then click again'"
    ":(j.message||('insert failed ('+r.status+')')));}catch(e){s.textContent='insert failed: '+e}"
    "b.disabled=false})(this)")


def agent_code(events: Iterable[object]) -> list[str]:
    """The code of every ``python`` tool call in ``events``, in order (the agent's cells)."""
    return [e.args["code"] for e in events
            if isinstance(e, ev.ToolCall) and e.name == PYTHON_TOOL
            and isinstance(e.args.get("code"), str) and e.args["code"].strip()]


def highlight(code: str) -> str:
    """``code`` as highlighted HTML (inline styles); escaped plain text when pygments is missing."""
    code = code[:MAX_CODE_CHARS]
    try:
        from pygments import highlight as render
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import PythonLexer
    except ImportError:  # pragma: no cover - pygments comes with IPython
        return f"<pre style='{_PRE}'><code class='language-python'>{esc(code)}</code></pre>"
    html = render(code, PythonLexer(), HtmlFormatter(noclasses=True, nowrap=True, style="default"))
    return f"<pre class='deerflow-code' style='{_PRE}'><code class='language-python'>{html}</code></pre>"


def code_html(code: str, *, copy: bool = True, insert: Mapping[str, str] | None = None) -> str:
    """Highlighted code with copy (and, given ``insert``, insert-below) buttons.

    ``insert`` (``api``, ``thread``, ``run``, ``path``, ``after``, and ``cell``:
    the call's place among its run's python cells) makes the button POST the
    code to ``notebook-edits/insert`` from the browser itself (same-origin,
    Jupyter's XSRF cookie): it works while the kernel is busy with the run, and
    in the settled static view.  The server puts it below the cells already
    inserted there in the agent's order, whatever order the clicks come in.  Where HTML is sanitized the
    buttons are dropped and the code stays selectable text.
    """
    button = (f"<button class='deerflow-copy' title='Copy the code to the clipboard' style='float:right;"
              f"font-size:85%;margin:2px' onclick=\"{esc(_COPY_JS)}\">copy</button>") if copy else ""
    below = ""
    if insert:
        data = " ".join(f"data-{k}='{esc(str(v))}'" for k, v in insert.items())
        below = (f"<div><button class='deerflow-insert' {data} title='Write this code into your notebook as a "
                 f"new cell below the %%deerflow cell' style='font-size:85%;margin:2px' onclick=\"{esc(_INSERT_JS)}\">"
                 f"insert as a new cell below</button> <span class='deerflow-insert-status'></span></div>")
    return f"<div class='deerflow-code-block'>{button}{highlight(code)}{below}</div>"


def python_call_widget(code: str, rest_html: str, on_insert: Callable[[str], str] | None) -> Any:
    """The detail of a ``python`` tool call: its code, copy, and "insert as a new cell below"."""
    import ipywidgets as widgets

    detail = widgets.HTML(code_html(code) + rest_html)
    if on_insert is None:
        return detail, widgets.VBox([detail])
    button = widgets.Button(description="insert as a new cell below", icon="plus", tooltip=(
        "Write this code into your notebook as a new cell below the %%deerflow cell"),
        layout=widgets.Layout(width="auto"))
    status = widgets.HTML()

    def clicked(_: Any) -> None:
        button.disabled = True
        try:
            status.value = f"<span style='color:#2a6'>{esc(on_insert(code))}</span>"
        except UserError as exc:
            status.value = f"<span style='color:#b00'>{esc(str(exc))}</span>"
            button.disabled = False

    button.on_click(clicked)
    return detail, widgets.VBox([detail, widgets.HBox([button, status])])


def numbered(target: Mapping[str, str] | None, number: int) -> dict[str, str] | None:
    """An insert target for the run's ``number``-th python cell (1-based)."""
    return None if target is None else {**target, "cell": str(number)}


class CellInserter:
    """Inserts code below the ``%%deerflow`` cell that ran (the server keeps several in the agent's order)."""

    def __init__(self, session: Any, path: str | None, cell_id: str | None, api: str | None = None) -> None:
        self.session, self.path, self.anchor, self.api = session, path, cell_id, api

    def target(self, thread_id: str, run_id: str) -> dict[str, str] | None:
        """Where the browser-side insert button posts (None: no server API, or notebook/cell unknown)."""
        if not (self.api and self.path and self.anchor and thread_id):
            return None
        return {"api": self.api, "thread": thread_id, "run": run_id, "path": self.path, "after": self.anchor}

    def __call__(self, code: str, *, thread_id: str | None = None, run_id: str | None = None,
                 number: int | None = None) -> str:
        if self.path is None:
            raise UserError("this kernel does not know its notebook (no JPY_SESSION_NAME): "
                            "run %deerflow cells to put the code into a new cell, or copy it")
        if self.anchor is None:
            raise UserError("the frontend did not say which cell ran this: run %deerflow cells instead")
        thread_id = thread_id or self.session.thread_id
        op = {"op": "insert", "after": self.anchor, "cell_type": "code", "source": code}
        try:
            done = self.session.backend().notebook_edits(thread_id, "insert", run_id, path=self.path,
                                                         operations=[op], number=number)
        except UserError as exc:
            if f"unknown cell id {self.anchor!r}" in str(exc):
                raise UserError(f"the %%deerflow cell is not in the saved {self.path} yet: save the notebook "
                                "(Ctrl+S), then click again") from None
            raise
        files = f" ({done['files']})" if done.get("files") else ""
        return (f"inserted below the %%deerflow cell of {self.path} ({done.get('note', 'saved')}). If the open "
                "notebook does not show it, use File → Reload Notebook from Disk before saving. "
                f"%deerflow undo removes it.{files}")


def cells_command(session: Any, rest: str) -> list[str]:
    """``%deerflow cells [--run R] [--print]``: the last run's python cells into a new cell below (or printed)."""
    try:
        args = shlex.split(rest)
    except ValueError as exc:
        raise UserError(f"%deerflow cells: {exc}") from None
    printing, run_id = "--print" in args, None
    args = [a for a in args if a != "--print"]
    if args[:1] == ["--run"] and len(args) == 2:
        run_id = args[1]
    elif args:
        raise UserError("%deerflow cells: expected [--run RUN] [--print]")
    result = session.find_run(run_id)
    code = agent_code(result.events)
    if not code:
        raise UserError(f"run {short_id(result.run_id)} ran no python cells")
    if printing or not hasattr(session.shell, "set_next_input"):
        print(_one_cell(result.run_id, code))
        return code
    code, moved = _for_this_kernel(session, result, code)
    session.shell.set_next_input(_one_cell(result.run_id, code), replace=False)
    print(f"put the {len(code)} python cell(s) of run {short_id(result.run_id)} into a new cell below "
          "(--print prints them instead)" + (f"; {moved}" if moved else ""))
    return code


def _one_cell(run_id: str, code: list[str]) -> str:
    return "\n\n".join(f"# --- agent cell {i} of run {short_id(run_id)} ---\n{c.rstrip()}"
                         for i, c in enumerate(code, 1))


def _for_this_kernel(session: Any, result: Any, code: list[str]) -> tuple[list[str], str]:
    """The cells with their ``/mnt/user-data`` paths pointing beside the notebook (the files copied
    there by the host, as for "insert as a new cell below"); unchanged, with why, when that cannot be."""
    from deerflow_kernel.notebook import notebook_path

    if not any("/mnt/user-data" in c for c in code):
        return code, ""
    backend = session.backend()
    path = notebook_path(backend.kind)
    if path is None:
        return code, "its /mnt/user-data paths are the agent's (this kernel does not know its notebook)"
    try:
        done = backend.notebook_edits(result.thread_id, "localize", path=path, sources=code)
    except UserError as exc:
        return code, f"its /mnt/user-data paths are the agent's ({exc})"
    return list(done["sources"]), str(done.get("files") or "")
