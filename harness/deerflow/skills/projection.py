"""A thread's view of its skills: a copy of the enabled ones, rebuilt when they change.

``/mnt/skills`` never shows the canonical skill trees.  Each thread gets
``{thread}/skills/<name>/``, a copy of the skills enabled for its user, and
that directory is what the file tools (``RunContext.services.skills_root``)
and the sandbox providers (``ThreadPaths.skills_view``) mount read-only.  So:

* a disabled skill is simply absent: no file tool, shell or kernel can read it;
* nothing done in a sandbox can modify the canonical files (a copy, not a bind);
* links are never copied as links: one pointing inside its skill is copied as
  the file it points to, one leading out of its skill is rejected (skipped and
  logged), so a skill cannot expose the host through its view.

A thread that has no view yet (a new thread, or one whose runs never needed
it) does not get one at its run's start: the run's paths carry an
:class:`OwedView` and the view is built on first use, by whatever mounts or
reads ``/mnt/skills`` (:meth:`ThreadPaths.ready_skills_view
<deerflow.config.paths.ThreadPaths.ready_skills_view>`: the sandbox providers'
mount table, the file tools).  Until then ``/mnt/skills`` is simply missing,
never the canonical trees.  Only an *absent* view is deferred: anything standing
where it belongs (a view, a planted link or file) is rebuilt at the run's start
as before, so no consumer can meet a stale view or a planted link in a run.

The view is rebuilt only when the enabled set or a file of it changes (a
signature of names, sizes and modification times is kept in the thread's
private ``sandbox-state``).  It is rebuilt *in place*, skill by skill (copy to
a staging directory, then rename), because a running kernel or sandbox has the
view directory itself bound: the directory must stay the same inode.

Everything below the thread's root may have been planted by a writer of the
thread's folders (the agent's own code under the ``local`` provider, another
machine on a shared ``thread_files_root``), so the whole build goes through
:class:`~deerflow.threadfs.SafeDir` anchored at the thread's root: no link is
followed anywhere (a link or file standing where the view belongs is removed,
never entered), staging directories get unguessable names made with ``mkdir``
through the root's descriptor, every copied file is created ``O_EXCL``, and a
stale entry is deleted without following it.  What cannot be built that way
(the view swapped for a link half way through) fails the run with a one-line
:class:`~deerflow.errors.Conflict`; nothing outside the thread is written or
deleted.  The skill trees themselves are read through ``SafeDir`` too.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deerflow.config.paths import ThreadPaths
from deerflow.errors import Conflict
from deerflow.persistence.aio import guard_loop
from deerflow.sandbox.files.virtual_paths import state_dir
from deerflow.skills.catalog import Skill
from deerflow.threadfs import EntryInfo, SafeDir, UnsafePath

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

logger = logging.getLogger(__name__)

SIGNATURE_FILE = "skills-view.json"
_STAGING = ".skills-staging-"
_ASIDE = ".skills-old-"
_SIGNATURE_MAX = 1024  # a hex digest; anything longer was not written by us
Listing = tuple[tuple[str, EntryInfo], ...]
_DIR_MODE = 0o755  # the view is read by sandboxes that may run as another uid
_FILE_MODE = 0o644


def project_skills(skills: Sequence[Skill], paths: ThreadPaths) -> Path:
    """Make ``paths.skills_view`` hold exactly ``skills`` (copies); returns the view.

    Cheap when nothing changed: one stat walk of the enabled skills.

    Raises:
        Conflict: the thread's folders changed under the build in a way it cannot work
            around (the view swapped for a link half way through); nothing was written
            outside the thread.
    """
    view = paths.skills_view
    rel = view.relative_to(paths.root).as_posix()
    marker = f"{state_dir(paths).relative_to(paths.root).as_posix()}/{SIGNATURE_FILE}"
    listings = {skill.name: _listing(skill.root) for skill in skills}  # one walk: the signature's and the copy's
    signature = skills_signature(skills, listings)
    with _open_thread(paths.root) as root:
        if root.kind(rel) == "dir" and _read(root, marker) == signature:
            return view
        try:
            if not _build_new_view(root, rel, skills, listings):
                _rebuild_in_place(root, rel, skills, listings)
        except UnsafePath as exc:  # one line for the user (HTTP 409), naming no host path
            raise Conflict(f"the thread's skills view could not be built: {exc}") from None
        try:
            root.write_text(marker, signature)
        except UnsafePath as exc:  # only costs a rebuild next run
            logger.warning("skills view signature not saved: %s", exc)
    return view


Listings = Mapping[str, Listing | None]
"""Each skill's walk by name (:func:`_listing`; None: its tree could not be read)."""


def view_absent(paths: ThreadPaths) -> bool:
    """Whether nothing at all stands where the thread's view belongs (``lstat``: no link followed).

    A link, a file or a directory there means "not absent": the caller rebuilds it now.
    """
    try:
        os.lstat(paths.skills_view)
    except FileNotFoundError:
        return True
    except OSError:  # a file where the thread's root should be...: the eager build reports it
        return False
    return False


