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
  ``/mnt/user-data/workspace``) and **checked on the real path**: symlinks are
  resolved and the target must stay inside the *same* mount, so a link in the
  workspace cannot reach ``/etc`` nor turn a read-only mount writable.
* **Host paths** that lie inside a mount are accepted and mapped (a traceback or
  ``os.getcwd()`` may show them to the model); anything else is refused.
* **Masking** rewrites every host root this thread knows about (mount roots,
  their real paths, the thread directory and ``$DEERFLOW_HOME``) in text going
  back to the model.

A residual race remains: a process that can create symlinks inside a mount
(host bash) could swap one in between the check and the use.  The local
provider disables host bash by default for that reason.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from deerflow.config.paths import ThreadPaths
from deerflow.tools.errors import ToolFailure

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
        host: The real host path (symlinks resolved), safe to open.
        mount: The mount it lies in.
        canonical: The virtual path of ``host``: one name per file even when
            reached through an in-mount symlink or a host path, so per-file
            bookkeeping (read marks) cannot be dodged by aliasing.
    """

    virtual: str
    host: Path
    mount: Mount
    canonical: str


@dataclass(frozen=True)
class WalkEntry:
    """One entry met by :meth:`VirtualFS.walk`.

    Attributes:
        host: Host path of the entry itself (a link is not resolved).
        virtual: Its virtual path.
        rel: Its path below the walked path, ``/``-separated (what globs match).
        depth: 1 for direct children of the walked path.
        is_dir: A directory, or an in-mount link to one.
        is_link: A symbolic link (listed, never descended into).
        escapes: A link whose target leaves its mount; callers skip it.
    """

    host: Path
    virtual: str
    rel: str
    depth: int
    is_dir: bool
    is_link: bool = False
    escapes: bool = False


@dataclass(frozen=True)
class _Root:
    host: Path
    virtual: PurePosixPath
    rel: PurePosixPath
    mount: Mount


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
        skills_root: Path | None = None,
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
        host = Path(os.path.realpath(mount.host.joinpath(*rest.parts)))
        if not _is_within(host, mount.real_host):
            raise ToolFailure(
                f"{virtual} leads outside {mount.virtual} through a symbolic link; access refused.",
                code="symlink_escape",
            )
        canonical = mount.virtual.joinpath(*host.relative_to(mount.real_host).parts)
        return ResolvedPath(str(virtual), host, mount, str(canonical))

    def resolve(self, virtual_path: str, *, write: bool) -> Path:
        """The real host path for ``virtual_path`` (see :meth:`locate`)."""
        return self.locate(virtual_path, write=write).host

    def contains(self, host_path: Path, mount: Mount) -> bool:
        """Whether ``host_path``, symlinks resolved, stays inside ``mount``.

        Walkers use it to skip links that point out of the mount instead of
        failing the whole listing.
        """
        return _is_within(Path(os.path.realpath(host_path)), mount.real_host)

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

        Containment during traversal lives here, next to :meth:`locate`:
        links are reported but never followed (no loops), links leaving their
        mount are flagged ``escapes``, and ``NOISE_DIRS`` are not descended
        into.  A virtual ancestor (``/mnt/user-data``) walks every mount below
        it.  Path errors are raised at once, not on first iteration.

        Raises:
            ToolFailure: as :meth:`locate`, or ``not_found``.
        """
        mounts = self.mounts_under(path)
        if mounts:
            base = PurePosixPath(path.strip())
            roots = [_Root(m.host, m.virtual, m.virtual.relative_to(base), m) for m in mounts]
            shown = str(base)
        else:
            rp = self.locate(path, write=False)
            if not rp.host.exists() and rp.host != rp.mount.real_host:  # empty mount: fine
                raise ToolFailure(
                    f"{rp.virtual} does not exist. Use ls or glob to find the right path.",
                    code="not_found",
                )
            roots = [_Root(rp.host, PurePosixPath(rp.virtual), PurePosixPath(), rp.mount)]
            shown = rp.virtual
        return shown, self._walk_roots(roots, max_depth or 1 << 30)

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
            if root.host.is_file():
                yield WalkEntry(root.host, str(root.virtual), root.virtual.name, 1, False)
                continue
            depth = 1
            if root.rel.parts:  # a mount met below an ancestor: the mount itself first
                yield WalkEntry(root.host, str(root.virtual), str(root.rel), 1, True)
                depth = 2
            if root.host.is_dir() and depth <= max_depth:
                yield from self._walk_dir(root, root.host, root.virtual, root.rel, depth, max_depth)

    def _walk_dir(
        self,
        root: _Root,
        host_dir: Path,
        vdir: PurePosixPath,
        rel: PurePosixPath,
        depth: int,
        max_depth: int,
    ) -> Iterator[WalkEntry]:
        try:
            children = sorted(os.scandir(host_dir), key=lambda e: e.name)
        except OSError:
            return  # an unreadable directory: report what can be read
        for entry in children:
            host, vpath, rpath = Path(entry.path), vdir / entry.name, rel / entry.name
            link = entry.is_symlink()
            escapes = link and not self.contains(host, root.mount)
            is_dir = not escapes and entry.is_dir()
            yield WalkEntry(host, str(vpath), str(rpath), depth, is_dir, link, escapes)
            if is_dir and not link and depth < max_depth and entry.name not in NOISE_DIRS:
                yield from self._walk_dir(root, host, vpath, rpath, depth + 1, max_depth)

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
