"""Files a user names on a command line (``--out F``, ``--record F``): whole or not at all.

An export (``deerflow export``, ``memory export``, ``batches export``) that fails midway (an
unknown id found late, a full disk, Ctrl-C) must neither leave half a file nor truncate the
file already at that path: :func:`write_whole` writes a temporary file beside the target and
renames it over the target only once the content is complete.  A path that cannot be written
(a directory, a missing folder, a file where a folder should be, no permission) is one
:class:`~deerflow.errors.UserError` naming it, before anything is written.

Here, not in ``deerflow.cli``: the capability CLIs (``memory``, ``batches``) write files too and
sit below the CLI in the package layers.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeVar

from deerflow.errors import UserError

T = TypeVar("T")


def write_whole(target: str | Path, write: Callable[[IO[Any]], T], *, binary: bool = False) -> T:
    """Call ``write`` with a stream whose content replaces ``target`` once ``write`` returns.

    The new file gets the usual permissions (``0o666`` less the umask).  When ``write`` raises,
    the temporary file is removed and ``target`` is as it was.

    Raises:
        UserError: ``target`` is a directory, or its folder is missing or not writable.
    """
    partial = PartialFile.open(target, binary=binary)
    try:
        with partial.stream:
            result = write(partial.stream)
        partial.commit()
    except BaseException:
        partial.discard()
        raise
    return result


@dataclass
class PartialFile:
    """A file being written beside ``target`` under an unpredictable name, not yet in its place.

    For writers that cannot hand :func:`write_whole` a plain callable (the client's export is
    a coroutine; it calls these blocking steps off its event loop): :meth:`open`, write to
    :attr:`stream` and close it, then :meth:`commit` (rename over ``target``) or, on any
    failure, :meth:`discard` (``target`` stays exactly as it was).
    """

    target: Path
    path: Path
    stream: IO[Any]

    @classmethod
    def open(cls, target: str | Path, *, binary: bool = False) -> PartialFile:
        """Create the temporary file (``O_EXCL``: never an existing file or a planted link).

        Raises:
            UserError: ``target`` is a directory, or its folder is missing or not writable.
        """
        path = Path(target)
        if path.is_dir():
            raise UserError(f"cannot write {target}: it is a directory")
        partial = path.with_name(f".{path.name}.{secrets.token_hex(8)}.part")
        try:
            fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except OSError as exc:
            raise UserError(f"cannot write {target}: {exc.strerror or exc}") from None
        stream = os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8")
        return cls(path, partial, stream)

    def commit(self) -> None:
        """Close the stream and put the complete file in place of ``target``."""
        self.stream.close()
        os.replace(self.path, self.target)

    def discard(self) -> None:
        """Close the stream and remove the temporary file; ``target`` is left alone."""
        try:
            self.stream.close()
        finally:
            self.path.unlink(missing_ok=True)


def check_appendable(target: str | Path) -> None:
    """Refuse, before a run starts, a file that will be appended to but cannot be.

    The file and its missing folders are created by the writer later (a cassette, mid-run);
    a directory at ``target`` or a file where one of its folders should be would only fail
    once the run is under way.

    Raises:
        UserError: naming ``target`` and what is in the way.
    """
    path = Path(target)
    if path.is_dir():
        raise UserError(f"cannot write {target}: it is a directory")
    existing = next((p for p in path.parents if p.exists()), None)
    if existing is not None and not existing.is_dir():
        raise UserError(f"cannot write {target}: {existing} is not a directory")
    if (path.exists() and not os.access(path, os.W_OK)) or \
            (not path.exists() and existing is not None and not os.access(existing, os.W_OK | os.X_OK)):
        raise UserError(f"cannot write {target}: permission denied")


__all__ = ["PartialFile", "check_appendable", "write_whole"]