VIEW_DEADLINE_S = 60.0
"""How long building a thread's owed view may take off the loop (a copy of the enabled skills)."""


class OwedView:
    """A thread's view owed by one run: built by the first call, once (threads may race to it).

    A build that fails on a tampered thread (:class:`~deerflow.errors.Conflict`) fails every
    later call the same way: nothing falls back to another directory.
    """

    def __init__(self, skills: Sequence[Skill], root: Path) -> None:
        self.skills = tuple(skills)
        self.root = root
        self._lock = threading.Lock()
        self._built = False
        self._failed: Conflict | None = None

    @property
    def built(self) -> bool:
        return self._built

    def __deepcopy__(self, memo: dict[int, Any]) -> OwedView:
        """The same build: a copied run context (its paths) still owes, and builds, the one view."""
        return self

    def __call__(self) -> None:
        if self._built:
            return
        guard_loop("building a thread's skills view", instead="build it off the loop (a tool's offloader)")
        with self._lock:
            if self._built:
                return
            if self._failed is not None:
                raise Conflict(str(self._failed))
            try:
                project_skills(self.skills, ThreadPaths(self.root))
            except Conflict as exc:
                self._failed = exc
                raise
            self._built = True


READS_VIEW = "reads_skills_view"
"""``tool.metadata`` key of a tool that mounts or reads ``/mnt/skills`` (see :func:`reading_the_view`)."""


def reading_the_view(tools: Iterable[BaseTool]) -> list[BaseTool]:
    """``tools``, each marked as one that mounts or reads the thread's view (the file, exec and
    subagent tools): before a model answer's calls to any of them run, the run's owed view is built
    (:class:`~deerflow.agents.middlewares.skills_view.SkillsViewMiddleware`), once, so parallel calls
    of one answer never race to build it (and reach the sandbox in the answer's order)."""
    marked = []
    for tool in tools:
        if not (tool.metadata or {}).get(READS_VIEW):
            tool.metadata = {**(tool.metadata or {}), READS_VIEW: True}
        marked.append(tool)
    return marked


def reads_the_view(tool: object) -> bool:
    """Whether ``tool`` was marked by :func:`reading_the_view`."""
    return bool((getattr(tool, "metadata", None) or {}).get(READS_VIEW))


def _build_new_view(root: SafeDir, rel: str, skills: Sequence[Skill], listings: Listings) -> bool:
    """A thread's first view, built whole in a staging directory and renamed into place once.

    Nothing can have a view that does not exist yet bound, so the skill-by-skill
    in-place rebuild (one staging directory and rename per skill) is not needed for
    it.  A link or file standing where the view belongs was planted (the host only
    ever makes a directory there): it is removed, never followed.  False when a
    directory is there, or appeared meanwhile (another process's first run): the
    caller then rebuilds it in place.
    """
    kind = root.kind(rel)
    if kind == "dir":
        return False
    if kind is not None:
        logger.warning("a %s stood where the thread's skills view belongs; removed", kind)
        root.unlink(rel)
    staging: str | None = root.mkdtemp(_STAGING, mode=_DIR_MODE)
    try:
        with root.subdir(staging, label=rel) as sub:
            for skill in skills:
                copy_skill_tree(skill.root, sub, skill.name, listing=listings.get(skill.name))
        try:
            root.rename(staging, rel)
        except UnsafePath:
            return False
        staging = None
        return True
    finally:
        if staging is not None:
            _discard(root, staging)


def _rebuild_in_place(root: SafeDir, rel: str, skills: Sequence[Skill], listings: Listings) -> None:
    """Stale entries deleted (never followed), then each skill replaced by a fresh copy."""
    root.makedirs(rel)
    wanted = {s.name for s in skills}
    for entry in root.scandir(rel):
        if entry.name not in wanted:
            root.rmtree(f"{rel}/{entry.name}")
    for skill in skills:
        _replace_copy(root, f"{rel}/{skill.name}", skill, listings.get(skill.name))


def _replace_copy(root: SafeDir, final: str, skill: Skill, listing: Listing | None) -> None:
    """Copy ``skill`` to a staging directory, move what is at ``final`` aside, rename the copy in."""
    staging: str | None = root.mkdtemp(_STAGING, mode=_DIR_MODE)
    try:
        with root.subdir(staging, label=final) as sub:
            copy_skill_tree(skill.root, sub, listing=listing)
        kind = root.kind(final)
        if kind == "dir":  # renamed over an empty directory of ours, then deleted
            aside = root.mkdtemp(_ASIDE)
            root.rename(final, aside)
            _discard(root, aside)
        elif kind is not None:
            root.unlink(final)
        root.rename(staging, final)
        staging = None
    finally:
        if staging is not None:
            _discard(root, staging)


