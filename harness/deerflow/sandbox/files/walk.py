"""Walking a thread's virtual tree (mixed into :class:`~deerflow.sandbox.files.virtual_paths.VirtualFS`).

``ls``, ``glob`` and ``grep`` see the mounts through :meth:`VirtualWalk.walk`:
entries sorted, depth first, each with its virtual path, its path below the walked one and what
``lstat`` said.  Traversal goes through :meth:`SafeDir.walk`, so links are listed but never
followed, and ``NOISE_DIRS`` are never descended into.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from deerflow.errors import ToolFailure
from deerflow.sandbox.files.failures import tool_failure
from deerflow.threadfs import EntryInfo, SafeDir, UnsafePath

if TYPE_CHECKING:
    from deerflow.sandbox.files.virtual_paths import Mount, ResolvedPath

NOISE_DIRS = frozenset({".git", "__pycache__", ".ipynb_checkpoints", "node_modules", ".venv"})


@dataclass(frozen=True)
class WalkEntry:
    """One entry met by :meth:`VirtualFS.walk`.

    Attributes:
        host: Host path of the entry itself (a link is not resolved).
        virtual: Its virtual path.
        rel: Its path below the walked path, ``/``-separated (what globs match).
        depth: 1 for direct children of the walked path.
        is_dir: A directory (never a link).
        is_link: A symbolic link (listed, never followed by the host).
        escapes: A link: host-side readers skip it (the same as ``is_link``,
            kept for callers that count skipped links).
        mount: The mount it lies in.
        mount_rel: Its path below the mount's root.
        info: What ``lstat`` said of it.
    """

    host: Path
    virtual: str
    rel: str
    depth: int
    is_dir: bool
    is_link: bool = False
    escapes: bool = False
    mount: Mount | None = None
    mount_rel: str = ""
    info: EntryInfo | None = None


@dataclass(frozen=True)
class _Root:
    host: Path
    virtual: PurePosixPath
    rel: PurePosixPath
    mount: Mount
    mount_rel: str


class VirtualWalk:
    """The walk of :class:`~deerflow.sandbox.files.virtual_paths.VirtualFS` (which resolves the paths)."""

    if TYPE_CHECKING:  # the VirtualFS's own, used here
        def locate(self, path: str, *, write: bool) -> ResolvedPath: ...
        def mounts_under(self, virtual_path: str) -> list[Mount]: ...

    def walk(self, path: str, *, max_depth: int | None = None,
             on_too_deep: Callable[[int], None] | None = None) -> tuple[str, Iterator[WalkEntry]]:
        """The shown path and the entries below it, sorted, depth first.

        Traversal goes through :meth:`SafeDir.walk`: links are reported but
        never followed (no loops, no way out), and ``NOISE_DIRS`` are not
        descended into.  A virtual ancestor (``/mnt/user-data``) walks every
        mount below it.  Path errors are raised at once, not on first iteration.
        No walk goes deeper than :data:`~deerflow.threadfs.MAX_WALK_DEPTH` levels below a
        mount's walked folder (the agent decides how deep its folders go): each folder met
        there is listed but not entered, and its depth (as ``WalkEntry.depth``) is passed to
        ``on_too_deep``, so a caller can say its listing is incomplete.

        Raises:
            ToolFailure: as :meth:`locate`, or ``not_found``.
        """
        mounts = self.mounts_under(path)
        if mounts:
            base = PurePosixPath(path.strip())
            roots = [_Root(m.host, m.virtual, m.virtual.relative_to(base), m, "") for m in mounts]
            shown = str(base)
        else:
            rp = self.locate(path, write=False)
            kind = self._kind_or_none(rp)
            if kind == "symlink":
                raise tool_failure(UnsafePath("symlink", rp.virtual, ""), shown=rp.virtual)
            if kind is None and rp.rel:  # an empty or missing mount root: fine
                raise ToolFailure(
                    f"{rp.virtual} does not exist. Use ls or glob to find the right path.",
                    code="not_found",
                )
            roots = [_Root(rp.host, PurePosixPath(rp.virtual), PurePosixPath(), rp.mount, rp.rel)]
            shown = rp.virtual
        return shown, self._walk_roots(roots, max_depth or 1 << 30, on_too_deep)

    def _kind_or_none(self, rp: ResolvedPath) -> str | None:
        try:
            with SafeDir.open(rp.mount.host) as root:
                return root.kind(rp.rel)
        except UnsafePath as exc:
            if exc.code in ("not_found", "not_dir"):
                return None
            raise tool_failure(exc, shown=rp.virtual) from None

    def _walk_roots(self, roots: list[_Root], max_depth: int,
                    on_too_deep: Callable[[int], None] | None) -> Iterator[WalkEntry]:
        for root in roots:
            try:
                top = SafeDir.open(root.mount.host)
            except UnsafePath:
                continue  # a mount whose directory does not exist yet: nothing to list
            with top:
                try:
                    kind = top.kind(root.mount_rel)
                except UnsafePath:
                    continue
                if kind == "file":
                    info = _info(top, root.mount_rel)
                    yield WalkEntry(root.host, str(root.virtual), root.virtual.name, 1, False,
                                    mount=root.mount, mount_rel=root.mount_rel, info=info)
                    continue
                depth = 1
                if root.rel.parts:  # a mount met below an ancestor: the mount itself first
                    yield WalkEntry(root.host, str(root.virtual), str(root.rel), 1, True,
                                    mount=root.mount, mount_rel="")
                    depth = 2
                if kind not in ("dir", None) or depth > max_depth:
                    continue
                if kind is None and root.mount_rel:
                    continue
                yield from self._walk_dir(top, root, depth, max_depth, on_too_deep)

    def _walk_dir(self, top: SafeDir, root: _Root, depth: int, max_depth: int,
                  on_too_deep: Callable[[int], None] | None) -> Iterator[WalkEntry]:
        base = root.mount_rel
        prefix = f"{base}/" if base else ""

        def too_deep(rel_below: str) -> None:
            levels = len(PurePosixPath(rel_below[len(prefix):]).parts)
            if on_too_deep is not None and depth + levels - 1 < max_depth:  # not the caller's own limit
                on_too_deep(depth + levels - 1)

        for rel_below, info in top.walk(base, max_depth=max_depth - depth + 1, skip_dirs=NOISE_DIRS,
                                        on_too_deep=too_deep):
            parts = PurePosixPath(rel_below[len(prefix):]).parts
            vpath = root.virtual.joinpath(*parts)
            rpath = root.rel.joinpath(*parts)
            link = info.kind == "symlink"
            yield WalkEntry(
                root.mount.host.joinpath(*PurePosixPath(rel_below).parts), str(vpath), str(rpath),
                depth + len(parts) - 1, info.kind == "dir", link, link,
                mount=root.mount, mount_rel=rel_below, info=info,
            )


def _info(top: SafeDir, rel: str) -> EntryInfo | None:
    st = top.lstat(rel)
    if st is None:
        return None
    return EntryInfo(PurePosixPath(rel).name, "file", st.st_size, st.st_mtime_ns, st.st_nlink)
