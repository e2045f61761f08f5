"""Rich cell outputs become workspace files; errors become short, host-path-free summaries."""

from __future__ import annotations

import base64
from pathlib import Path

from nbformat.v4 import new_output

from deerflow.sandbox.kernels.cell_output import render_outputs, truncate_middle
from fixtures.hang_guard import runs_to_the_end

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def _identity(text: str) -> str:
    return text


def test_png_is_saved_and_named_by_virtual_path(tmp_path: Path) -> None:
    figure = new_output(
        "display_data",
        data={
            "image/png": base64.b64encode(PNG).decode(),
            "text/plain": "<Figure size 640x480 with 1 Axes>",
        },
    )
    rendered = render_outputs([figure], workspace=tmp_path, cell_number=4, mask=_identity)
    assert rendered.files == ("/mnt/user-data/workspace/figures/cell-4-1.png",)
    assert (tmp_path / "figures" / "cell-4-1.png").read_bytes() == PNG
    assert "/mnt/user-data/workspace/figures/cell-4-1.png" in rendered.text
    assert "<Figure" not in rendered.text


def test_html_without_text_form_is_saved_but_dataframe_text_is_shown(tmp_path: Path) -> None:
    html_only = new_output(
        "display_data",
        data={"text/html": "<b>hi</b>", "text/plain": "<IPython.core.display.HTML object>"},
    )
    frame = new_output(
        "execute_result",
        data={"text/html": "<table>...</table>", "text/plain": "   a\n0  1\n1  2"},
        execution_count=3,
    )
    rendered = render_outputs([html_only, frame], workspace=tmp_path, cell_number=7, mask=_identity)
    assert rendered.files == ("/mnt/user-data/workspace/html/cell-7-1.html",)
    assert (tmp_path / "html" / "cell-7-1.html").read_text() == "<b>hi</b>"
    assert "   a\n0  1\n1  2" in rendered.text


def test_error_summary_is_short_and_hides_host_paths(tmp_path: Path) -> None:
    host_ws = str(tmp_path / "ws")
    error = new_output(
        "error",
        ename="FileNotFoundError",
        evalue=f"[Errno 2] No such file or directory: '{host_ws}/data.csv'",
        traceback=[
            "\x1b[31m-----\x1b[39m",
            "\x1b[31mFileNotFoundError\x1b[39m    Traceback (most recent call last)",
            "\x1b[36mCell In[2], line 1\x1b[39m\n\x1b[32m----> 1\x1b[39m pd.read_csv('data.csv')\n",
            "File \x1b[32m/root/.venv/lib/python3.11/site-packages/pandas/io/common.py:873\x1b[39m, "
            "in \x1b[36mget_handle\x1b[39m(path, mode)\n\x1b[32m--> 873\x1b[39m handle = open(path)\n",
            f"\x1b[31mFileNotFoundError\x1b[39m: [Errno 2] No such file or directory: '{host_ws}/data.csv'",
        ],
    )
    rendered = render_outputs(
        [error], workspace=tmp_path, cell_number=2,
        mask=lambda text: text.replace(host_ws, "/mnt/user-data/workspace"),
    )  # fmt: skip
    assert (
        rendered.error
        == "FileNotFoundError: [Errno 2] No such file or directory: '/mnt/user-data/workspace/data.csv'"
    )
    assert "Cell In[2], line 1: pd.read_csv('data.csv')" in rendered.text
    assert "File pandas/io/common.py:873, in get_handle: handle = open(path)" in rendered.text
    assert "/root" not in rendered.text and host_ws not in rendered.text
    assert "\x1b[" not in rendered.text


def test_a_hostile_traceback_is_summarized_in_linear_time(tmp_path: Path) -> None:
    """The sandboxed code writes its own traceback (IPython's ``set_custom_exc`` sends any text):
    a frame header of 200k ``, in f(`` took the old signature pattern hours, holding the GIL."""
    assert runs_to_the_end(f"""
        from nbformat.v4 import new_output
        from deerflow.sandbox.kernels.cell_output import render_outputs
        for header in ("File a.py:1" + ", in f(" * 200_000, "Cell In[1], line 1" + ", in f(" * 200_000 + ")x"):
            error = new_output("error", ename="E", evalue="v", traceback=[header + "\\n--> 1 x()\\n"])
            render_outputs([error], workspace={str(tmp_path)!r}, cell_number=1, mask=str)
    """)
    error = new_output("error", ename="E", evalue="v",
                       traceback=["File a.py:3, in f(a=1, b=g(2))\n--> 3 x()\n", "File b.py:1, in <module>(x\n"])
    text = render_outputs([error], workspace=tmp_path, cell_number=1, mask=str).text
    assert "File a.py:3, in f: x()" in text and "File b.py:1, in <module>(x" in text


def test_streams_are_kept_in_order(tmp_path: Path) -> None:
    outputs = [
        new_output("stream", name="stdout", text="one\n"),
        new_output("execute_result", data={"text/plain": "42"}, execution_count=1),
    ]
    rendered = render_outputs(outputs, workspace=tmp_path, cell_number=1, mask=_identity)
    assert rendered.text == "one\n42"
    assert rendered.error is None


def test_truncate_middle_keeps_both_ends() -> None:
    text, truncated = truncate_middle("A" * 50 + "B" * 50, 20)
    assert truncated
    assert text.startswith("A" * 10) and text.endswith("B" * 10)
    assert truncate_middle("short", 20) == ("short", False)
