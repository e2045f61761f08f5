"""DeerFlow in JupyterLab's chat panel, in a real browser against a real `jupyter lab`.

A new chat from the launcher has DeerFlow picked (the installed server config makes it the
default persona); the prompt streams a reply, a PNG written by the python tool is rendered
inline, a clarification is answered with a message, and the run finishes in the same thread.
The chat's stop button cancels a run, and a message sent meanwhile is refused, not queued.
Screenshots go to ``test-output/`` (or ``$DEERFLOW_TEST_OUTPUT``).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import httpx
import pytest

from fixtures.browser import (
    LAB_ARGS,
    OUTPUT,
    browser_page,
    docs_screenshot,
    quiet_lab_env,
    save_failure,
    wait_for_lab,
)
from fixtures.jupyter_process import running_jupyter

pytestmark = pytest.mark.integration
KERNELS = Path(__file__).resolve().parents[2] / "extension" / "jupyter-data"

# A 48x32 PNG, one flat colour (written by the agent's python tool, decoded by the browser).
PNG_B64 = ("iVBORw0KGgoAAAANSUhEUgAAADAAAAAgCAIAAADbtmxLAAAAOElEQVR4nO3OMREAMAgEMJxgDA/1v9UFz5C7CEj1m1MqPhASEhJK"
           "D4SEhITSAyEhIaH0QEhIaNkHTbt8TBzVr14AAAAASUVORK5CYII=")
CONFIG = f"""
models:
  - name: scripted
    use: deerflow.models.scripted:ScriptedChatModel
    script: |
      turns:
        - text: "Let me draw a tiny chart for you."
          tool_calls:
            - name: python
              args:
                code: |
                  import base64
                  data = base64.b64decode("{PNG_B64}")
                  open("/mnt/user-data/outputs/chart.png", "wb").write(data)
        - tool_calls:
            - name: present_files
              args: {{filepaths: [/mnt/user-data/outputs/chart.png]}}
        - tool_calls:
            - name: ask_clarification
              args:
                question: "Which colour should the next chart use?"
                options: [red, blue]
        - "Noted: the next chart will be blue."
"""


SLOW = """
models:
  - name: scripted
    use: deerflow.models.scripted:ScriptedChatModel
    script: |
      turns:
        - text: "Starting the slow part."
          tool_calls:
            - name: wait
              args: {seconds: 300}
        - "never reached"
tools:
  - {name: wait, group: test, use: "fixtures.slow_tools:wait"}
"""


ATTACHED = """
models:
  - name: scripted
    use: deerflow.models.scripted:ScriptedChatModel
    script: |
      turns:
        - expect: /mnt/user-data/uploads/sales.csv
          tool_calls: [{name: read_file, args: {path: /mnt/user-data/uploads/sales.csv}}]
        - expect: "Oslo,3"
          text: "The attached sales.csv has rows for Oslo and Lima."
