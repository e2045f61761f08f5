"""A run's context read from the end of a large notebook file, without parsing the rest.

The context of a ``%%deerflow`` run is the few cells just above the calling one, and
in a notebook the calling cell is usually near the bottom (or not saved yet: the
user typed it and ran it).  For a large file version no process has read yet, reading
and parsing all of it (58.7 MB: ~85 ms) was the one case over issue 26's 20 ms; its
last megabyte or so holds everything the context shows.

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

A calling cell that is not among the end's cells is either further up or in no cell
of the file (not saved yet); the context is then "all cells, nearest kept whole"
(:func:`~deerflow.notebooks.digest.build_context` with no anchor), which the end can
give once the file is known not to hold the cell.  That is proved by looking for the
id, JSON-quoted (``"abc"``), in the rest of the file (:func:`may_occur_before`: read and
searched, not parsed: a fraction of the parse's cost): found anywhere, even in a source line or a
metadata value, the whole read decides (a false "found" costs only that read).  A
false "not found" cannot happen for a file nbformat (or any JSON writer that does not
escape characters needing no escape) wrote: only ids of nbformat's own alphabet
(``[A-Za-z0-9_-]``, 1 to 64 characters) are looked for this way, ``json.dumps`` writes
such a string as its characters between two quotes, so a cell with that id has the
quoted id in the file, whatever the indentation, separators or key order (the search
is not tied to nbformat's ``"id": `` form); an id with any other character goes to the
whole read, and so does one of the form ``cell-N``: the name the whole read gives a cell
without an id (nbformat < 4.5), which is not in the file.  Only a writer that spells an id's plain letters as ``\\u`` escapes could
hide a cell from the search, and such a file's context is then built from its last
cells: cells of that same file, fenced as untrusted like any.

What the end of a file cannot say is how many cells come before it, so the note reads
"earlier cells left out" without a count.  A file with keys a v4 notebook may not have
between its cells and its metadata is not a valid notebook; for one, the cells read
from the end are those of the last array before ``metadata`` (the full read of the
background pre-warm then replaces the context for the next run).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

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
"""How much of the end is read: the first size, then the second when the first does not hold
enough of the cells the context shows (huge outputs near the bottom).  A calling cell whose id
is not in the first read is looked for in the rest of the file (:func:`may_occur_before`), not
in a larger end."""
SCAN_CHUNK = 1 << 20
"""How much of the file :func:`may_occur_before` reads at a time, into one buffer it reuses (a
fresh ``bytes`` per read page-faults in new memory each time)."""

_PLAIN_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # nbformat's cell id alphabet: json.dumps writes it as is
_POSITIONAL = re.compile(r"cell-[0-9]+x*")  # what the whole read names a cell without an id: not in the file

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


def may_occur_before(fd: int, needle: bytes, stop: int, *, chunk: int | None = None) -> bool:
    """Whether ``needle`` may begin before offset ``stop`` of the open file ``fd``: True when it
    does, or when the file ended early (it changed: the caller's signature check says so).

    Read from ``stop`` towards the start (a cell further up is most often near the bottom: found
    early), ``chunk`` (:data:`SCAN_CHUNK`) bytes at a time into one reused buffer, consecutive
    pieces overlapping by ``len(needle) - 1`` bytes so that an occurrence across their boundary is
    whole in one of them.  Only reads: a file truncated meanwhile gives a short read, never a
    signal (no mmap)."""
    overlap = len(needle) - 1
    buffer = bytearray((chunk or SCAN_CHUNK) + overlap)
    view = memoryview(buffer)
    high = stop + overlap  # an occurrence beginning just before stop ends after it
    search: _Search | None = None
    while high > overlap:
        low = max(0, high - len(buffer))
        if os.preadv(fd, [view[:high - low]], low) != high - low:
            return True
        search = search or _Search(needle, buffer, high - low)  # its byte chosen on the file's last piece
        if search.within(buffer, high - low):
            return True
        high = low + overlap
    return False


class _Search:
    """``needle`` looked for in a piece by ``memchr`` of one of its bytes (SIMD: several times
    faster than ``bytes.find`` of a short needle in JSON text, whose quotes and digits keep its
    skips short),
    each hit compared whole.  The byte is the needle's least common in samples spread over the
    first piece (a base64 image alone would say every lowercase letter is rare; on a tie, ``-``
    or ``_``: base64 has neither).  A piece where it turns out common (more than one hit in
    8 KiB: a hit handled in Python costs what ``find`` spends on a few KiB) finishes with
    ``bytes.find``: a file cannot make the search much slower than ``find`` alone, and either
    way every place the needle could begin is looked at: exact, fast or not."""

    SPOTS, SPOT = 16, 2048

    def __init__(self, needle: bytes, first: bytes | bytearray, length: int) -> None:
        self.needle = needle
        step = max(self.SPOT, length // self.SPOTS)
        sample = b"".join(first[at:min(at + self.SPOT, length)] for at in range(0, length, step))
        counts = {byte: sample.count(byte) for byte in set(needle) - {ord('"')}}
        rare = [b for b in sorted(counts, key=lambda b: (counts[b], b not in b"-_"))
                if counts[b] <= len(sample) >> 13]  # common even there: not tried
        self.bytes = rare[::-1]  # the next one tried last: a byte common in a piece is dropped

    def within(self, data: bytes | bytearray, length: int) -> bool:
        """Whether the needle is whole in ``data[:length]``."""
        needle, size = self.needle, len(self.needle)
        start = 0
        if self.bytes:
            byte = self.bytes[-1]
            at = needle.index(byte)
            last, budget = length - size + at + 1, length >> 13  # a hit past last would end past length
            while True:
                hit = data.find(byte, start + at, last)
                if hit < 0:
                    return False
                if data.startswith(needle, hit - at):
                    return True
                start, budget = hit - at + 1, budget - 1
                if budget <= 0:
                    self.bytes.pop()  # common here: the next rarest from the next piece on
                    break
        return data.find(needle, start, length) >= 0


def context_from_end_of(open_root: Callable[[], SafeDir], path: str, signature: Signature,
                        cell_id: str | None, max_tokens: int) -> NotebookContext | None:
    """The context of ``cell_id`` in version ``signature`` of the notebook ``path``, read from the
    file's end (:data:`TAIL_READS`); None when the end cannot tell it, or the file is not that
    version any more: the caller reads the whole file, which names any problem.

    The file is opened under ``open_root()`` by :class:`SafeDir`'s rules (no link followed), and
    its version is checked on the open descriptor before and after each read.  Blocking: call it
    on a worker thread.
    """
    size = signature[2]
    if size <= TAIL_FROM or not cell_id:
        return None
    quoted = json.dumps(cell_id).encode()
    wanted = b'"id": ' + quoted  # how nbformat writes the calling cell's id
    scanned = False  # the file before the end read holds no quoted id
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
                    if wanted in end:  # saved near the bottom: the cells above it
                        anchor: str | None = cell_id
                    elif _PLAIN_ID.fullmatch(cell_id) and not _POSITIONAL.fullmatch(cell_id) \
                            and not _Search(quoted, end, len(end)).within(end, len(end)):
                        anchor = None  # further up, or in no cell
                    else:  # another layout, or named in the end as something else: the whole read
                        return None
                    built = _built(head, end, signature, path, cell_id, anchor, max_tokens)
                    if built is False:
                        return None
                    if anchor is None and not scanned:  # before a larger end: a cell further up needs none
                        if may_occur_before(fd, quoted, size - len(end)) or signature_of(os.fstat(fd)) != signature:
                            return None  # in the file after all (or it changed): the whole read decides
                        scanned = True
                    if built is not None:
                        return built
            finally:
                os.close(fd)
    except (UnsafePath, OSError, UserError):  # the root or the file cannot be opened: the whole read says why
        return None
    return None


def _built(head: bytes, end: bytes, signature: Signature, path: str, cell_id: str, anchor: str | None,
           max_tokens: int) -> NotebookContext | Literal[False] | None:
    """The context of ``cell_id`` from the cells of ``end``: the cells above ``anchor``, or all of
    them (None: the caller then proves no earlier cell is ``cell_id``); None when ``end`` holds
    too few of them (read more); False when it cannot tell (another layout, cells without ids, a
    cell of the end named ``cell_id`` by an escaped spelling)."""
    from deerflow.notebooks.digest import NotebookDigest, context_from_end

    cells = cells_from_end(head, end)
    if cells is None:
        return False
    if not cells:
        return None
    digest = NotebookDigest.from_light(cells, signature, magic=[])
    if anchor is None and cell_id in digest.known:
        return False
    return context_from_end(digest, path, anchor, max_tokens)
