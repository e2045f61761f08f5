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

Walking the mounts is :mod:`deerflow.sandbox.files.walk` (mixed into
:class:`VirtualFS`); what the model is told when a path is refused is
:mod:`deerflow.sandbox.files.failures`.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from deerflow.config.paths import ThreadPaths
from deerflow.errors import ToolFailure
from deerflow.sandbox.files.failures import tool_failure
from deerflow.sandbox.files.walk import VirtualWalk
from deerflow.threadfs import SafeDir, UnsafePath

USER_DATA = PurePosixPath("/mnt/user-data")
UPLOADS = USER_DATA / "uploads"
WORKSPACE = USER_DATA / "workspace"
OUTPUTS = USER_DATA / "outputs"
SKILLS = PurePosixPath("/mnt/skills")
ACP_WORKSPACE = PurePosixPath("/mnt/acp-workspace")

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


class VirtualFS(VirtualWalk):
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

    def open_dir(self, path: str) -> tuple[ResolvedPath, SafeDir]:
        """Locate ``path`` and open the directory there as a :class:`SafeDir` (the caller closes it).

        For a host-side reader of a whole folder the agent names (a skill package to install):
        ``ResolvedPath.host`` joined by path would follow a link the agent's code planted on the
        way (``workspace/x -> ../../../../../other-user``); this opens each part without following.

        Raises:
            ToolFailure: as :meth:`locate`, or ``not_found``, ``symlink_escape``.
        """
        rp = self.locate(path, write=False)
        root = self.open_mount(rp.mount)
        if not rp.rel:
            return rp, root
        try:
            with root:
                return rp, root.subdir(rp.rel, label=rp.virtual)
        except UnsafePath as exc:
            raise tool_failure(exc, shown=rp.virtual) from None

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

    def _by_host_depth(self) -> list[Mount]:
        # Deepest host roots first, should one mount's host dir nest in another's.
        return sorted(self.mounts, key=lambda m: len(m.host.parts), reverse=True)


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
