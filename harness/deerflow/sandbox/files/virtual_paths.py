"""Virtual paths: the one place where the agent's view of files meets the host.

The agent never sees host directories.  It sees a fixed set of virtual mounts
(a contract shared with every sandbox provider):

==========================  ==========================  ==========
virtual path                host directory              access
==========================  ==========================  ==========
/mnt/user-data/uploads      ThreadPaths.uploads         read-only
/mnt/user-data/workspace    ThreadPaths.workspace       read-write
/mnt/user-data/outputs      ThreadPaths.outputs         read-write
/mnt/skills                 ``skills_root`` (optional)  read-only
/mnt/acp-workspace          ThreadPaths.acp_workspace   read-only
==========================  ==========================  ==========

Uploads are read-only to the file tools: they are the user's inputs, the run's
change summary excludes them, and an agent that "fixes" an input in place
destroys the evidence of what it was given.  The agent copies what it needs
into the workspace.

Decisions, in one place:

* **Relative paths** are taken relative to ``/mnt/user-data/workspace``.  The
  ``python`` tool's working directory is the workspace, so ``data.csv`` names
  the same file to every tool.
* **``..`` is refused** anywhere in a path, even where it would stay inside a
  mount: a path that needs ``..`` is almost always a probe, and refusing is
  simpler to reason about than normalising.
* **Containment is component-wise** (``/mnt/user-data/workspace2`` is not under
  ``/mnt/user-data/workspace``) and **structural**: a path is its mount plus a
  relative path without ``..``, and every host-side read or write goes through
  :class:`~deerflow.threadfs.SafeDir`, which never follows a symbolic link
  (``openat2`` with ``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS``).  Links that the
  agent's own code made keep working inside the sandbox; host-side tools refuse
  to go through them, so no link, and no directory swapped for one while a
  tool runs, can send a host-side read or write out of the thread.
* **Host paths** that lie inside a mount are accepted and mapped (a traceback or
  ``os.getcwd()`` may show them to the model); anything else is refused.
* **Masking** rewrites every host root this thread knows about (mount roots,
  their real paths, the thread directory and ``$DEERFLOW_HOME``) in text going
  back to the model.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from deerflow.config.paths import ThreadPaths
from deerflow.errors import ToolFailure
from deerflow.threadfs import EntryInfo, SafeDir, UnsafePath

USER_DATA = PurePosixPath("/mnt/user-data")
UPLOADS = USER_DATA / "uploads"
WORKSPACE = USER_DATA / "workspace"
OUTPUTS = USER_DATA / "outputs"
SKILLS = PurePosixPath("/mnt/skills")
ACP_WORKSPACE = PurePosixPath("/mnt/acp-workspace")

NOISE_DIRS = frozenset({".git", "__pycache__", ".ipynb_checkpoints", "node_modules", ".venv"})
_THREAD_PLACEHOLDER = "<thread-dir>"
_HOME_PLACEHOLDER = "<deerflow-home>"


@dataclass(frozen=True)
class Mount:
    """One virtual directory backed by one host directory.

    Attributes:
        virtual: Where the agent sees it.
        host: The host directory as configured.
        writable: Whether file tools may change anything below it.
        purpose: A few words for error messages and tool descriptions.
    """

    virtual: PurePosixPath
    host: Path
    writable: bool
    purpose: str

    @property
    def real_host(self) -> Path:
        """The host directory with symlinks resolved, what containment compares against."""
        return Path(os.path.realpath(self.host))


@dataclass(frozen=True)
class ResolvedPath:
    """A virtual path checked against the mounts.

    Attributes:
        virtual: The normalised virtual path, as the agent should see it.
        host: Where it would be on the host (not resolved, NOT safe to open:
            use :meth:`VirtualFS.open_mount` and :attr:`rel`).
        mount: The mount it lies in.
        canonical: The virtual path: one name per file (a host path given by
            the model maps to it, and links are never followed, so per-file
            bookkeeping such as read marks cannot be dodged by aliasing).
        rel: The path below the mount's root (``""`` for the root itself).
    """

    virtual: str
    host: Path
    mount: Mount
    canonical: str
    rel: str = ""


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


class VirtualFS:
    """Translation and containment for one thread's file tools.

    Args:
        paths: The thread's host directories.
        skills_root: Host directory shown read-only at ``/mnt/skills``;
            ``None`` leaves ``/mnt/skills`` unmounted.
        home: ``$DEERFLOW_HOME``, masked in output.  Inferred from the thread
            layout (``{home}/users/{user}/threads/{thread}``) when omitted.
    """

    def __init__(
        self,
        paths: ThreadPaths,
        *,
        skills_root: str | Path | None = None,
        home: Path | None = None,
    ) -> None:
        self.paths = paths
        mounts = [
            Mount(UPLOADS, paths.uploads, False, "the user's uploaded inputs"),
            Mount(WORKSPACE, paths.workspace, True, "scratch space for intermediate work"),
            Mount(OUTPUTS, paths.outputs, True, "final deliverables for the user"),
            Mount(ACP_WORKSPACE, paths.acp_workspace, False, "files from external ACP agents"),
        ]
        if skills_root is not None:
            mounts.append(Mount(SKILLS, Path(skills_root), False, "skill instructions"))
        self.mounts: tuple[Mount, ...] = tuple(mounts)
        self.home = home if home is not None else _infer_home(paths.root)
        self._mask_re, self._mask_map = _build_masker(self)

    @property
    def state_dir(self) -> Path:
        """Host directory for sandbox bookkeeping (see :func:`state_dir`)."""
        return state_dir(self.paths)

    def mount_summary(self) -> str:
        """One line per mount, for tool descriptions and error messages."""
        return "\n".join(
            f"{m.virtual} ({'read-write' if m.writable else 'read-only'}): {m.purpose}"
            for m in self.mounts
        )

    # -- translation --------------------------------------------------------

    def locate(self, path: str, *, write: bool) -> ResolvedPath:
        """Check ``path`` and return where it lives on the host.

        Raises:
            ToolFailure: ``bad_path``, ``path_outside_mounts``,
                ``symlink_escape`` or ``read_only``.  Messages name only
                virtual paths.
        """
        virtual, mount = self._match(self._normalise(path), shown=path)
        rest = virtual.relative_to(mount.virtual)
        if write and not mount.writable:
            raise ToolFailure(
                f"{mount.virtual} is read-only ({mount.purpose}). Write to {WORKSPACE} "
                f"for intermediate files or {OUTPUTS} for deliverables instead.",
                code="read_only",
            )
        host = mount.host.joinpath(*rest.parts)
        return ResolvedPath(str(virtual), host, mount, str(virtual), "/".join(rest.parts))

    def open_mount(self, mount: Mount, *, create: bool = False) -> SafeDir:
        """The mount's root as a :class:`SafeDir`: the only way to its files.

        Raises:
            ToolFailure: ``not_found`` when the mount's directory is missing.
        """
        try:
            return SafeDir.open(mount.host, label=str(mount.virtual), create=create)
        except UnsafePath as exc:
            raise tool_failure(exc) from None

    def read_bytes(self, path: str, *, max_bytes: int | None = None) -> tuple[ResolvedPath, bytes]:
        """Locate ``path`` and read the regular file there (no link followed).

        Raises:
            ToolFailure: as :meth:`locate`, or ``not_found``, ``is_directory``,
                ``symlink_escape``, ``not_regular``, ``too_large``.
        """
        rp = self.locate(path, write=False)
        try:
            with self.open_mount(rp.mount) as root:
                return rp, root.read_bytes(rp.rel, max_bytes=max_bytes)
        except UnsafePath as exc:
            raise tool_failure(exc, shown=rp.virtual) from None

    def read_output(self, path: str, *, max_bytes: int | None = None) -> tuple[ResolvedPath, bytes]:
        """A deliverable's bytes: a regular file under ``/mnt/user-data/outputs``
        (a bare name is taken relative to it).  What the HTTP routes, the chat and
        the client serve to users.

        Raises:
            ToolFailure: ``not_found`` for anything else (outside outputs, a
                directory, a link, a FIFO), with the reason.
        """
        rp = self._output(path)
        try:
            return self.read_bytes(rp.virtual, max_bytes=max_bytes)
        except ToolFailure as exc:  # too_large stays itself: a file that is there, too big to read whole
            raise ToolFailure(f"{rp.virtual} is not an output file of this thread ({exc.message})",
                              code="too_large" if exc.code == "too_large" else "not_found") from None

    def open_output(self, path: str) -> tuple[ResolvedPath, int]:
        """A read-only descriptor of a deliverable (as :meth:`read_output` finds it, no link
        followed), for a caller that streams it instead of reading it whole; the caller closes it.

        Raises:
            ToolFailure: ``not_found``, as :meth:`read_output`.
        """
        rp = self._output(path)
        try:
            with self.open_mount(rp.mount) as root:
                return rp, root.open_file(rp.rel)
        except UnsafePath as exc:
            raise ToolFailure(f"{rp.virtual} is not an output file of this thread "
                              f"({tool_failure(exc, shown=rp.virtual).message})", code="not_found") from None

    def _output(self, path: str) -> ResolvedPath:
        """``path`` (a bare name is taken relative to outputs) located, if it is under outputs."""
        rp = self.locate(path if path.startswith("/") else f"{OUTPUTS}/{path}", write=False)
        if str(rp.mount.virtual) != str(OUTPUTS):
            raise ToolFailure(f"{rp.virtual} is not an output file of this thread", code="not_found")
        return rp

    def size(self, path: str) -> int | None:
        """The size of the regular file at ``path``; ``None`` for anything else or nothing."""
        rp = self.locate(path, write=False)
        try:
            with self.open_mount(rp.mount) as root:
                st = root.lstat(rp.rel)
        except (UnsafePath, ToolFailure):
            return None
        return st.st_size if st is not None and stat.S_ISREG(st.st_mode) else None

    def write_bytes(self, path: str, data: bytes) -> ResolvedPath:
        """Atomically replace (or create) the file at ``path`` in a writable mount."""
        rp = self.locate(path, write=True)
        try:
            with self.open_mount(rp.mount, create=True) as root:
                root.write_bytes(rp.rel, data)
        except UnsafePath as exc:
            raise tool_failure(exc, shown=rp.virtual) from None
        return rp

    def kind(self, path: str) -> str | None:
        """``file``, ``dir``, ``symlink``, ``other`` or ``None`` (absent), links unfollowed."""
        rp = self.locate(path, write=False)
        try:
            with self.open_mount(rp.mount) as root:
                return root.kind(rp.rel)
        except UnsafePath as exc:
            if exc.code in ("not_found", "not_dir"):
                return None
            raise tool_failure(exc, shown=rp.virtual) from None

    def to_virtual(self, host_path: Path | str) -> str:
        """The virtual path of a host path inside a mount (symlinks not followed).

        Raises:
            ToolFailure: ``path_outside_mounts`` when no mount holds it.
        """
        host = Path(os.path.abspath(host_path))
        for mount in self._by_host_depth():
            for root in (mount.host, mount.real_host):
                if _is_within(host, Path(os.path.abspath(root))):
                    rel = host.relative_to(os.path.abspath(root))
                    return str(mount.virtual.joinpath(*rel.parts))
        raise ToolFailure(
            "That host path is outside the sandbox mounts.", code="path_outside_mounts"
        )

    def mounts_under(self, virtual_path: str) -> list[Mount]:
        """Mounts strictly below a virtual ancestor such as ``/mnt/user-data``.

        Lets ``ls``, ``glob`` and ``grep`` treat ``/mnt`` and ``/mnt/user-data``
        as directories holding the mounts.  Empty for any other path.
        """
        try:
            virtual = self._normalise(virtual_path)
        except ToolFailure:
            return []
        return [m for m in self.mounts if virtual in m.virtual.parents]

    def walk(self, path: str, *, max_depth: int | None = None) -> tuple[str, Iterator[WalkEntry]]:
        """The shown path and the entries below it, sorted, depth first.

        Traversal goes through :meth:`SafeDir.walk`: links are reported but
        never followed (no loops, no way out), and ``NOISE_DIRS`` are not
        descended into.  A virtual ancestor (``/mnt/user-data``) walks every
        mount below it.  Path errors are raised at once, not on first iteration.

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
        return shown, self._walk_roots(roots, max_depth or 1 << 30)

    def _kind_or_none(self, rp: ResolvedPath) -> str | None:
        try:
            with SafeDir.open(rp.mount.host) as root:
                return root.kind(rp.rel)
        except UnsafePath as exc:
            if exc.code in ("not_found", "not_dir"):
                return None
            raise tool_failure(exc, shown=rp.virtual) from None

    def mask(self, text: str) -> str:
        """Replace every known host root in ``text`` with its virtual name."""
        if not text:
            return text
        return self._mask_re.sub(lambda m: self._mask_map[m.group(0)], text)

    # -- internals ------------------------------------------------------------

    def _normalise(self, path: str) -> PurePosixPath:
        if not isinstance(path, str) or not path.strip():
            raise ToolFailure(
                f"The path is empty; give a path such as {WORKSPACE}/notes.md.", code="bad_path"
            )
        if "\x00" in path:
            raise ToolFailure("The path contains a NUL character.", code="bad_path")
        raw = PurePosixPath(path.strip())
        if ".." in raw.parts:
            raise ToolFailure(
                f"'..' is not allowed in paths ({self.mask(path)!r}); use an absolute path "
                f"under {USER_DATA}.",
                code="bad_path",
            )
        return raw if raw.is_absolute() else WORKSPACE / raw

    def _match(self, virtual: PurePosixPath, *, shown: str) -> tuple[PurePosixPath, Mount]:
        """The virtual path (a host path mapped to its virtual one) and its mount."""
        mapped = virtual
        if not any(virtual == m.virtual or m.virtual in virtual.parents for m in self.mounts):
            mapped = self._host_to_virtual(virtual) or virtual
        for mount in self.mounts:
            if mapped == mount.virtual or mount.virtual in mapped.parents:
                return mapped, mount
        unmounted_skills = virtual == SKILLS or SKILLS in virtual.parents
        hint = " /mnt/skills is not mounted in this session." if unmounted_skills else ""
        raise ToolFailure(
            f"{self.mask(shown)!r} is outside the sandbox.{hint} Accessible paths:\n"
            f"{self.mount_summary()}",
            code="path_outside_mounts",
        )

    def _host_to_virtual(self, path: PurePosixPath) -> PurePosixPath | None:
        host = Path(str(path))
        for mount in self._by_host_depth():
            for root in (Path(os.path.abspath(mount.host)), mount.real_host):
                if _is_within(host, root):
                    return mount.virtual.joinpath(*host.relative_to(root).parts)
        return None

    def _walk_roots(self, roots: list[_Root], max_depth: int) -> Iterator[WalkEntry]:
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
                yield from self._walk_dir(top, root, depth, max_depth)

    def _walk_dir(self, top: SafeDir, root: _Root, depth: int, max_depth: int) -> Iterator[WalkEntry]:
        base = root.mount_rel
        prefix = f"{base}/" if base else ""
        for rel_below, info in top.walk(base, max_depth=max_depth - depth + 1, skip_dirs=NOISE_DIRS):
            parts = PurePosixPath(rel_below[len(prefix):]).parts
            vpath = root.virtual.joinpath(*parts)
            rpath = root.rel.joinpath(*parts)
            link = info.kind == "symlink"
            yield WalkEntry(
                root.mount.host.joinpath(*PurePosixPath(rel_below).parts), str(vpath), str(rpath),
                depth + len(parts) - 1, info.kind == "dir", link, link,
                mount=root.mount, mount_rel=rel_below, info=info,
            )

    def _by_host_depth(self) -> list[Mount]:
        # Deepest host roots first, should one mount's host dir nest in another's.
        return sorted(self.mounts, key=lambda m: len(m.host.parts), reverse=True)


