"""A directory the host touches only through its descriptor: :class:`SafeDir`.

Everything inside a thread's folders is written by code we do not trust
(the agent's bash and python run there, in a sandbox or not), so host-side code
reads and writes those folders only through this class.  Its rules:

* **No link is ever followed.**  Every path is opened relative to the
  directory's descriptor with :func:`open_beneath` (``openat2`` with
  ``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS``, or an ``O_NOFOLLOW`` walk), so a
  symlink planted at the exact name we use, or a directory swapped for a link
  half way through (``renameat2(RENAME_EXCHANGE)`` in a loop), fails the open
  instead of redirecting it.  Links the agent made stay usable by the agent's
  own code in the sandbox; the host simply refuses to go through them.
* **Regular files only.**  A read opens with ``O_NONBLOCK`` (a FIFO cannot
  block the open), checks ``fstat`` and refuses FIFOs, sockets and devices
  before reading a byte.  A file with more than one hard link is refused for
  reads and in-place writes: its other name may lie outside the thread.
* **Whole-file writes are atomic and never reuse a name the sandbox can
  predict**: a temporary file with a random name is created with
  ``O_CREAT | O_EXCL`` (which refuses an existing name, a planted link included)
  in the target's own directory, filled, then renamed over the target through
  the directory descriptor.  A reader sees the old file or the new one.
* **Errors name relative paths only** (:class:`UnsafePath` carries a stable
  ``code``), never the host path, so they are safe to show to the model.

A test walks the harness's source and fails if a module outside an explicit
list opens, writes, renames or deletes files by path (tests/unit/test_threadfs_layer.py).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path, PurePosixPath

from deerflow.threadfs._fdio import first_names, unlink_quietly, write_temp_file
from deerflow.threadfs._resolve import open_beneath, split_relative
from deerflow.threadfs.entries import EntryInfo, Kind, UnsafePath, kind_of, translate
from deerflow.threadfs.tree import MAX_WALK_DEPTH, remove_entry, walk_tree

_READ_CHUNK = 1 << 16
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY


class SafeDir:
    """A directory, held by descriptor, whose contents the host reads and writes safely.

    Open one with :meth:`open` (from a trusted host path) or :meth:`subdir`
    (below another).  Use as a context manager, or call :meth:`close`.

    Args:
        fd: An ``O_RDONLY | O_DIRECTORY`` descriptor; the instance owns it.
        label: What error messages call the root (a virtual path such as
            ``/mnt/user-data/workspace``), never a host path.
    """

    def __init__(self, fd: int, *, label: str = "") -> None:
        self._fd = fd
        self.label = label

    # -- opening -------------------------------------------------------------

    @classmethod
    def open(cls, path: Path | str, *, label: str = "", create: bool = False) -> SafeDir:
        """Open a directory the host trusts by its path (its own layout, such as
        ``$DEERFLOW_HOME/users/u/threads/t``); ``create`` makes it and its missing parents, one
        ``mkdirat`` each below the deepest existing one, so a link planted at a missing level's
        name (the thread's folders are the agent's) is refused, never created through."""
        try:
            fd = os.open(path, _DIR_FLAGS | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError as exc:
            if not create:
                raise translate(exc, label) from None
            fd = _create_below_anchor(Path(path), label)
        except OSError as exc:
            raise translate(exc, label) from None
        return cls(fd, label=label)

    @classmethod
    def open_below(cls, base: Path | str, rel: str, *, label: str = "", create: bool = False) -> SafeDir:
        """Open ``base/rel`` where ``base`` is trusted and ``rel`` may be tampered with."""
        with cls.open(base) as root:
            return root.subdir(rel, create=create, label=label)

    def subdir(self, rel: str, *, create: bool = False, label: str | None = None) -> SafeDir:
        """A :class:`SafeDir` for ``rel`` below this one (created when asked)."""
        if create:
            self.makedirs(rel)
        fd = self._open(rel, _DIR_FLAGS)
        return SafeDir(fd, label=label if label is not None else self._show(rel))

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> SafeDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # a forgotten close must not leak descriptors
        with contextlib.suppress(OSError):
            self.close()

    @property
    def fd(self) -> int:
        """The directory's descriptor (valid while this object is open)."""
        return self._fd

    # -- reading -------------------------------------------------------------

    def lstat(self, rel: str) -> os.stat_result | None:
        """``lstat`` of ``rel`` (``None`` when absent); parents are never links."""
        parts = self._parts(rel)
        if not parts:
            return os.fstat(self._fd)
        try:
            parent = self._open_parent(parts)
        except UnsafePath as exc:
            if exc.code == "not_found":
                return None
            raise
        try:
            return os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise translate(exc, rel) from None
        finally:
            os.close(parent)

    def kind(self, rel: str) -> Kind | None:
        """What ``rel`` is, without following it (``None`` when absent)."""
        st = self.lstat(rel)
        return None if st is None else kind_of(st.st_mode)

    def open_file(self, rel: str, *, hard_links_ok: bool = False) -> int:
        """A read-only descriptor of the regular file ``rel`` (caller closes it).

        ``hard_links_ok`` is for trees outside every thread (a skill library installed with
        hard links from a package cache): there a second name cannot be the sandbox's doing.

        Raises:
            UnsafePath: ``not_found``, ``symlink``, ``not_regular``, ``is_dir``,
                ``hard_link``...
        """
        fd = self._open(rel, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        try:
            self._require_regular(fd, rel, hard_links_ok=hard_links_ok)
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def open_socket(self, rel: str) -> int:
        """An ``O_PATH`` descriptor of the Unix socket file ``rel`` (caller closes it).

        Connecting to ``/proc/self/fd/<it>`` reaches exactly this socket: a link planted at
        ``rel`` is refused (never followed), anything but a socket is ``not_socket``, and so is a
        socket with other hard links (its other name could be anywhere).
        """
        fd = self._open(rel, os.O_PATH)
        try:
            st = os.fstat(fd)
            if not stat.S_ISSOCK(st.st_mode) or st.st_nlink > 1:
                raise UnsafePath("not_socket", rel, f"{self._show(rel)} is not a socket the host may connect to")
        except BaseException:
            os.close(fd)
            raise
        return fd

    def read_bytes(self, rel: str, *, max_bytes: int | None = None) -> bytes:
        """The bytes of regular file ``rel``.

        Raises:
            UnsafePath: as :meth:`open_file`, or ``too_large`` past ``max_bytes``.
        """
        fd = self.open_file(rel)
        try:
            size = os.fstat(fd).st_size
            if max_bytes is not None and size > max_bytes:
                raise UnsafePath("too_large", rel, f"{self._show(rel)} is larger than {max_bytes} bytes")
            chunks: list[bytes] = []
            total = 0
            while True:
                chunk = os.read(fd, _READ_CHUNK)
                if not chunk:
                    break
                total += len(chunk)
                if max_bytes is not None and total > max_bytes:  # it grew while we read
                    raise UnsafePath("too_large", rel, f"{self._show(rel)} is larger than {max_bytes} bytes")
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def read_text(self, rel: str, *, encoding: str = "utf-8", max_bytes: int | None = None) -> str:
        return self.read_bytes(rel, max_bytes=max_bytes).decode(encoding)

    def scandir(self, rel: str = "", *, limit: int | None = None) -> list[EntryInfo]:
        """The entries of directory ``rel``, sorted by name, none followed.

        ``limit`` bounds the work on a directory the agent may have filled with millions of
        entries: at most that many names are read (the first ones in directory order), then sorted.
        """
        fd = self._open(rel, _DIR_FLAGS) if self._parts(rel) else os.dup(self._fd)
        try:
            names = os.listdir(fd) if limit is None else first_names(fd, limit)
            out = []
            for name in sorted(names):
                try:
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except OSError:
                    continue  # vanished while we listed: skip it
                kind = kind_of(st.st_mode)
                target = None
                if kind == "symlink":
                    try:
                        target = os.readlink(name, dir_fd=fd)
                    except OSError:
                        target = None
                out.append(EntryInfo(name, kind, st.st_size, st.st_mtime_ns, st.st_nlink, target))
            return out
        finally:
            os.close(fd)

    def walk(self, rel: str = "", *, max_depth: int = MAX_WALK_DEPTH, skip_dirs: frozenset[str] = frozenset(),
             on_too_deep: Callable[[str], None] | None = None,
             max_entries: int | None = None) -> Iterator[tuple[str, EntryInfo]]:
        """Every entry below ``rel``, depth first and sorted, as ``(relative path, info)``.

        Links are reported, never followed; directories named in ``skip_dirs``
        are reported but not entered; an unreadable directory is skipped.  No walk
        enters more than :data:`~deerflow.threadfs.tree.MAX_WALK_DEPTH` levels (the
        agent decides how deep its folders go): a directory at the limit is reported,
        not entered, and handed to ``on_too_deep`` for callers that say so.  ``max_entries``
        bounds the whole walk's work (entries read, not only yielded): it stops after that many."""
        base = "/".join(self._parts(rel))
        return walk_tree(self, base, max_depth=max_depth, skip_dirs=skip_dirs, on_too_deep=on_too_deep,
                         max_entries=max_entries)

    # -- writing -------------------------------------------------------------

    def makedirs(self, rel: str, *, mode: int = 0o755) -> None:
        """Create directory ``rel`` and its parents, refusing links on the way."""
        parts = self._parts(rel)
        current = os.dup(self._fd)
        try:
            for i, name in enumerate(parts):
                try:
                    os.mkdir(name, mode, dir_fd=current)
                except FileExistsError:
                    pass
                except OSError as exc:
                    raise translate(exc, "/".join(parts[: i + 1])) from None
                try:
                    nxt = open_beneath(current, name, os.O_PATH | os.O_DIRECTORY)
                except OSError as exc:
                    raise translate(exc, "/".join(parts[: i + 1])) from None
                os.close(current)
                current = nxt
        finally:
            os.close(current)

    def mkdir(self, rel: str, *, mode: int = 0o755) -> None:
        """Create directory ``rel`` in its existing parent: ``exists`` for any entry there (a
        link included), ``symlink`` for a link on the way; one ``mkdir`` where :meth:`makedirs`
        tries every level."""
        parts = self._parts(rel)
        parent = self._open_parent(parts)
        try:
            os.mkdir(parts[-1], mode, dir_fd=parent)
        except OSError as exc:
            raise translate(exc, self._show(rel)) from None
        finally:
            os.close(parent)

    def mkdtemp(self, prefix: str, *, mode: int = 0o700) -> str:
        """A new, empty directory directly in this one under an unguessable name; returns the name.

        ``mkdir`` through the descriptor creates it or fails (``EEXIST`` for any entry,
        a planted link included, which is then retried under another name), so the caller
        owns what it finds there: a staging directory no one else could have prepared.
        """
        for _ in range(16):
            name = f"{prefix}{secrets.token_hex(8)}"
            try:
                os.mkdir(name, mode, dir_fd=self._fd)
            except FileExistsError:
                continue
            except OSError as exc:
                raise translate(exc, self._show(name)) from None
            return name
        raise UnsafePath("exists", prefix, f"{self._show(prefix)}*: no free temporary name")

    def open_new(self, rel: str, *, mode: int = 0o644) -> int:
        """A write descriptor of the new regular file ``rel`` (caller closes it).

        ``O_CREAT | O_EXCL`` beneath this directory: any entry already at ``rel`` (a link
        included) is ``exists``, a link on the way is ``symlink``, so the bytes can only land
        in a file this call created.
        """
        return self._open(rel, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOCTTY, mode)

    def write_bytes(self, rel: str, data: bytes, *, mode: int = 0o644, makedirs: bool = True,
                    durable: bool = False) -> None:
        """Replace (or create) regular file ``rel`` with ``data``, atomically.

        Whatever sits at ``rel`` (a file, or a link the sandbox planted) is
        replaced by the new file; nothing is written through it.  A directory
        at ``rel`` is refused.
        """
        parts = self._parts(rel)
        if not parts:
            raise UnsafePath("is_dir", rel, f"{self._show(rel)} is a directory")
        name = parts[-1]
        if makedirs and len(parts) > 1:
            self.makedirs("/".join(parts[:-1]))
        parent = self._open_parent(parts)
        try:
            tmp = write_temp_file(parent, name, data, mode=mode, durable=durable)
            try:
                existing = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                existing = None
            try:
                if existing is not None and stat.S_ISDIR(existing.st_mode):
                    raise UnsafePath("is_dir", rel, f"{self._show(rel)} is a directory")
                os.rename(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
            except BaseException:
                unlink_quietly(tmp, parent)
                raise
        except OSError as exc:
            raise exc if isinstance(exc, UnsafePath) else translate(exc, rel) from None
        finally:
            os.close(parent)

    def write_text(self, rel: str, text: str, *, mode: int = 0o644, makedirs: bool = True,
                   durable: bool = False) -> None:
        self.write_bytes(rel, text.encode("utf-8"), mode=mode, makedirs=makedirs, durable=durable)

    def create_exclusive(self, rel: str, data: bytes, *, mode: int = 0o644) -> None:
        """Write new file ``rel``; ``exists`` if any entry (a link included) has that name."""
        parts = self._parts(rel)
        parent = self._open_parent(parts)
        try:
            tmp = write_temp_file(parent, parts[-1], data, mode=mode, durable=False)
            try:
                os.link(tmp, parts[-1], src_dir_fd=parent, dst_dir_fd=parent, follow_symlinks=False)
            except OSError as exc:
                raise translate(exc, rel) from None
            finally:
                unlink_quietly(tmp, parent)
        finally:
            os.close(parent)

    def append_bytes(self, rel: str, data: bytes, *, mode: int = 0o644) -> None:
        """Append to regular file ``rel`` (created if absent), never through a link."""
        fd = self._open(rel, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_NOCTTY, mode)
        try:
            self._require_regular(fd, rel)
            os.set_blocking(fd, True)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)

    def unlink(self, rel: str, *, missing_ok: bool = True) -> None:
        """Remove file or link ``rel`` (a link itself, never its target)."""
        parts = self._parts(rel)
        try:
            parent = self._open_parent(parts)
        except UnsafePath as exc:
            if exc.code == "not_found" and missing_ok:
                return
            raise
        try:
            os.unlink(parts[-1], dir_fd=parent)
        except FileNotFoundError:
            if not missing_ok:
                raise UnsafePath("not_found", rel, f"{self._show(rel)} does not exist") from None
        except OSError as exc:
            raise translate(exc, rel) from None
        finally:
            os.close(parent)

    def rmtree(self, rel: str) -> None:
        """Remove directory ``rel`` and everything in it (or the file or link at ``rel``), following
        no link, iteratively: the agent decides how deep its folders go (see
        :func:`~deerflow.threadfs.tree.remove_entry`).  A missing ``rel`` is no error."""
        parts = self._parts(rel)
        if not parts:
            raise UnsafePath("bad_path", rel, "refusing to remove the root itself")
        try:
            parent = self._open_parent(parts)
        except UnsafePath as exc:
            if exc.code == "not_found":
                return
            raise
        try:
            remove_entry(parent, parts[-1])
        except OSError as exc:
            raise translate(exc, self._show(rel)) from None
        finally:
            os.close(parent)

    def write_temp(self, name: str, chunks: Iterable[bytes], *, mode: int = 0o644) -> str:
        """A new hidden temp file in this directory (never through a link) holding ``chunks``, streamed.

        For a caller that checks the destination before :meth:`rename`-ing the temp file over it
        (uploads); an exception from ``chunks`` (a size limit) removes the temp file.
        """
        return write_temp_file(self._fd, name, chunks, mode=mode, durable=False)

    def rename(self, src: str, dst: str) -> None:
        """Rename ``src`` to ``dst`` (replacing a file there), both below this directory."""
        sp, dp = self._parts(src), self._parts(dst)
        sparent = self._open_parent(sp)
        try:
            dparent = self._open_parent(dp)
            try:
                os.rename(sp[-1], dp[-1], src_dir_fd=sparent, dst_dir_fd=dparent)
            except OSError as exc:
                raise translate(exc, src) from None
            finally:
                os.close(dparent)
        finally:
            os.close(sparent)

    # -- internals -----------------------------------------------------------

    def _show(self, rel: str) -> str:
        rel = "/".join(p for p in str(rel).split("/") if p not in ("", "."))
        if not self.label:
            return rel or "."
        return str(PurePosixPath(self.label) / rel) if rel else self.label

    def _parts(self, rel: str) -> tuple[str, ...]:
        try:
            return split_relative(rel)
        except ValueError as exc:
            raise UnsafePath("bad_path", str(rel), f"{rel!r}: {exc}") from None

    def _open(self, rel: str, flags: int, mode: int = 0o644) -> int:
        joined = "/".join(self._parts(rel))
        try:
            return open_beneath(self._fd, joined, flags, mode)
        except OSError as exc:
            raise translate(exc, self._show(rel)) from None

    def _open_parent(self, parts: tuple[str, ...]) -> int:
        if not parts:
            raise UnsafePath("bad_path", "", "the root has no parent here")
        return self._open("/".join(parts[:-1]), os.O_PATH | os.O_DIRECTORY)

    def _require_regular(self, fd: int, rel: str, *, hard_links_ok: bool = False) -> None:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise UnsafePath("is_dir", rel, f"{self._show(rel)} is a directory")
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePath("not_regular", rel, f"{self._show(rel)} is not a regular file (a FIFO, socket or device)")
        if st.st_nlink > 1 and not hard_links_ok:
            raise UnsafePath("hard_link", rel, f"{self._show(rel)} has other hard links; the host does not use such files")


def _create_below_anchor(path: Path, label: str) -> int:
    """Descriptor of ``path`` after ``mkdir``-ing each missing level beneath the deepest existing
    ancestor (followed, as the trusted path's ancestors always are: a linked ``$DEERFLOW_HOME``)
    and entering it without following links: a link at a level being made is refused."""
    missing: list[str] = []
    anchor = Path(os.path.abspath(path))
    while anchor != anchor.parent:
        missing.append(anchor.name)
        anchor = anchor.parent
        try:
            fd = os.open(anchor, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise translate(exc, label) from None
        with SafeDir(fd, label=label) as below:
            rest = "/".join(reversed(missing))
            below.makedirs(rest)
            return below._open(rest, _DIR_FLAGS)
    raise translate(FileNotFoundError(2, "No such file or directory"), label)
