"""``POST /deerflow/api/quickstart``: the research quickstart, copied into the Jupyter root and opened.

The Launcher's **DeerFlow notebook** card (the ``deerflow-jupyterlab`` frontend extension,
``labextension/src/launcher.ts``) POSTs with ``Accept: application/json`` and opens the
``path`` it answers; any other POST (the button below) is redirected to the notebook in
JupyterLab.  A ``GET`` changes nothing: visited as a plain URL (documented in the README) it
answers a one-button page whose form POSTs here.  (A Help-menu link from the kernel would not
work: JupyterLab opens those in a sandboxed frame without the login cookie.)

The route copies ``deerflow-quickstart/`` (the notebook, its offline config and scripts)
into the root through :class:`~deerflow.threadfs.SafeDir`: thread folders may lie under the
root, so a folder or file on the way may be a link planted by sandboxed code.  No link is
followed, every file is created exclusively (a name that is there, a link included, is
kept: the user's edits win), and a link or a file in place of a folder is a 409.
"""

from __future__ import annotations

import html
from pathlib import Path, PurePosixPath

from jupyter_server.auth.decorator import authorized
from jupyter_server.utils import url_path_join
from tornado import web

from deerflow.persistence.offloop import off_loop
from deerflow.resources import QUICKSTART, notebooks_dir
from deerflow.threadfs import SafeDir, UnsafePath
from deerflow_jupyter.handlers.base import DeerFlowHandler

FOLDER = "deerflow-quickstart"
PATH = "quickstart"

_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>DeerFlow quickstart</title></head>
<body><form method="post" action="{action}">
<input type="hidden" name="_xsrf" value="{xsrf}">
<p>Copy the DeerFlow research quickstart into <code>{folder}/</code> under your Jupyter root
(a copy you already have is kept) and open it.</p>
<button type="submit">Open the quickstart</button>
</form></body></html>
"""


def template_files() -> list[tuple[str, bytes]]:
    """The quickstart's files (relative path, bytes): the notebook, the offline config, the scripts."""
    source = notebooks_dir()
    names = [QUICKSTART, "offline-config.yaml",
             *sorted(str(p.relative_to(source)) for p in (source / "scripts").glob("*.yaml"))]
    return [(name, (source / name).read_bytes()) for name in names]


def copy_quickstart(root: Path) -> str:
    """Copy the quickstart into ``root/deerflow-quickstart`` (files that are there are kept).

    Returns:
        The notebook's path relative to ``root``.

    Raises:
        UnsafePath: a folder on the way is a link or not a directory (nothing written through it).
    """
    with SafeDir.open(root, label="the Jupyter root") as base:
        for name, data in template_files():
            rel = f"{FOLDER}/{name}"
            base.makedirs(str(PurePosixPath(rel).parent))
            try:
                base.create_exclusive(rel, data)
            except UnsafePath as exc:
                if exc.code != "exists":  # the user's copy (or whatever holds the name): kept
                    raise
    return f"{FOLDER}/{QUICKSTART}"


class QuickstartHandler(DeerFlowHandler):
    @web.authenticated
    @authorized("read")
    async def get(self) -> None:
        """A page with one button that POSTs here: a GET never copies anything."""
        action = url_path_join(self.base_url, "deerflow", "api", PATH)
        page = _PAGE.format(action=html.escape(action), xsrf=html.escape(self.xsrf_token.decode()), folder=FOLDER)
        self.finish(page, set_content_type="text/html; charset=utf-8")

    @web.authenticated
    @authorized("write")
    async def post(self) -> None:
        root = Path(self.settings.get("server_root_dir") or self.contents_manager.root_dir)
        try:
            notebook = await off_loop(copy_quickstart, root, what="copying the quickstart")
        except UnsafePath as exc:
            raise web.HTTPError(409, "%s", f"the quickstart was not copied: {exc}") from None
        if "application/json" in self.request.headers.get("Accept", ""):
            self.send_json({"path": notebook})  # the Launcher card opens it itself
            return
        self.set_status(303)  # not self.redirect: an API handler's finish would label the empty body JSON
        self.set_header("Location", url_path_join(self.base_url, "lab", "tree", notebook))
        self.finish(set_content_type="text/plain; charset=utf-8")


__all__ = ["FOLDER", "PATH", "QuickstartHandler", "copy_quickstart", "template_files"]