_FAILURE_CODES = {
    "not_found": "not_found",
    "not_dir": "not_found",
    "symlink": "symlink_escape",
    "is_dir": "is_directory",
    "not_regular": "not_regular",
    "hard_link": "not_regular",
    "too_large": "too_large",
    "bad_path": "bad_path",
    "exists": "exists",
}


def tool_failure(exc: UnsafePath, *, shown: str | None = None) -> ToolFailure:
    """The model-facing form of a :class:`~deerflow.threadfs.UnsafePath`."""
    where = shown or exc.rel or "that path"
    messages = {
        "not_found": f"{where} does not exist. Use ls or glob to find the right path.",
        "symlink": f"{where} goes through a symbolic link. Host-side tools never follow links; "
                   "use the real path, or read it with the python or bash tool.",
        "is_dir": f"{where} is a directory; use ls to see what it holds.",
        "not_regular": f"{where} is not a regular file (a FIFO, socket or device); refused.",
        "hard_link": f"{where} has more than one hard link; host-side tools refuse such files. "
                     "Copy it to a new file first.",
    }
    return ToolFailure(messages.get(exc.code, f"{where}: {exc.message}"), code=_FAILURE_CODES.get(exc.code, "io_error"))


def _info(top: SafeDir, rel: str) -> EntryInfo | None:
    st = top.lstat(rel)
    if st is None:
        return None
    return EntryInfo(PurePosixPath(rel).name, "file", st.st_size, st.st_mtime_ns, st.st_nlink)


