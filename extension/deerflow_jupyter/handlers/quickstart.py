"""``GET /deerflow/api/quickstart``: the research quickstart, copied into the Jupyter root and opened.

The Launcher's **DeerFlow notebook** card (the ``deerflow-jupyterlab`` frontend extension,
``labextension/src/launcher.ts``) calls it with ``Accept: application/json`` and opens the
``path`` it answers; visited as a plain URL (documented in the README) it redirects to the
notebook in JupyterLab.  (A Help-menu link from the kernel would not work: JupyterLab opens
those in a sandboxed frame without the login cookie.)

The route copies ``deerflow-quickstart/`` (the notebook, its offline config and scripts)
through the server's ContentsManager, so it honours the root and its rules, never overwriting
a file that is there (the user's edits win).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from jupyter_core.utils import ensure_async
from jupyter_server.auth.decorator import authorized
from jupyter_server.utils import url_path_join
from tornado import web

from deerflow.resources import QUICKSTART, notebooks_dir
from deerflow_jupyter.handlers.base import DeerFlowHandler

FOLDER = "deerflow-quickstart"
PATH = "quickstart"


def template_files() -> list[tuple[str, bytes]]:
    """The quickstart's files (relative path, bytes): the notebook, the offline config, the scripts."""
    source = notebooks_dir()
    names = [QUICKSTART, "offline-config.yaml",
             *sorted(str(p.relative_to(source)) for p in (source / "scripts").glob("*.yaml"))]
    return [(name, (source / name).read_bytes()) for name in names]


class QuickstartHandler(DeerFlowHandler):
    @web.authenticated
    @authorized("write")
    async def get(self) -> None:
        cm = self.contents_manager
        files = await asyncio.to_thread(template_files)
        for folder in sorted({str(Path(FOLDER, name).parent) for name, _ in files}, key=len):
            if not await ensure_async(cm.dir_exists(folder)):
                await ensure_async(cm.save({"type": "directory"}, folder))
        for name, data in files:
            path = f"{FOLDER}/{name}"
            if await ensure_async(cm.file_exists(path)):
                continue  # the user's copy, perhaps edited: kept
            if name.endswith(".ipynb"):
                model = {"type": "notebook", "format": "json", "content": json.loads(data)}
            else:
                model = {"type": "file", "format": "text", "content": data.decode("utf-8")}
            await ensure_async(cm.save(model, path))
        notebook = f"{FOLDER}/{QUICKSTART}"
        if "application/json" in self.request.headers.get("Accept", ""):
            self.send_json({"path": notebook})  # the Launcher card opens it itself
            return
        self.redirect(url_path_join(self.base_url, "lab", "tree", notebook))


__all__ = ["FOLDER", "PATH", "QuickstartHandler", "template_files"]