"""


@contextmanager
def lab_with_chat(tmp_path: Path, config_text: str, files: dict[str, str] | None = None
                  ) -> Iterator[tuple[Any, Any, Any, Path]]:
    """A `jupyter lab` on ``config_text`` (``files`` in its root) and a page on a new chat:
    (lab, page, input box, root dir)."""
    OUTPUT.mkdir(parents=True, exist_ok=True)
    work = tmp_path / "lab"
    work.mkdir()
    for name, text in (files or {}).items():
        (work / name).write_text(text)
    config = tmp_path / "config.yaml"
    config.write_text(config_text)
    env = {"DEERFLOW_HOME": str(tmp_path / "home"), "DEERFLOW_CONFIG": str(config), "OPENAI_API_KEY": "",
           "JUPYTER_PATH": str(KERNELS),  # the DeerFlow kernelspec, as the wheel installs it
           **quiet_lab_env(tmp_path)}  # no "get news?" toast over the chat input
    with running_jupyter(work, app="lab", env=env, args=LAB_ARGS, timeout=120) as lab, browser_page() as page:
        try:
            page.set_default_timeout(90_000)
            page.goto(f"{lab.url}lab?reset&token={lab.token}")
            wait_for_lab(page)  # restored, no dialog over the launcher
            # jupyterlab-chat's own card, not our "DeerFlow chat" (has_text alone is a substring match)
            chat_label = page.locator(".jp-LauncherCard-label", has_text=re.compile(r"^\s*Chat\s*$"))
            page.locator(".jp-LauncherCard", has=chat_label).click()
            box = page.locator(".jp-chat-input-container textarea[role=combobox]")
            box.wait_for()
            # a message sent before the input has picked its persona reaches nobody: wait for DeerFlow
            page.locator(".jp-jai-personaControls-persona", has_text="DeerFlow").wait_for()
            # and for the persona's welcome: posted once the server side has it listening (under
            # jupyter-collaboration the chat's room loads first, and a message before that is lost)
            page.locator(".jp-chat-messages-container").get_by_text("is an agent with its own sandbox").wait_for()
            yield lab, page, box, work
        except Exception:
            save_failure(page, lab.log, f"chat-failure-{tmp_path.name}")
            raise


TABLE_ROWS = 30
TABLE = f"""
models:
  - name: scripted
    use: deerflow.models.scripted:ScriptedChatModel
    script: |
      turns:
        - text: "Here are the sales."
          tool_calls:
            - name: python
              args:
                code: |
                  rows = ["city,n"] + [f"City{{i}},{{i}}" for i in range({TABLE_ROWS})]
                  open("/mnt/user-data/outputs/sales.csv", "w").write("\\n".join(rows) + "\\n")
        - tool_calls:
            - name: present_files
              args: {{filepaths: [/mnt/user-data/outputs/sales.csv]}}
        - "That is the table."