def state_dir(paths: ThreadPaths) -> Path:
    """Thread-private bookkeeping (read marks, lock files): outside every mount,
    so the agent can neither see nor forge it."""
    return paths.root / "sandbox-state"


def _is_within(path: Path, root: Path) -> bool:
    """Component-wise containment (``/a/b2`` is not within ``/a/b``)."""
    return path == root or path.is_relative_to(root)


def _infer_home(thread_root: Path) -> Path | None:
    parts = thread_root.parts
    if len(parts) >= 5 and parts[-2] == "threads" and parts[-4] == "users":
        return thread_root.parents[3]
    return None


def _build_masker(vfs: VirtualFS) -> tuple[re.Pattern[str], dict[str, str]]:
    """A regex matching any host root, longest first, and its replacement map.

    Each root is listed both as configured and with symlinks resolved, since
    output from subprocesses (``os.getcwd()``, tracebacks) shows the real path.
    """
    pairs: list[tuple[Path, str]] = [(m.host, str(m.virtual)) for m in vfs.mounts]
    pairs.append((vfs.paths.user_data, str(USER_DATA)))
    pairs.append((vfs.paths.root, _THREAD_PLACEHOLDER))
    if vfs.home is not None:
        pairs.append((vfs.home, _HOME_PLACEHOLDER))
    mapping: dict[str, str] = {}
    for host, virtual in pairs:
        for form in (os.path.abspath(host), os.path.realpath(host)):
            if form != "/":
                mapping.setdefault(form, virtual)
    alternatives = "|".join(re.escape(k) for k in sorted(mapping, key=len, reverse=True))
    # A root only matches as a whole path component (not ``.../workspace2`` nor
    # ``.../workspace.bak``), but a full stop ending a sentence is not part of it.
    return re.compile(f"(?:{alternatives})(?![\\w-]|\\.[\\w-])"), mapping
