"""DeerFlow's JupyterLab extension (``labextension/``) in a real browser against a real ``jupyter lab``.

The lab finds the committed build as the wheel installs it (``JUPYTER_PATH`` on
``extension/jupyter-data``, which holds ``labextensions/deerflow-jupyterlab`` and the DeerFlow
kernelspec).  One test per feature: the Launcher's two DeerFlow cards, the open notebook as the
chat's context, ``%%deerflow`` cells highlighted as a prompt, and ``@De`` completing to
``@DeerFlow``.  Each waits on JupyterLab's own state; the screenshots go to the docs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import nbformat
import pytest

from fixtures.browser import (
    LAB_ARGS,
    OUTPUT,
    browser_page,
    docs_screenshot,
    quiet_lab_env,
    save_failure,
    wait_for_lab,
    wait_for_notebook_kernel,
)
from fixtures.jupyter_process import running_jupyter

pytestmark = pytest.mark.integration
JUPYTER_DATA = Path(__file__).resolve().parents[2] / "extension" / "jupyter-data"
PERSONA_ID = "jupyter-ai-personas::deerflow_jupyter::DeerFlowPersona"
PROMPT_MIMETYPE = "text/x-ipythongfm"  # labextension/src/magicCells.ts
CHAT_BOX = ".jp-chat-input-container textarea[role=combobox]"
CELLS = "Array.from(window.jupyterapp.shell.currentWidget.context.model.cells)"  # the open notebook's cell models

ANSWER = """
models:
  - name: scripted
    use: deerflow.models.scripted:ScriptedChatModel
    script: |
      turns:
        - "Hello from DeerFlow."
"""

# The notebook's cells reach the model only as the context of the chat message.
READS_NOTEBOOK = """
models:
  - name: scripted
    use: deerflow.models.scripted:ScriptedChatModel
    script: |
      turns:
        - expect: "answer = 41 + 1"
          text: "Your notebook adds 41 and 1."
"""


def _notebook(*cells: tuple[str, str]) -> str:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(src) if kind == "code" else nbformat.v4.new_markdown_cell(src)
                for kind, src in cells]
    return nbformat.writes(nb)


@contextmanager
def lab_page(tmp_path: Path, config_text: str, *, files: dict[str, str] | None = None,
             open_path: str = "", base_url: str = "/") -> Iterator[tuple[Any, Any, Path]]:
    """A ``jupyter lab`` (on ``base_url``) with the built extension and DeerFlow on ``config_text``, ``files``
    in its root, and a page on it (on ``open_path`` when given), restored: ``(lab, page, root)``."""
    OUTPUT.mkdir(parents=True, exist_ok=True)
    root = tmp_path / "lab"
    root.mkdir()
    for name, text in (files or {}).items():
        (root / name).write_text(text)
    config = tmp_path / "config.yaml"
    config.write_text(config_text)
    env = {"DEERFLOW_HOME": str(tmp_path / "home"), "DEERFLOW_CONFIG": str(config), "OPENAI_API_KEY": "",
           "JUPYTER_PATH": str(JUPYTER_DATA), **quiet_lab_env(tmp_path)}
    with running_jupyter(root, app="lab", env=env, args=LAB_ARGS, timeout=120, base_url=base_url) as lab, \
            browser_page() as page:
        try:
            page.set_default_timeout(90_000)
            where = f"lab/tree/{open_path}" if open_path else "lab"
            page.goto(f"{lab.url}{where}?reset&token={lab.token}")
            wait_for_lab(page)
            yield lab, page, root
        except Exception:
            save_failure(page, lab.log, f"labext-failure-{tmp_path.name}")
            raise


def open_launcher(page: Any) -> Any:
    page.evaluate("() => window.jupyterapp.commands.execute('launcher:create')")
    section = page.locator(".jp-Launcher-section", has_text="DeerFlow chat")
    section.wait_for()
    return section


def open_deerflow_chat(page: Any) -> Any:
    """A new chat from the Launcher's DeerFlow chat card, once DeerFlow is the picked persona: its input."""
    open_launcher(page).locator(".jp-LauncherCard", has_text="DeerFlow chat").click()
    box = page.locator(CHAT_BOX)
    box.wait_for()
    page.locator(".jp-jai-personaControls-persona", has_text="DeerFlow").wait_for()
    return box


def current_path(page: Any) -> str | None:
    return page.evaluate("() => window.jupyterapp.shell.currentWidget?.context?.path ?? null")


def test_the_launcher_cards_open_a_deerflow_chat_and_the_quickstart_notebook(tmp_path: Path):
    # under a base URL, as behind JupyterHub: the card's request must carry it
    with lab_page(tmp_path, ANSWER, base_url="/user/ada/") as (lab, page, root):
        assert lab.url.endswith("/user/ada/")
        section = open_launcher(page)
        assert section.locator(".jp-LauncherCard-label").all_inner_texts() == ["DeerFlow chat", "DeerFlow notebook"]
        docs_screenshot(page, "launcher-deerflow")

        section.locator(".jp-LauncherCard", has_text="DeerFlow notebook").click()
        page.wait_for_function("() => window.jupyterapp.shell.currentWidget?.context?.path?.endsWith('.ipynb')")
        assert current_path(page) == "deerflow-quickstart/01_research_quickstart.ipynb"
        assert (root / "deerflow-quickstart" / "offline-config.yaml").is_file()
        page.locator(".jp-Notebook .jp-Cell").first.wait_for()
        # the route the card POSTs to: JSON for the card (a GET copies nothing: test_quickstart_route.py)
        answer = httpx.post(f"{lab.api}/quickstart", headers={**lab.headers, "Accept": "application/json"}, timeout=30)
        assert answer.json() == {"path": "deerflow-quickstart/01_research_quickstart.ipynb"}

        box = open_deerflow_chat(page)
        page.locator(".jp-chat-messages-container").get_by_text("is an agent with its own sandbox").wait_for()
        assert current_path(page) == "untitled.chat"
        box.fill("Hello?")
        box.press("Enter")
        page.locator(".jp-chat-messages-container").get_by_text("Hello from DeerFlow.").wait_for()


