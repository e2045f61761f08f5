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

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from deerflow.threadfs.entries import EntryInfo, UnsafePath

if TYPE_CHECKING:
    from deerflow.threadfs.root import SafeDir

MAX_WALK_DEPTH = 256
"""The deepest level any walk enters (1 = the walked directory's own entries)."""


def walk_tree(root: SafeDir, base: str, *, max_depth: int, skip_dirs: frozenset[str],
              on_too_deep: Callable[[str], None] | None) -> Iterator[tuple[str, EntryInfo]]:
    """``(path, info)`` for every entry below ``base`` (already split and joined), pre-order, sorted.

    The order is the recursive walk's: a directory is yielded, then everything in it, then
    its next sibling.  A directory at the depth limit (``max_depth``, never more than
    :data:`MAX_WALK_DEPTH`) is yielded but not entered, and passed to ``on_too_deep``.
    """
    limit = min(max_depth, MAX_WALK_DEPTH)
    top = _listing(root, base)
    if top is None:
        return
    stack: list[tuple[str, int, Iterator[EntryInfo]]] = [(base, 1, iter(top))]
    while stack:
        parent, depth, entries = stack[-1]
        entry = next(entries, None)
        if entry is None:
            stack.pop()
            continue
        path = f"{parent}/{entry.name}" if parent else entry.name
        yield path, entry
        if entry.kind != "dir" or entry.name in skip_dirs:
            continue
        if depth >= limit:
            if on_too_deep is not None:
                on_too_deep(path)
            continue
        children = _listing(root, path)
        if children:
            stack.append((path, depth + 1, iter(children)))


def _listing(root: SafeDir, rel: str) -> list[EntryInfo] | None:
    """The sorted entries of ``rel``; ``None`` for a directory that is gone, swapped or unreadable."""
    try:
        return root.scandir(rel)
    except UnsafePath:
        return None
