"""The executed-notebook text helpers read one ``print`` the same however the kernel flushed it."""

from __future__ import annotations

import nbformat
from nbformat.v4 import new_code_cell, new_notebook, new_output

from fixtures.notebook_text import outputs, texts


def test_a_print_flushed_in_two_pieces_reads_as_one_line_and_the_notebook_is_unchanged() -> None:
    cell = new_code_cell("print(status, '-', text)", outputs=[
        new_output("stream", name="stdout", text="error - Error: refused http://169.25"),
        new_output("stream", name="stdout", text="4.169.254/: cloud metadata address\n"),
        new_output("stream", name="stderr", text="a warning\n"),
        new_output("display_data", data={"text/plain": "<Image>", "text/markdown": "**md**"}),
        new_output("stream", name="stdout", text="after\n"),
    ])
    nb = new_notebook(cells=[cell, new_code_cell("pass", outputs=[new_output("stream", name="stdout", text="x")])])
    before = nbformat.writes(nb)

    assert "error - Error: refused http://169.254.169.254/: cloud metadata address" in texts(nb)
    assert [o.output_type for o in outputs(nb)] == ["stream", "stream", "display_data", "stream", "stream"]
    assert texts(nb, markdown=False).endswith("<Image>\nafter\n\nx")  # cells never run into one another
    assert "**md**" in texts(nb) and "**md**" not in texts(nb, markdown=False)
    assert nbformat.writes(nb) == before
