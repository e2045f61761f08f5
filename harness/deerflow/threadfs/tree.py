"""The walk behind :meth:`SafeDir.walk <deerflow.threadfs.root.SafeDir.walk>`: iterative and depth-capped.

The agent's own code shapes the tree (``mkdir -p a/a/a/...`` 1500 levels deep is one
command), so the walk must not let the tree's depth become the host's: it keeps an
explicit stack instead of recursing (a recursive generator raised ``RecursionError``
past ~1000 levels, which escaped every caller that catches only ``UnsafePath``), and it
never enters more than :data:`MAX_WALK_DEPTH` levels.  No descriptor is held across
levels: each directory is listed by re-opening its relative path beneath the root
(:meth:`SafeDir.scandir`), so the stack holds names, never open files.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from deerflow.threadfs.entries import EntryInfo, UnsafePath

if TYPE_CHECKING:
    from deerflow.threadfs.root import SafeDir

MAX_WALK_DEPTH = 256
"""The deepest level any walk enters (1 = the walked directory's own entries)."""


def walk_tree(root: SafeDir, base: str, *, max_depth: int, skip_dirs: frozenset[str],
              on_too_deep: Callable[[str], None] | None,
              max_entries: int | None = None) -> Iterator[tuple[str, EntryInfo]]:
    """``(path, info)`` for every entry below ``base`` (already split and joined), pre-order, sorted.

    The order is the recursive walk's: a directory is yielded, then everything in it, then
    its next sibling.  A directory at the depth limit (``max_depth``, never more than
    :data:`MAX_WALK_DEPTH`) is yielded but not entered, and passed to ``on_too_deep``.
    With ``max_entries``, no listing reads more entries than are left to yield, and the walk
    ends once that many were yielded.
    """
    limit = min(max_depth, MAX_WALK_DEPTH)
    left = max_entries  # None: unbounded
    top = _listing(root, base, left)
    if top is None:
        return
    stack: list[tuple[str, int, Iterator[EntryInfo]]] = [(base, 1, iter(top))]
    while stack and (left is None or left > 0):
        parent, depth, entries = stack[-1]
        entry = next(entries, None)
        if entry is None:
            stack.pop()
            continue
        left = None if left is None else left - 1
        path = f"{parent}/{entry.name}" if parent else entry.name
        yield path, entry
        if entry.kind != "dir" or entry.name in skip_dirs:
            continue
        if depth >= limit:
            if on_too_deep is not None:
                on_too_deep(path)
            continue
        children = _listing(root, path, left)
        if children:
            stack.append((path, depth + 1, iter(children)))


def _listing(root: SafeDir, rel: str, limit: int | None) -> list[EntryInfo] | None:
    """The sorted entries of ``rel`` (at most ``limit``); ``None`` for a directory that is gone,
    swapped or unreadable."""
    try:
        return root.scandir(rel, limit=limit)
    except UnsafePath:
        return None


def remove_tree(path: Path) -> None:
    """Delete the folder ``path`` and everything in it, best effort, whatever its depth.

    What is inside is the agent's: links are removed, never followed, and the tree's depth is
    not the host's (see :func:`remove_entry`).  A link or file where ``path`` should be is
    unlinked.  Errors (an entry the sandbox changed meanwhile) are skipped, as
    ``ignore_errors=True`` would.
    """
    try:
        parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            remove_entry(parent, path.name)
    finally:
        os.close(parent)


def remove_entry(parent: int, name: str) -> None:
    """Remove ``name`` in the directory open at ``parent``: a file or link unlinked (never
    followed), a folder emptied and removed, iteratively.

    ``shutil.rmtree`` and a recursive walk recurse (``RecursionError`` past ~1000 levels, which
    ``ignore_errors`` does not cover); here every folder met is first moved up into the folder
    being removed under a random name, so no folder is ever more than one level down and one
    descriptor per level is never needed.  Entries that vanish or resist on the way are skipped.

    Raises:
        OSError: the folder itself could not be removed at the end (``ENOTEMPTY``: something
            could not be removed, or was added meanwhile); a missing ``name`` is no error.
    """
    try:
        top = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                      dir_fd=parent)
    except FileNotFoundError:
        return
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        with contextlib.suppress(FileNotFoundError):  # a link or a file where the folder was
            os.unlink(name, dir_fd=parent)
        return
    try:
        _empty_flattening(top)
    finally:
        os.close(top)
    with contextlib.suppress(FileNotFoundError):
        os.rmdir(name, dir_fd=parent)


def _empty_flattening(top: int) -> None:
    """Empty the folder open at ``top``: files unlinked, folders moved up into it, then emptied."""
    pending: list[str | None] = [None]  # None: ``top`` itself; a name: a folder directly in ``top``
    while pending:
        name = pending.pop()
        try:
            fd = top if name is None else os.open(
                name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=top)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(name or "", dir_fd=top)  # a link swapped in for the folder
            continue
        try:
            with os.scandir(fd) as entries:
                found = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries]
            for entry, is_dir in found:
                with contextlib.suppress(OSError):
                    if not is_dir:
                        os.unlink(entry, dir_fd=fd)
                    elif name is None:
                        pending.append(entry)
                    else:
                        moved = f".removing-{secrets.token_hex(8)}"
                        os.rename(entry, moved, src_dir_fd=fd, dst_dir_fd=top)
                        pending.append(moved)
        finally:
            if fd != top:
                os.close(fd)
        if name is not None:
            with contextlib.suppress(OSError):
                os.rmdir(name, dir_fd=top)
