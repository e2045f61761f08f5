"""A run's context read from the end of a large notebook file, without reading the rest.

The context of a ``%%deerflow`` run is the few cells just above the calling one, and
in a notebook the calling cell is usually near the bottom.  For a large file version
no process has read yet, reading and parsing all of it (58.7 MB: ~100 ms) was the
one case over issue 26's 20 ms; its last megabyte or so holds everything the context
shows.

Reading from the end is exact because of two facts, not guesses:

* JSON never has a raw newline inside a string, so every line of the file starts
  outside any string: from a newline on, the rest of the file tokenizes as it does in
  the whole file.
* nbformat writes a notebook with one-space indents and sorted keys, so a cell begins
  at a line ``  {`` and the file begins ``{ "cells": [``.  The rest of the file from
  such a line is then parsed, strictly, as the continuation of a ``cells`` array: the
  cells, then only the keys a v4 notebook has after them (``metadata``, ``nbformat``,
  ``nbformat_minor``), then the end of the file.  A line ``  {`` that is not a cell
  start (another writer's layout) closes too many or too few brackets, the parse
  fails, and the caller reads the whole file as before.

What the end of a file cannot say is how many cells come before it, so the note reads
"earlier cells left out" without a count; and a calling cell that is not in the end
(it is further up, or not saved yet) sends the caller to the whole file too.  A file
with keys a v4 notebook may not have between its cells and its metadata is not a
valid notebook; for one, the cells read from the end are those of the last array
before ``metadata`` (the full read of the background pre-warm then replaces the
context for the next run).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import msgspec

from deerflow.errors import UserError
from deerflow.notebooks.cache import Signature, signature_of
from deerflow.notebooks.parsing import LightCell
from deerflow.threadfs import SafeDir, UnsafePath

if TYPE_CHECKING:
    from deerflow.notebooks.digest import NotebookContext

TAIL_FROM = 8 << 20
"""Files larger than this (bytes) have a run's context read from their end first; a smaller
one is read whole (the light parse of 8 MB is a few ms)."""
TAIL_READS = (2 << 20, 16 << 20)
"""How much of the end is read: the first size, then the second when the first holds the
calling cell but not enough of the cells above it (huge outputs near the bottom).  A calling
cell not in the first read (further up, or not saved yet) is left to the whole read."""

_HEAD = re.compile(rb'[ \t\r\n]*\{[ \t\r\n]*"cells"[ \t\r\n]*:[ \t\r\n]*\[')  # no nested repeats: linear
_CELL_START = b"\n  {\n"


class _Rest(msgspec.Struct, forbid_unknown_fields=True):
    """The end of a v4 notebook from a cell on, as the continuation of its ``cells`` array."""

    cells: list[LightCell]
    nbformat: int
    metadata: msgspec.Raw = msgspec.Raw(b"{}")
    nbformat_minor: int = 0


_REST = msgspec.json.Decoder(_Rest)


def cells_from_end(head: bytes, end: bytes) -> list[LightCell] | None:
    """The cells that begin in ``end`` (the last bytes of a v4 notebook whose first bytes are
    ``head``), all with ids; ``[]`` when ``end`` holds no cell start (read more of it); None when
    the file is not nbformat's layout or a cell has no id (nbformat < 4.5: its id is its place
    in the file, unknown here): read the whole file."""
    if _HEAD.match(head) is None:
        return None
    start = end.find(_CELL_START)
    if start < 0:
        return []
    try:
        rest = _REST.decode(b'{"cells":[' + end[start + 1:])
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if rest.nbformat != 4 or not rest.cells or any(not isinstance(c.id, str) or not c.id for c in rest.cells):
        return None
    return rest.cells


def read_ends(fd: int, size: int, amount: int) -> tuple[bytes, bytes]:
    """The first 64 bytes and the last ``amount`` bytes of the open file ``fd`` of ``size`` bytes
    (short if the file shrank meanwhile: the caller checks the file's version after)."""
    head = os.pread(fd, 64, 0)
    chunks, offset = [], max(0, size - amount)
    while offset < size:
        chunk = os.pread(fd, min(size - offset, 1 << 22), offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    return head, b"".join(chunks)


def context_from_end_of(open_root: Callable[[], SafeDir], path: str, signature: Signature,
                        cell_id: str | None, max_tokens: int) -> NotebookContext | None:
    """The context of ``cell_id`` in version ``signature`` of the notebook ``path``, read from the
    file's end (:data:`TAIL_READS`); None when the end cannot tell it, or the file is not that
    version any more: the caller reads the whole file, which names any problem.

    The file is opened under ``open_root()`` by :class:`SafeDir`'s rules (no link followed), and
    its version is checked on the open descriptor before and after each read.  Blocking: call it
    on a worker thread.
    """
    from deerflow.notebooks.digest import NotebookDigest, context_from_end

    size = signature[2]
    if size <= TAIL_FROM or not cell_id:
        return None
    wanted = b'"id": ' + json.dumps(cell_id).encode()  # how nbformat writes the calling cell's id
    try:
        with open_root() as root:
            fd = root.open_file(path)
            try:
                for amount in TAIL_READS:
                    if amount >= size or signature_of(os.fstat(fd)) != signature:
                        return None
                    head, end = read_ends(fd, size, amount)
                    if signature_of(os.fstat(fd)) != signature:
                        return None
                    if wanted not in end:  # further up, not saved yet, or another layout: read the whole file
                        return None
                    cells = cells_from_end(head, end)
                    if cells is None:
                        return None
                    if not cells:
                        continue
                    built = context_from_end(NotebookDigest.from_light(cells, signature, magic=[]), path,
                                             cell_id, max_tokens)
                    if built is not None:
                        return built
            finally:
                os.close(fd)
    except (UnsafePath, OSError, UserError):  # the root or the file cannot be opened: the whole read says why
        return None
    return None
