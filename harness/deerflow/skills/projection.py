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

The view is rebuilt only when the enabled set or a file of it changes (a
signature of names, sizes and modification times is kept in the thread's
private ``sandbox-state``).  It is rebuilt *in place*, skill by skill (copy to
a staging directory, then rename), because a running kernel or sandbox has the
view directory itself bound: the directory must stay the same inode.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import shutil
import stat
import uuid
from collections.abc import Sequence
from pathlib import Path

from deerflow.config.paths import ThreadPaths
from deerflow.sandbox.files.virtual_paths import state_dir
from deerflow.skills.catalog import Skill

logger = logging.getLogger(__name__)

SIGNATURE_FILE = "skills-view.json"


def project_skills(skills: Sequence[Skill], paths: ThreadPaths) -> Path:
    """Make ``paths.skills_view`` hold exactly ``skills`` (copies); returns the view.

    Cheap when nothing changed: one stat walk of the enabled skills.
    """
    view = paths.skills_view
    marker = state_dir(paths) / SIGNATURE_FILE
    signature = skills_signature(skills)
    if view.is_dir() and _read(marker) == signature:
        return view
    if not view.exists() and _build_new_view(skills, view):
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(signature, encoding="utf-8")
        return view
    view.mkdir(parents=True, exist_ok=True)
    wanted = {s.name: s for s in skills}
    for child in view.iterdir():
        if child.name not in wanted:
            _remove(child)
    for skill in skills:
        _replace_copy(skill, view)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(signature, encoding="utf-8")
    return view


def _build_new_view(skills: Sequence[Skill], view: Path) -> bool:
    """A thread's first view, built whole in a staging directory and renamed into place once.

    Nothing can have a view that does not exist yet bound, so the skill-by-skill
    in-place rebuild (one staging directory and rename per skill) is not needed for
    it.  False when the view appeared meanwhile (another process's first run): the
    caller then rebuilds it in place.
    """
    view.parent.mkdir(parents=True, exist_ok=True)
    staging = view.parent / f".skills-staging-{uuid.uuid4().hex}"
    try:
        staging.mkdir()
        for skill in skills:
            copy_skill_tree(skill.root, staging / skill.name)
        try:
            staging.rename(view)
        except OSError:
            return False
        return True
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def skills_signature(skills: Sequence[Skill]) -> str:
    """A digest of the skills' names, sources and every file's size and mtime."""
    entries = []
    for skill in sorted(skills, key=lambda s: s.name):
        files = []
        for root, dirs, names in os.walk(skill.root):
            dirs.sort()
            for name in sorted(names):
                st = os.lstat(os.path.join(root, name))
                files.append([os.path.relpath(os.path.join(root, name), skill.root), st.st_size, st.st_mtime_ns])
        entries.append([skill.name, skill.source, str(skill.root), files])
    return hashlib.sha256(json.dumps(entries).encode()).hexdigest()


def _replace_copy(skill: Skill, view: Path) -> None:
    staging = view.parent / f".skills-staging-{uuid.uuid4().hex}"
    try:
        copy_skill_tree(skill.root, staging)
        final = view / skill.name
        if final.exists() or final.is_symlink():
            aside = view.parent / f".skills-old-{uuid.uuid4().hex}"
            final.rename(aside)
            _remove(aside)
        staging.rename(final)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def copy_skill_tree(source: Path, dest: Path) -> None:
    """Copy ``source`` to ``dest`` with links resolved inside ``source`` and escaping links rejected.

    The walk holds a descriptor of each directory and opens every entry relative to it with
    ``O_NOFOLLOW``: an entry swapped for a link after it was listed is refused, not followed,
    and no path is resolved again for the entries that are not links (a thread's first view
    is a few dozen syscalls, most of a new thread's skills cost).
    """
    real_root = Path(os.path.realpath(source))
    dest.mkdir(parents=True)
    top = os.open(source, os.O_RDONLY | os.O_DIRECTORY)
    try:
        _copy_dir(top, source, Path(), dest, real_root)
    finally:
        os.close(top)


def _copy_dir(fd: int, source: Path, rel: Path, dest: Path, real_root: Path) -> None:
    """Copy the directory open as ``fd`` (``source / rel``) into ``dest / rel``."""
    with os.scandir(fd) as listing:
        entries = sorted(listing, key=lambda e: e.name)
    for entry in entries:
        if entry.is_symlink():
            _copy_link(source, rel / entry.name, dest, real_root)
        elif entry.is_dir(follow_symlinks=False):
            (dest / rel / entry.name).mkdir()
            try:
                sub = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError:
                logger.warning("skill %s: directory %s changed while copied; skipped", source.name, rel / entry.name)
                continue
            try:
                _copy_dir(sub, source, rel / entry.name, dest, real_root)
            finally:
                os.close(sub)
        elif entry.is_file(follow_symlinks=False):
            _copy_file(entry.name, fd, dest / rel / entry.name)


def _copy_link(source: Path, rel: Path, dest: Path, real_root: Path) -> None:
    """A link inside the skill is copied as the file it names; a directory link or one leaving it is not."""
    real = Path(os.path.realpath(source / rel))
    if real.is_dir():
        logger.warning("skill %s: directory link %s not projected", source.name, rel)
    elif not (real.is_relative_to(real_root) and real.is_file()):
        logger.warning("skill %s: link %s leaves the skill; rejected", source.name, rel)
    else:
        _copy_file(str(real), None, dest / rel)


def _copy_file(name: str, dir_fd: int | None, target: Path) -> None:
    """Copy the regular file ``name`` (relative to ``dir_fd``) to the new file ``target``; anything else is skipped."""
    try:
        src = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError:
        logger.warning("skill file %s changed while copied; skipped", target.name)
        return
    try:
        if not stat.S_ISREG(os.fstat(src).st_mode):
            return
        out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
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


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None