def _discard(root: SafeDir, name: str) -> None:
    try:
        root.rmtree(name)
    except UnsafePath as exc:
        logger.warning("skills view: %s not removed: %s", name, exc)


def _listing(root: Path) -> Listing | None:
    """A skill's tree as ``SafeDir.walk`` lists it (links reported, not followed); None: unreadable."""
    try:
        with _open_tree(root) as top:
            return tuple(top.walk())
    except UnsafePath:
        return None


def skills_signature(skills: Sequence[Skill], listings: Listings | None = None) -> str:
    """A digest of the skills' names, sources and every file's size and mtime (links not followed).

    ``listings``: the skills' walks when the caller has them (each is walked here otherwise).
    """
    entries = []
    for skill in sorted(skills, key=lambda s: s.name):
        listing = listings.get(skill.name) if listings is not None else _listing(skill.root)
        files: list[list[object]] = ([[rel, info.size, info.mtime_ns] for rel, info in listing if info.kind != "dir"]
                                     if listing is not None else [["(unreadable)", 0, 0]])
        entries.append([skill.name, skill.source, str(skill.root), files])
    return hashlib.sha256(json.dumps(entries).encode()).hexdigest()


def copy_skill_tree(source: Path, sub: SafeDir, into: str = "", *, listing: Listing | None = None) -> None:
    """Copy ``source`` to ``sub / into`` with links resolved inside ``source`` and escaping links rejected.

    Both sides go through :class:`SafeDir`: the skill is walked (or ``listing``, the walk the
    signature was made from, is used), an entry of the skill swapped for a link after it was
    listed is refused, not followed (skipped and logged), and every directory and file of the
    copy is made beneath ``sub``'s descriptor, a file only with ``O_EXCL``, so an entry planted
    in the copy fails it instead of redirecting it.

    Raises:
        UnsafePath: something was planted in ``sub`` while it was filled.
    """
    if into:
        sub.mkdir(into, mode=_DIR_MODE)
    with _open_tree(source) as top:
        for rel, entry in (listing if listing is not None else top.walk()):
            target = f"{into}/{rel}" if into else rel
            if entry.kind == "dir":
                sub.mkdir(target, mode=_DIR_MODE)
            elif entry.kind == "file":
                _copy_file(top, rel, sub, target)
            elif entry.kind == "symlink":
                _copy_link(top, Path(os.path.realpath(source)), rel, sub, target)
            # FIFOs, sockets and devices are never opened


def _open_tree(root: Path) -> SafeDir:
    """A skill's directory; one that is itself a link (an installed skill linked in) is opened
    where it leads, as the path-based walk always did.  The library's tree, not a thread's."""
    try:
        return SafeDir.open(root)
    except UnsafePath as exc:
        if exc.code == "not_found":
            raise
        return SafeDir.open(os.path.realpath(root))


def _open_thread(root: Path) -> SafeDir:
    """The thread's root (the host's own layout, never through a link), made when missing."""
    try:
        return SafeDir.open(root)
    except UnsafePath as exc:
        if exc.code != "not_found":
            raise
        return SafeDir.open(root, create=True)


def _copy_link(top: SafeDir, real_root: Path, rel: str, sub: SafeDir, target: str) -> None:
    """A link inside the skill is copied as the file it names; a directory link or one leaving it is not."""
    real = Path(os.path.realpath(real_root / rel))
    if real.is_dir():
        logger.warning("skill %s: directory link %s not projected", real_root.name, rel)
    elif not (real.is_relative_to(real_root) and real.is_file()):
        logger.warning("skill %s: link %s leaves the skill; rejected", real_root.name, rel)
    else:  # opened by its resolved path below the skill, again following no link
        _copy_file(top, real.relative_to(real_root).as_posix(), sub, target)


def _copy_file(top: SafeDir, rel: str, sub: SafeDir, target: str) -> None:
    """Copy the regular file ``rel`` of the skill to the new file ``target``; anything else is skipped."""
    try:
        src = top.open_file(rel, hard_links_ok=True)  # the library's own tree, not a thread's
    except UnsafePath as exc:
        logger.warning("skill file %s not copied (changed while copied?): %s", rel, exc)
        return
    try:
        out = sub.open_new(target, mode=_FILE_MODE)
        try:
            _send(src, out)
        finally:
            os.close(out)
    finally:
        os.close(src)


def _send(src: int, out: int) -> None:
    """All of ``src`` into ``out``: ``sendfile`` (no copy through Python), else reads and writes."""
    try:
        while os.sendfile(out, src, None, 1 << 20):
            pass
        return
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOSYS) or os.lseek(out, 0, os.SEEK_CUR):
            raise
    while chunk := os.read(src, 1 << 20):
        os.write(out, chunk)


def _read(root: SafeDir, rel: str) -> str | None:
    with contextlib.suppress(UnsafePath, ValueError):
        return root.read_text(rel, max_bytes=_SIGNATURE_MAX)
    return None
