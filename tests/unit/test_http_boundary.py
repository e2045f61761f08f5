"""The HTTP boundary's pure parts: JSON bodies, ids, download names, and claiming a thread id."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest
from tornado.web import HTTPError

from deerflow.errors import Conflict, NotFoundError, ThreadBusy, ToolFailure, UserError
from deerflow.notebooks.access import NotebookError
from deerflow.persistence.store import MetadataStore, ThreadIdUnavailable
from deerflow_jupyter.handlers.base import (
    MAX_JSON_DEPTH,
    check_path_ids,
    error_response,
    parse_json,
)
from deerflow_jupyter.handlers.files import content_disposition


@pytest.mark.parametrize(("raw", "needle"), [
    (b"[" * 100_000 + b"]" * 100_000, "nested deeper"),
    (b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1), "nested deeper"),
    (b'{"a": "\xff"}', "not UTF-8"),
    (b"{", "not valid JSON"),
])
def test_bad_json_bodies_are_400_with_one_line(raw: bytes, needle: str):
    with pytest.raises(HTTPError) as info:
        parse_json(raw)
    status, detail = error_response(info.value)
    assert status == 400 and needle in detail and "\n" not in detail


def test_json_at_the_depth_cap_is_accepted():
    nested = b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH
    assert parse_json(nested) is not None


@pytest.mark.parametrize("bad", ["..", "../../etc", "a..b", "", "a" * 129, "x\r\ny", "-x", "a/b"])
def test_malformed_thread_ids_in_the_url_are_unknown_threads(bad: str):
    with pytest.raises(NotFoundError) as info:
        check_path_ids({"thread_id": bad})
    status, detail = error_response(info.value)
    assert status == 404 and detail.startswith("unknown thread") and len(detail) < 100


def test_unexpected_errors_say_nothing_of_their_internals():
    status, detail = error_response(RuntimeError("/secret/path at line 3"))
    assert status == 500 and "secret" not in detail


@pytest.mark.parametrize("name", ["报告.html", "a\r\nSet-Cookie: x=1.html", 'q"u\\o;te.txt', "%41.bin", "n" * 1000, ""])
def test_content_disposition_carries_any_name_in_one_safe_header(name: str):
    value = content_disposition(name)
    assert all(" " <= ch <= "~" for ch in value)  # printable ASCII: no CR/LF, nothing to re-encode
    match = re.fullmatch(r'attachment; filename="([^"\\]*)"; filename\*=UTF-8\'\'(\S*)', value)
    assert match, value
    assert unquote(match.group(2), errors="strict") == name
    assert match.group(1)  # a fallback for clients without filename*


def test_a_thread_id_is_claimed_once_whoever_asks(tmp_path: Path):
    store = MetadataStore(tmp_path / "deerflow.db")
    store.create_thread("shared", "alice", {"k": 1})
    for user in ("bob", "alice"):
        with pytest.raises(ThreadIdUnavailable) as info:
            store.create_thread("shared", user, {"k": 2})
        assert str(info.value) == "unknown thread 'shared'"
    assert store.get_thread("shared", "bob") is None
    assert store.get_thread("shared", "alice").metadata == {"k": 1}


@pytest.mark.parametrize(("error", "status"), [
    (Conflict("thread id 'x' is not available"), 409),
    (ThreadBusy("t1", run_id="r1"), 409),
    (NotebookError("proposal p1 is already applied", code="conflict"), 409),
    (NotebookError("the user's notebooks are not reachable", code="unavailable"), 409),
    (NotebookError("no notebook nb.ipynb", code="not_found"), 404),
    (NotebookError("bad operation", code="invalid_operation"), 422),
    (ToolFailure("this browser session belongs to another user.", code="forbidden"), 403),
    (ToolFailure("someone else is watching", code="live_view_busy"), 409),
    (ToolFailure("bad argument", code="invalid_argument"), 422),
    (UserError("the prompt is empty"), 422),
])
def test_typed_errors_map_to_their_status_in_one_place(error: Exception, status: int):
    assert error_response(error) == (status, str(error) if not isinstance(error, ToolFailure) else error.message)