def test_a_chat_message_carries_the_notebook_in_focus_as_context(tmp_path: Path):
    work = _notebook(("markdown", "# Sums"), ("code", "answer = 41"))
    with lab_page(tmp_path, READS_NOTEBOOK, files={"work.ipynb": work}, open_path="work.ipynb") as (_lab, page, root):
        page.locator(".jp-Notebook .jp-Cell").first.wait_for()
        # an edit not saved yet: the message is sent with the notebook as the user sees it
        page.wait_for_function(f"() => {CELLS}.length === 2")
        page.evaluate(f"() => {CELLS}[1].sharedModel.setSource('answer = 41 + 1')")
        page.wait_for_function("() => window.jupyterapp.shell.currentWidget.context.model.dirty")
        box = open_deerflow_chat(page)  # the chat takes the focus; the notebook stays the one last in focus
        box.fill("What does my notebook compute?")
        box.press("Enter")
        chat = page.locator(".jp-chat-messages-container")
        chat.get_by_text("Your notebook adds 41 and 1.").wait_for()  # the model saw the cells (its `expect`)
        chat.get_by_text("context: 2 cells of work.ipynb").first.wait_for()  # the user is told what was given
        chat.locator(".jp-chat-attachment", has_text="work.ipynb").first.wait_for()  # shown on the message
        chat.get_by_text("Run finished").wait_for()
        docs_screenshot(page, "chat-notebook-context")

        saved = json.loads((root / "untitled.chat").read_text())
        attached = [saved["attachments"][a] for m in saved["messages"] for a in m.get("attachments") or []]
        assert [(a["type"], a["value"]) for a in attached] == [("notebook", "work.ipynb")]
        assert nbformat.read(root / "work.ipynb", as_version=4).cells[1].source == "answer = 41 + 1"


def test_a_deerflow_cell_is_highlighted_as_a_prompt_whatever_the_kernel_sets(tmp_path: Path):
    work = _notebook(("code", "%%deerflow --with sales\nWhich region grew fastest in {year}? Answer with a **short** table."),
                     ("code", "year = 2024"))
    with lab_page(tmp_path, ANSWER, files={"work.ipynb": work}, open_path="work.ipynb") as (_lab, page, _root):
        page.locator(".jp-Notebook .jp-Cell").first.wait_for()
        wait_for_notebook_kernel(page)  # the kernel's language info has set the notebook's mime types
        mimetypes = f"() => {CELLS}.map(cell => cell.mimeType)"
        assert page.evaluate(mimetypes) == [PROMPT_MIMETYPE, "text/x-ipython"]
        # what the editors highlight (CodeMirror names its language on the content element)
        editors = "() => [...document.querySelectorAll('.jp-Notebook .jp-Cell .cm-content')].map(e => e.dataset.language)"
        prompt, python = page.evaluate(editors)
        assert prompt != python and python == "python"
        docs_screenshot(page.locator(".jp-Notebook .jp-Cell").first, "notebook-deerflow-cell")

        # new language info (as a kernel reports it): the notebook sets every code cell's mime type again
        page.evaluate("""() => window.jupyterapp.shell.currentWidget.context.model.setMetadata(
            'language_info', {name: 'python', codemirror_mode: 'python'})""")
        page.wait_for_function(f"() => ({mimetypes})().join() === '{PROMPT_MIMETYPE},text/x-python'")
        page.wait_for_function(f"() => ({editors})().join() === '{prompt},python'")
        # typing the magic into a cell makes it a prompt; removing it makes it code again
        page.evaluate(f"""() => {{
            const [first, second] = {CELLS};
            second.sharedModel.setSource('%%deerflow\\nAnd now?');
            first.sharedModel.setSource('print(1)');
        }}""")
        page.wait_for_function(f"() => ({mimetypes})().join() === 'text/x-python,{PROMPT_MIMETYPE}'")
        page.wait_for_function(f"() => ({editors})().join() === 'python,{prompt}'")


def test_at_de_completes_to_at_deerflow_and_the_message_mentions_it(tmp_path: Path):
    with lab_page(tmp_path, ANSWER) as (_lab, page, root):
        box = open_deerflow_chat(page)
        box.click()
        box.press_sequentially("@De", delay=100)
        option = page.locator("[role=option]", has_text="@DeerFlow")
        option.wait_for()
        docs_screenshot(page, "chat-mention-completion")  # the menu is a popup outside the input's element
        option.click()
        assert box.input_value() == "@DeerFlow "
        box.press_sequentially("hello", delay=20)
        box.press("Enter")
        chat = page.locator(".jp-chat-messages-container")
        chat.get_by_text("Hello from DeerFlow.").wait_for()
        chat.get_by_text("Run finished").wait_for()
        sent = [m for m in json.loads((root / "untitled.chat").read_text())["messages"] if "@DeerFlow" in m["body"]]
        assert [m.get("mentions") for m in sent] == [[PERSONA_ID]]
        # answered once: the picked persona and the mention do not both start a run
        assert chat.get_by_text("Hello from DeerFlow.").count() == 1
