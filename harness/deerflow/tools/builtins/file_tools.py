"""The file tools the model calls: ``ls``, ``read_file``, ``write_file``,
``str_replace``, ``glob``, ``grep``.

Each tool is a thin boundary over :mod:`deerflow.sandbox.files.fs_ops` (``glob`` and
``grep``: :mod:`deerflow.sandbox.files.search`):

1. build the thread's :class:`VirtualFS` from ``runtime.context`` (a
   :class:`RunContext`: ``paths``, and ``services.skills_root`` when skills
   are mounted) — nothing global, so one process can serve many threads;
2. run the operation, which returns a dataclass;
3. render it to text and mask every host path before the model sees it.

Errors the model can fix are raised as :class:`ToolFailure` (messages masked
too); ``OSError`` becomes one with its reason but never its file name, which is
a host path.  The read-before-write gate is always on here: reads record marks,
``write_file`` on an existing file and ``str_replace`` require a current one.

Tools carry their group in ``tool.metadata["group"]`` (``file:read`` or
``file:write``) so config can enable groups without a table of names.

Every call runs off the event loop on :mod:`deerflow.tools.offload`'s bounded
threads with a deadline (:data:`FILE_OP_DEADLINE_S`), under ``invoke`` and
``ainvoke`` alike: a path that blocks (a FIFO, a slow mount) costs the model a
``tool_timeout`` failure, never the server's loop or another thread's workers.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool

from deerflow.errors import ToolFailure
from deerflow.runtime.context import RunContext
from deerflow.runtime.services import services_of
from deerflow.sandbox.files import fs_ops, search
from deerflow.sandbox.files.read_marks import ReadMarks
from deerflow.sandbox.files.virtual_paths import VirtualFS
from deerflow.tools.offload import OFFLOADER, Offloader
from deerflow.tools.schema import function_tool

FILE_READ = "file:read"
FILE_WRITE = "file:write"
FILE_OP_DEADLINE_S = 30.0
"""How long one file tool call may take before the model is told it timed out."""
_WORKSPACE = "/mnt/user-data/workspace"


def thread_fs(runtime: ToolRuntime[Any, Any]) -> VirtualFS:
    """The :class:`VirtualFS` of the thread this tool call runs in."""
    ctx = runtime.context
    if not isinstance(ctx, RunContext):
        raise TypeError("file tools need a RunContext as runtime.context")
    ctx.paths.ensure()
    skills = ctx.services.skills_root
    if skills:
        ctx.paths.ready_skills_view()  # a thread's first view is built by its first file tool (off the loop)
    return VirtualFS(ctx.paths, skills_root=Path(skills) if skills else None)


@contextlib.contextmanager
def model_errors(vfs: VirtualFS) -> Iterator[None]:
    """Re-raise what went wrong as a masked :class:`ToolFailure`."""
    try:
        yield
    except ToolFailure as exc:
        raise ToolFailure(vfs.mask(exc.message), code=exc.code) from None
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ToolFailure(f"The file operation failed: {reason}.", code="io_error") from None


def tool_group(t: BaseTool) -> str:
    """The group a tool belongs to (``file:read``...), or ``""`` if it has none."""
    return str((t.metadata or {}).get("group", ""))


def _grouped(t: BaseTool, group: str) -> BaseTool:
    t.metadata = {**(t.metadata or {}), "group": group}
    return t


def _bounds(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Offloader, str]:
    """The offloader (``services.offloader`` or the process's) and the call's key."""
    runtime = kwargs.get("runtime") or next(a for a in args if isinstance(a, ToolRuntime))
    ctx = runtime.context
    return services_of(ctx).offloader or OFFLOADER, str(getattr(ctx, "thread_id", ""))


def offloaded_tool(fn: Callable[..., str]) -> BaseTool:
    """``fn`` as a tool whose body runs on a bounded thread with a deadline, sync or async.

    The name is ``fn``'s without ``_tool``; arguments and their descriptions
    come from its signature and docstring, as with ``@tool``.
    """
    name = fn.__name__.removesuffix("_tool")

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> str:
        offloader, key = _bounds(args, kwargs)
        return offloader.run(fn, *args, key=key, what=name, deadline=FILE_OP_DEADLINE_S, **kwargs)

    @functools.wraps(fn)
    async def arun(*args: Any, **kwargs: Any) -> str:
        offloader, key = _bounds(args, kwargs)
        return await offloader.arun(
            fn, *args, key=key, what=name, deadline=FILE_OP_DEADLINE_S, **kwargs
        )

    return function_tool(func=run, coroutine=arun, name=name, parse_docstring=True)


# -- rendering ------------------------------------------------------------------


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    if n < 1024:
        return f"{n} B"
    return f"{n / 1024:.1f} KB" if n < 1024 * 1024 else f"{n / 1024 / 1024:.1f} MB"


def render_listing(listing: fs_ops.Listing) -> str:
    """An indented tree: direct children relative to the listed path, then names."""
    base = listing.path.rstrip("/")
    lines = [base + "/"]
    for e in listing.entries:
        if e.depth == 1 and e.path.startswith(base + "/"):
            name = e.path[len(base) + 1 :]
        else:
            name = e.path.rsplit("/", 1)[-1]
        suffix = {"dir": "/", "symlink": " (symlink)"}.get(e.kind, f" ({_size(e.size)})")
        lines.append("  " * e.depth + name + suffix)
    if not listing.entries:
        lines.append("  (empty)")
    if listing.truncated:
        lines.append(
            f"[Listing stopped at {listing.limit} entries; ls a subdirectory "
            "or use glob to narrow it down.]"
        )
    return "\n".join(lines)


def render_file_text(ft: fs_ops.FileText) -> str:
    """The file's text, with a note when it is only part of the file."""
    if ft.total_lines == 0:
        return "(empty file)"
    if ft.start_line == 1 and ft.next_start_line is None and not ft.truncated:
        return ft.text
    note = f"[Lines {ft.start_line}-{ft.end_line} of {ft.total_lines}"
    if ft.truncated:
        note += "; output limit reached"
    if ft.next_start_line is not None:
        note += f". Call read_file with start_line={ft.next_start_line} to read on"
    return ft.text.rstrip("\n") + "\n\n" + note + ".]"


def render_glob(result: search.GlobResult) -> str:
    """One path per line."""
    if not result.matches:
        text = f"No paths under {result.path} match {result.pattern!r}."
    else:
        text = "\n".join(result.matches)
    if result.truncated:
        text += f"\n[Stopped at {result.limit} results; use a narrower pattern.]"
    if result.skipped_links:
        text += f"\n[{result.skipped_links} symlink(s) pointing outside the sandbox were skipped.]"
    if result.depth_limit is not None:
        text += (f"\n[Listing truncated at depth {result.depth_limit}: folders that deep under {result.path} "
                 "were not searched; glob a deeper path to go on.]")
    return text


def render_grep(result: search.GrepResult) -> str:
    """``path:line: text`` per match, then notes on what was skipped."""
    if result.matches:
        text = "\n".join(f"{m.path}:{m.line_number}: {m.line}" for m in result.matches)
    else:
        text = f"No matches for {result.pattern!r} in {result.files_searched} file(s)."
    notes = []
    if result.truncated:
        notes.append(f"stopped at {result.limit} matches; narrow the pattern or path")
    if result.skipped_binary:
        notes.append(f"{result.skipped_binary} binary file(s) skipped")
    if result.skipped_large:
        notes.append(
            f"{result.skipped_large} file(s) over {search.GREP_MAX_FILE_BYTES:,} bytes skipped"
        )
    if result.skipped_links:
        notes.append(f"{result.skipped_links} symlink(s) pointing outside the sandbox skipped")
    if result.depth_limit is not None:
        notes.append(f"listing truncated at depth {result.depth_limit}: files deeper under {result.path} "
                     "not searched; grep a deeper path to go on")
    return text + ("\n[" + "; ".join(notes) + ".]" if notes else "")


# -- tools ----------------------------------------------------------------------


def ls_tool(path: str, runtime: ToolRuntime[RunContext]) -> str:
    """List a directory two levels deep. Your files live under /mnt/user-data: uploads (the user's files, read-only), workspace (your scratch space), outputs (deliverables); /mnt/skills and /mnt/acp-workspace are read-only.

    Args:
        path: Absolute virtual path, e.g. /mnt/user-data/workspace or /mnt/user-data.
    """
    vfs = thread_fs(runtime)
    with model_errors(vfs):
        return vfs.mask(render_listing(fs_ops.ls(vfs, path)))


def read_file_tool(
    path: str, runtime: ToolRuntime[RunContext], start_line: int | None = None, end_line: int | None = None
) -> str:
    """Read a text file, optionally a range of lines. Long files are cut off with a note saying where to continue. You must read a file before changing it with write_file or str_replace.

    Args:
        path: Virtual path, e.g. /mnt/user-data/uploads/report.csv. Relative paths start at /mnt/user-data/workspace.
        start_line: First line to show, 1-based.
        end_line: Last line to show, inclusive.
    """
    vfs = thread_fs(runtime)
    with model_errors(vfs):
        ft = fs_ops.read_file(vfs, path, start_line, end_line, marks=ReadMarks(vfs.state_dir))
        return vfs.mask(render_file_text(ft))


def write_file_tool(path: str, content: str, runtime: ToolRuntime[RunContext], append: bool = False) -> str:
    """Create or overwrite a text file (parent directories are created), or append to it. Write to /mnt/user-data/workspace for intermediate files and /mnt/user-data/outputs for deliverables; uploads are read-only. To change an existing file, read it first.

    Args:
        path: Virtual path of the file.
        content: The full text to write (at most 1 MB per call; append the rest in further calls).
        append: Add to the end of the file instead of replacing it.
    """
    vfs = thread_fs(runtime)
    with model_errors(vfs):
        result = fs_ops.write_file(vfs, path, content, append, marks=ReadMarks(vfs.state_dir))
        verb = "Appended to" if result.appended else "Created" if result.created else "Overwrote"
        return vfs.mask(f"{verb} {result.path} ({result.bytes_written} bytes written).")


def str_replace_tool(
    path: str, old_str: str, new_str: str, runtime: ToolRuntime[RunContext], replace_all: bool = False
) -> str:
    """Replace text in a file you have read. old_str must match exactly once (whitespace included) unless replace_all is true.

    Args:
        path: Virtual path of the file.
        old_str: The exact text to replace; include enough context to make it unique.
        new_str: The replacement text.
        replace_all: Replace every occurrence instead of exactly one.
    """
    vfs = thread_fs(runtime)
    with model_errors(vfs):
        result = fs_ops.str_replace(
            vfs, path, old_str, new_str, replace_all, marks=ReadMarks(vfs.state_dir)
        )
        return vfs.mask(f"Replaced {result.replacements} occurrence(s) in {result.path}.")


def glob_tool(pattern: str, runtime: ToolRuntime[RunContext], path: str = _WORKSPACE) -> str:
    """Find files and directories by name pattern: * and ? within a name, ** across directories (e.g. **/*.csv). Directories end with /.

    Args:
        pattern: Glob relative to path, or an absolute one such as /mnt/user-data/**/*.md.
        path: Directory to search, default /mnt/user-data/workspace.
    """
    vfs = thread_fs(runtime)
    with model_errors(vfs):
        return vfs.mask(render_glob(search.glob(vfs, pattern, path)))


def grep_tool(
    pattern: str,
    runtime: ToolRuntime[RunContext],
    path: str = _WORKSPACE,
    glob: str | None = None,
    literal: bool = False,
    case_sensitive: bool = True,
) -> str:
    """Search text files for lines matching a regular expression; prints path:line: text. Binary files are skipped.

    Args:
        pattern: Regular expression in RE2 syntax (Python's, without backreferences or lookaround), or plain text with literal=true.
        path: File or directory to search, default /mnt/user-data/workspace.
        glob: Only search files matching this glob, e.g. *.py (matched against the file name unless it contains /).
        literal: Treat pattern as plain text.
        case_sensitive: Set false to ignore case.
    """
    vfs = thread_fs(runtime)
    with model_errors(vfs):
        result = search.grep(
            vfs, pattern, path, literal=literal, case_sensitive=case_sensitive, glob=glob
        )
        return vfs.mask(render_grep(result))


FILE_READ_TOOLS: list[BaseTool] = [
    _grouped(offloaded_tool(f), FILE_READ) for f in (ls_tool, read_file_tool, glob_tool, grep_tool)
]
FILE_WRITE_TOOLS: list[BaseTool] = [
    _grouped(offloaded_tool(f), FILE_WRITE) for f in (write_file_tool, str_replace_tool)
]
