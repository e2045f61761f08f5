"""The agent's cells made runnable in the user's kernel: its virtual paths become a folder there.

The agent's code names files by virtual path (``/mnt/user-data/outputs/a.csv``),
which exists only in its sandbox.  When the user inserts one of its cells, every
``/mnt/user-data/...`` in the source is rewritten to the same path under
``deerflow_files/<thread>/`` *relative to the notebook's folder* (a kernel's
working directory is its notebook's folder), and the files the code names are
copied there from the thread first:

* a named regular file is copied (links, FIFOs and other non-files are not: the
  thread's folders are the agent's, and read through :class:`VirtualFS`);
* a named folder is created and its regular files (one level, bounded) copied;
* a name that does not exist yet gets its folder, so code that writes it runs.

The copies land in the user's Jupyter root (the file browser shows them) through
the host's :class:`~deerflow.notebooks.access.NotebookAccess`; nothing is written
back into the thread, so running the cell cannot touch the agent's files.
Relative paths in the agent's code (its working directory was its workspace) are
not rewritten: they are ordinary paths in the user's kernel too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from deerflow.errors import ToolFailure
from deerflow.notebooks.offdisk import off_disk
from deerflow.runtime.events import short_id
from deerflow.sandbox.files.virtual_paths import USER_DATA
from deerflow.threadfs import UnsafePath

FOLDER = "deerflow_files"
MAX_FILE_BYTES = 50 * 1024 * 1024
MAX_TOTAL_BYTES = 200 * 1024 * 1024
MAX_FILES = 200
# A virtual path as it appears in code: /mnt/user-data, then path characters up to a quote,
# a space, a bracket or an operator.
_VIRTUAL = re.compile(r"(?<![\w./-])/mnt/user-data(?![\w.@+=,%~-])((?:/[\w.@+=,%~-]+)*)(/?)")


@dataclass
class HandedOver:
    """What :func:`localize` made of the agent's cells.

    Attributes:
        sources: The cells' sources, virtual paths rewritten.
        folder: The copies' folder, relative to the Jupyter root.
        local: The same folder as the rewritten code names it (relative to the notebook's folder).
        copied: Root-relative paths of the files copied.
        skipped: Virtual paths not copied, with why (a link, too large...).
    """

    sources: list[str]
    folder: str
    local: str
    copied: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def note(self) -> str:
        """One line for the user: where the agent's files went (empty when the code names none)."""
        if not self.copied and not self.skipped:
            return ""
        text = f"the agent's /mnt/user-data paths now point to {self.folder}/"
        if self.copied:
            text += f" ({len(self.copied)} file(s) copied there)"
        if self.skipped:
            text += f"; not copied: {', '.join(self.skipped[:5])}" + (" …" if len(self.skipped) > 5 else "")
        return text


def virtual_paths(source: str) -> list[str]:
    """The ``/mnt/user-data/...`` paths ``source`` names, in order, once each."""
    return list(dict.fromkeys(str(USER_DATA) + m.group(1) for m in _VIRTUAL.finditer(source)))


def local_folder(thread_id: str) -> str:
    """The folder, relative to the notebook's folder, that stands for ``/mnt/user-data``."""
    safe = re.sub(r"[^\w-]", "_", short_id(thread_id)) or "thread"
    return f"{FOLDER}/{safe}"


def rewrite(source: str, local: str) -> str:
    """``source`` with every ``/mnt/user-data`` path pointing to ``local`` instead."""
    return _VIRTUAL.sub(lambda m: local + m.group(1) + m.group(2), source)


async def localize(access: Any, vfs: Any, notebook: str, thread_id: str, sources: list[str]) -> HandedOver:
    """Rewrite ``sources`` for the user's kernel and copy the files they name beside ``notebook``.

    Args:
        access: The host's notebook access (``put_file``/``make_dirs`` under the Jupyter root).
        vfs: The thread's :class:`~deerflow.sandbox.files.virtual_paths.VirtualFS` (read side).
        notebook: The notebook's root-relative path (checked).
        thread_id: The thread the code came from.
        sources: The agent's cells.
    """
    local = local_folder(thread_id)
    base = "/".join([*PurePosixPath(notebook).parts[:-1], local])
    done = HandedOver([rewrite(s, local) for s in sources], base, local)
    wanted = list(dict.fromkeys(p for s in sources for p in virtual_paths(s)))
    plan = await off_disk(_plan_copies, vfs, wanted, done, what="looking up the agent's files")
    for rel in plan.dirs:
        await access.make_dirs(f"{base}/{rel}" if rel else base)
    for virtual, rel in plan.files:
        data = await off_disk(_read, vfs, virtual, what=f"reading the agent's file {virtual!r}", large=True)
        if data is None:
            done.skipped.append(f"{virtual} (changed while copying)")
            continue
        await access.put_file(f"{base}/{rel}", data)
        done.copied.append(f"{base}/{rel}")
    return done


@dataclass
class _Plan:
    dirs: list[str] = field(default_factory=list)  # relative to the copies' folder
    files: list[tuple[str, str]] = field(default_factory=list)  # (virtual, relative)


def _rel(virtual: str) -> str:
    """``/mnt/user-data/outputs/a.csv`` -> ``outputs/a.csv`` (``/mnt/user-data`` -> ``""``)."""
    rel = str(PurePosixPath(virtual).relative_to(USER_DATA))
    return "" if rel == "." else rel


def _parent(rel: str) -> str:
    parent = str(PurePosixPath(rel).parent)
    return "" if parent == "." else parent


def _hidden(rel: str) -> bool:
    return any(part.startswith(".") for part in PurePosixPath(rel).parts)


def _plan_copies(vfs: Any, wanted: list[str], done: HandedOver) -> _Plan:
    """Which folders to make and files to copy (off the event loop: it stats the thread's files)."""
    plan, total, copied = _Plan(), 0, set()
    for virtual in wanted:
        rel = _rel(virtual)
        if _hidden(rel) or ".." in PurePosixPath(rel).parts:
            done.skipped.append(f"{virtual} (hidden or '..')")
            continue
        try:
            kind = vfs.kind(virtual) if rel else "dir"
            entries = [(f"{virtual}/{n}", f"{rel}/{n}") for n in _files_in(vfs, virtual, done)] \
                if kind == "dir" and rel else [(virtual, rel)] if kind == "file" else []
        except (ToolFailure, UnsafePath, OSError) as exc:
            done.skipped.append(f"{virtual} ({getattr(exc, 'code', type(exc).__name__)})")
            continue
        if kind not in ("dir", "file", None):
            done.skipped.append(f"{virtual} (a {kind}, not a regular file)")
            continue
        plan.dirs.append(rel if kind == "dir" else _parent(rel))  # a name not there yet: the cell may write it
        for source, target in entries:
            if target in copied:
                continue
            size = vfs.size(source)
            if size is None or size > MAX_FILE_BYTES or total + size > MAX_TOTAL_BYTES or len(plan.files) >= MAX_FILES:
                done.skipped.append(f"{source} (too large, or too many files)")
                continue
            total += size
            copied.add(target)
            plan.files.append((source, target))
            plan.dirs.append(_parent(target))
    plan.dirs = list(dict.fromkeys(plan.dirs))
    return plan


def _files_in(vfs: Any, virtual: str, done: HandedOver) -> list[str]:
    """The regular, visible files directly in a thread folder (sorted); links and the like are noted."""
    rp = vfs.locate(virtual, write=False)
    with vfs.open_mount(rp.mount) as root:
        entries = sorted(root.scandir(rp.rel), key=lambda e: e.name)
    for e in entries:
        if e.kind not in ("file", "dir") and not e.name.startswith("."):
            done.skipped.append(f"{virtual}/{e.name} (a {e.kind}, not a regular file)")
    return [e.name for e in entries if e.kind == "file" and not e.name.startswith(".")]


def _read(vfs: Any, virtual: str) -> bytes | None:
    try:
        return vfs.read_bytes(virtual, max_bytes=MAX_FILE_BYTES)[1]
    except ToolFailure:
        return None