"""


def chat_thread(root: Path) -> str:
    """The DeerFlow thread the chat file remembers."""
    return json.loads((root / "untitled.chat").read_text())["metadata"]["deerflow_thread_id"]


def send(box: Any, text: str) -> None:
    box.fill(text)
    box.press("Enter")


def test_deerflow_in_the_jupyterlab_chat(tmp_path: Path):
    with lab_with_chat(tmp_path, CONFIG) as (lab, page, box, root):
        # the installed config makes DeerFlow the persona a new chat talks to
        assert page.locator(".jp-jai-personaControls-persona").inner_text() == "DeerFlow"
        send(box, "@DeerFlow Please draw me a tiny chart")
        chat = page.locator(".jp-chat-messages-container")
        chat.get_by_text("Let me draw a tiny chart for you.").wait_for()
        image = chat.locator(".jp-chat-rendered-message img").first
        image.wait_for()
        assert image.evaluate("img => [img.naturalWidth, img.naturalHeight]") == [48, 32]
        chat.get_by_text("Which colour should the next chart use?").wait_for()
        chat.get_by_text("Waiting for your answer").wait_for()
        page.screenshot(path=str(OUTPUT / "chat-clarification.png"), full_page=True)

        send(box, "2")  # the second option
        chat.get_by_text("Noted: the next chart will be blue.").wait_for()
        chat.get_by_text("Run finished").wait_for()
        # the chat scrolls itself as messages arrive, and a screenshot taken mid-scroll showed the middle
        # of the conversation: the last line is brought into view first
        chat.get_by_text("Run finished").scroll_into_view_if_needed()
        page.screenshot(path=str(OUTPUT / "chat-finished.png"), full_page=True)
        docs_screenshot(page, "chat-persona")

        # the caption links to the authenticated artifact endpoint, which serves the PNG
        href = chat.locator("a", has_text="chart.png").first.get_attribute("href")
        assert href is not None and "/deerflow/api/threads/" in href
        assert page.request.get(urljoin(lab.url, href)).body() == base64.b64decode(PNG_B64)

        # the chat file remembers its thread; the thread holds the prompt and the chosen option
        state = httpx.get(f"{lab.api}/threads/{chat_thread(root)}/state", headers=lab.headers, timeout=30).json()
        humans = [m["content"] for m in state["values"]["messages"] if m["type"] == "human"]
        assert humans == ["Please draw me a tiny chart", "blue"]


def test_the_stop_button_cancels_the_run_and_a_second_message_is_refused(tmp_path: Path):
    with lab_with_chat(tmp_path, SLOW) as (lab, page, box, root):
        send(box, "Do the slow thing")
        chat = page.locator(".jp-chat-messages-container")
        chat.get_by_text("Starting the slow part.").wait_for()
        chat.get_by_text("wait").first.wait_for()
        send(box, "And one more thing")
        chat.get_by_text("was not sent to the agent").wait_for()
        stop = page.locator(".jp-jai-stopButton")
        page.wait_for_function("button => !button.disabled", arg=stop.element_handle())
        stop.click()
        chat.get_by_text("The run was cancelled").wait_for()
        page.screenshot(path=str(OUTPUT / "chat-stopped.png"), full_page=True)
        runs = httpx.get(f"{lab.api}/threads/{chat_thread(root)}/runs", headers=lab.headers, timeout=30).json()
        # one run (the refused message never started one), cancelled: "interrupted" in LangGraph's words
        assert [r["status"] for r in runs] == ["interrupted"]


def test_a_file_attached_in_the_chat_becomes_an_upload_the_agent_reads(tmp_path: Path):
    table = "city,n\nOslo,3\nLima,5\n"
    with lab_with_chat(tmp_path, ATTACHED, files={"sales.csv": table}) as (lab, page, box, root):
        page.locator(".jp-chat-attach-button").click()  # JupyterLab's file dialog, on the server's files
        dialog = page.locator(".jp-Dialog")
        dialog.locator(".jp-DirListing-item", has_text="sales.csv").click()
        dialog.locator("button.jp-mod-accept").click()
        page.locator(".jp-chat-attachment", has_text="sales.csv").wait_for()
        send(box, "@DeerFlow What is in the attached file?")
        chat = page.locator(".jp-chat-messages-container")
        chat.get_by_text("The attached sales.csv has rows for Oslo and Lima.").wait_for()
        chat.get_by_text("Run finished").wait_for()
        page.screenshot(path=str(OUTPUT / "chat-attachment.png"), full_page=True)
        uploads = httpx.get(f"{lab.api}/threads/{chat_thread(root)}/uploads", headers=lab.headers, timeout=30)
        assert [(f["name"], f["size"]) for f in uploads.json()] == [("sales.csv", len(table))]


def test_a_new_chat_welcomes_completes_slash_commands_and_shows_a_csv_as_a_table(tmp_path: Path):
    with lab_with_chat(tmp_path, TABLE) as (lab, page, box, _root):
        chat = page.locator(".jp-chat-messages-container")
        chat.get_by_text("is an agent with its own sandbox").wait_for()  # the welcome, before any message
        assert "/new" in chat.inner_text()
        page.screenshot(path=str(OUTPUT / "chat-welcome.png"), full_page=True)

        box.click()
        box.press_sequentially("/ne", delay=100)  # the persona's commands, through the chat input's own completion
        option = page.locator("[role=option]", has_text="/new")
        option.wait_for()
        page.screenshot(path=str(OUTPUT / "chat-slash-completion.png"), full_page=True)
        option.click()
        assert box.input_value().strip() == "/new"
        box.press("Enter")
        chat.get_by_text("New thread").wait_for()

        send(box, "Show me the sales table")
        chat.get_by_text("That is the table.").wait_for()
        chat.get_by_text("Run finished").wait_for()
        table = chat.locator(".jp-chat-rendered-message table").first
        table.wait_for()
        assert table.locator("th").all_inner_texts() == ["city", "n"]
        assert table.locator("tbody tr").count() == 20  # bounded, with a link to the rest
        whole = chat.locator("a", has_text="the whole file").first
        href = whole.get_attribute("href")
        assert href is not None and "/deerflow/api/threads/" in href and href.endswith("/sales.csv")
        assert page.request.get(urljoin(lab.url, href)).text().count("City") == TABLE_ROWS
        table.scroll_into_view_if_needed()
        page.screenshot(path=str(OUTPUT / "chat-csv-table.png"), full_page=True)

        # the Launcher has a DeerFlow card (the kernelspec; our extension's cards: test_labext_browser.py)
        page.locator('[data-command="launcher:create"]').first.click()
        card = page.locator(".jp-LauncherCard", has_text="DeerFlow").first
        card.wait_for()
        page.screenshot(path=str(OUTPUT / "launcher-deerflow.png"), full_page=True)
