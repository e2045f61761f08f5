"""The ``%deerflow`` line magic and ``%%deerflow`` cell magic.

    %%deerflow [--thread T | --new] [--model M] [--skill S] [--plan] [--subagents] [--no-memory] [--mode M]
               [--with VAR ...] [--record F | --replay F]
    PROMPT (the cell body; {var} is filled from the notebook)

    %deerflow [OPTIONS] PROMPT
    %deerflow reply "ANSWER" | --field NAME=VALUE ...
    %deerflow continue [--thread T] [MORE INSTRUCTIONS]   (resume an interrupted run)
    %deerflow upload PATH|VAR ...
    %deerflow artifacts [THREAD] | threads | skills | status | models | help
    %deerflow cells [--run R] [--print]   (the agent's python cells into a new cell below)
    %deerflow skills [list] | install PATH|VAR [--replace] | enable NAME | disable NAME
    %deerflow mcp [list | tools | reset]
    %deerflow memory [list | add TEXT | edit ID TEXT | forget ID | clear | export | changes | undo [RUN]
                      | prompt [TOPIC]]
    %deerflow apply [PROPOSAL] | discard [PROPOSAL] | undo [RUN]   (the agent's notebook edits)

User mistakes (bad options, unknown variables, unknown threads, a reply
that does not fit the question) are shown as one ``UsageError`` line.
"""

from __future__ import annotations

import re
import shlex
from os import PathLike
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand
from IPython.display import display

from deerflow.cli import parse_reply_args
from deerflow.errors import UserError
from deerflow_kernel.options import (
    SUBCOMMANDS,
    HelpShown,
    build_parser,
    parse_cell_line,
    split_line,
)
from deerflow_kernel.session import KernelSession

USAGE = (__doc__ or "").split("\n\n")[1]

HELP = """\
%%deerflow runs the DeerFlow agent on the cell body; %deerflow does the same for one line,
and its subcommands manage threads, files, skills and MCP servers.

Running the agent
  %%deerflow --new --model research        Start a new thread; {question} is filled from the notebook
  Research {question} and write a report.  (an undefined {name} is an error; write {{name}} for braces)

  %deerflow Summarise the report in 3 bullets      Continue the current thread in one line
  %%deerflow --with sales --plan                   Upload the DataFrame `sales`, plan with a todo list
  %%deerflow --no-context                          Do not send the cells above this one as context
  %%deerflow --no-memory                           This run neither sees nor adds to your memory
  result = _; result.load("report.md")             A cell's result; load an output (DataFrame, image, str)

Subcommands
  %deerflow reply "Upper Midwest"                  Answer the question the last run asked
  %deerflow reply --field region=Midwest --field depth=brief     ...a form, field by field
  %deerflow continue                               Resume the thread's interrupted run (server stop, Stop, a guard);
                                                   also: continue --thread T, or add instructions after it
  %deerflow upload data.csv                        Put a file (or a notebook variable) into the thread's uploads
  %deerflow artifacts                              Show the current thread's presented files (or: artifacts THREAD)
  %deerflow threads                                List your threads (* marks the current one)
  %deerflow skills                                 List skills; also: skills install PATH [--replace],
  %deerflow skills disable data-analysis             skills enable NAME, skills disable NAME
  %deerflow mcp tools                              MCP servers and their tools (mcp list | tools | reset)
  %deerflow memory list                            What DeerFlow remembers about you (add TEXT | edit ID TEXT |
                                                   forget ID | clear | export | prompt [TOPIC])
  %deerflow memory undo RUN                        Forget what a run taught memory (memory changes lists them)
  %deerflow apply                                  Apply the agent's proposed notebook edits (or: apply PROPOSAL)
  %deerflow discard                                Discard them instead (or: discard PROPOSAL)
  %deerflow undo                                   Restore the cells the last run's edits changed (or: undo RUN)
  %deerflow cells                                  The last run's python cells into a new cell below
  %deerflow cells --run 3f2a --print               ...of another run of this kernel, printed instead
  %deerflow status                                 Backend, config, models, current thread, last run
  %deerflow models                                 The models --model accepts (the server's, under JupyterLab)
  %deerflow help                                   This help

Stopping a run: the Stop button in its view, or Kernel → Interrupt (also for a run a form continued)."""


@magics_class
class DeerFlowMagics(Magics):
    """Registers ``deerflow``; its :class:`KernelSession` holds the notebook's DeerFlow state."""

    shell: Any  # always given (IPython's Magics declares it optional)
    owns_custom_exc = False  # True when load_ipython_extension installed the one-line error handler

    def __init__(self, shell: Any, session: KernelSession | None = None) -> None:
        super().__init__(shell)
        self.session = session or KernelSession(shell)

    @no_var_expand
    @line_cell_magic
    def deerflow(self, line: str, cell: str | None = None) -> Any:
        """Run the DeerFlow agent (see ``%deerflow help``)."""
        try:
            if cell is not None:
                return self.session.run(cell, parse_cell_line(line))
            return self._line(line.strip())
        except HelpShown:
            return None
        except UserError as exc:
            raise UsageError(str(exc)) from None

    def _line(self, line: str) -> Any:
        if not line:
            raise UsageError(f"%deerflow needs a prompt or a command.\n{USAGE}")
        command, _, rest = line.partition(" ")
        if command in SUBCOMMANDS:
            return getattr(self, f"_cmd_{command}")(rest.strip())
        options, prompt = split_line(line)
        if not prompt:
            raise UsageError("%deerflow: the prompt is missing after the options")
        return self.session.run(prompt, options)

    # -- subcommands ----------------------------------------------------------------------------
    def _cmd_help(self, rest: str) -> None:
        print(HELP)
        print()
        print(build_parser().format_help())

    def _cmd_reply(self, rest: str) -> Any:
        if not rest:
            raise UsageError('%deerflow reply: give the answer, e.g. %deerflow reply "yes" '
                             "or %deerflow reply --field NAME=VALUE ...")
        return self.session.reply(_reply_answer(rest))

    def _cmd_continue(self, rest: str) -> Any:
        """``continue [--thread T] [TEXT]``: resume the interrupted run, like ``deerflow run --thread T --continue``."""
        thread_id = None
        if rest.startswith("--thread"):
            match = re.fullmatch(r"--thread[ =](\S+)\s*(.*)", rest, flags=re.DOTALL)
            if match is None:
                raise UsageError("%deerflow continue: expected --thread T, then optional instructions")
            thread_id, rest = match.group(1), match.group(2)
        return self.session.continue_run(thread_id, rest.strip() or None)

    def _cmd_upload(self, rest: str) -> None:
        targets = _split(rest, "upload")
        if not targets:
            raise UsageError("%deerflow upload: give a file path or a notebook variable")
        for target in targets:
            info = self.session.upload(target)
            print(f"uploaded {target} → {info.virtual_path} ({info.size:,} bytes) on thread {self.session.thread_id}")

    def _cmd_artifacts(self, rest: str) -> None:
        args = _split(rest, "artifacts")
        thread_id = args[0] if args else self.session.thread_id
        if thread_id is None:
            raise UsageError("%deerflow artifacts: no current thread yet (give a thread id, or run %%deerflow)")
        backend = self.session.backend()
        if args:
            thread_id = self.session.check_thread(backend, thread_id)
        paths = backend.artifacts(thread_id)
        if not paths:
            print(f"thread {thread_id} has presented no artifacts yet")
            return
        if not self.session.widgets:
            print("\n".join(paths))
            return
        from IPython.display import HTML

        from deerflow_kernel.static import artifacts_html

        display(HTML(artifacts_html(thread_id, paths, lambda p: backend.read_artifact(thread_id, p),
                                    backend.artifact_url)))

    def _cmd_threads(self, rest: str) -> None:
        _no_args(rest, "threads")
        threads = self.session.backend().threads()
        if not threads:
            print("no threads yet: %%deerflow starts one")
        for t in threads:
            mark = "*" if t.thread_id == self.session.thread_id else " "
            print(f"{mark} {t.thread_id}  {t.title or '(untitled)'}")

    def _cmd_skills(self, rest: str) -> None:
        args = _split(rest, "skills")
        if args and args[0] in {"install", "enable", "disable"}:
            self._skill_action(args)
            return
        _no_args(rest.removeprefix("list").strip(), "skills")
        skills = self.session.backend().skills()
        if not skills:
            print("no skills found (add them under skills/public/<name>/SKILL.md)")
        for skill in skills:
            state = "" if skill.enabled else " (disabled)"
            print(f"{skill.name}{state}  {skill.description}")

    def _skill_action(self, args: list[str]) -> None:
        """``skills install PATH|VAR [--replace]`` / ``skills enable|disable NAME``."""
        action, replace = args[0], "--replace" in args
        targets = [a for a in args[1:] if a != "--replace"]
        if len(targets) != 1:
            raise UsageError(f"%deerflow skills {action}: give one " + ("path" if action == "install" else "name"))
        target = targets[0]
        if action == "install" and isinstance(self.shell.user_ns.get(target), str | PathLike):
            target = str(self.shell.user_ns[target])  # a notebook variable holding the path, as for upload
        done = self.session.backend().manage_skill(action, target, replace=replace)
        if action != "install":
            print(f"{done['name']}: {'enabled' if done['enabled'] else 'disabled'} for your next runs")
            return
        findings = done["scan"]["findings"]
        print(f"installed {done['skill']['name']} (custom, enabled): use it with /{done['skill']['name']}")
        print(f"SkillScan: {len(findings)} finding(s)" + "".join(
            f"\n  [{f['severity']}] {f['rule']} at {f['path']}:{f['line']}: {f['message']}" for f in findings))

    def _cmd_status(self, rest: str) -> None:
        _no_args(rest, "status")
        for key, value in self.session.status().items():
            print(f"{key:>9}: {value}")

    def _cmd_models(self, rest: str) -> None:
        _no_args(rest, "models")
        models = self.session.backend().models()
        if models is None:
            print("this backend cannot list its models")
        elif not models:
            print("no models configured (the embedded offline model answers)")
        for name in models or []:
            print(name)

    def _cmd_cells(self, rest: str) -> None:
        from deerflow_kernel.cells import cells_command

        cells_command(self.session, rest)

    def _cmd_memory(self, rest: str) -> Any:
        """``memory list | add TEXT | edit ID TEXT | forget ID | clear | export | changes | undo [RUN] | prompt``.

        Reading verbs first let the last run's extraction finish (it runs a few seconds after
        the run): ``%deerflow memory list`` right after a run shows what it learned.  ``list``
        returns the facts (a list of dicts with ``id`` and ``text``, shown as one line each).
        """
        from deerflow.memory.commands import render_text, split_verb

        verb, argument = split_verb(rest)
        if verb in {"forget", "undo", "edit"} and "{" in argument:  # `forget {fact[id]}`: the id from a variable
            from deerflow_kernel.prompt import check_placeholders, interpolate

            head, sep, tail = argument.partition(" ") if verb == "edit" else (argument, "", "")
            check_placeholders(head, self.shell.user_ns)
            argument = interpolate(head, self.shell.user_ns) + sep + tail
        last = self.session.last_result
        if verb in {"list", "changes", "undo", "prompt", "export"} and last is not None and last.run_id \
                and last.status == "success":
            self.session.backend().memory_change(last.run_id, wait=90.0)
        result = self.session.backend().memory(verb, argument)
        if verb == "list":  # `facts = %deerflow memory list`: the facts, shown as the same lines
            from deerflow_kernel.memory_line import FactList

            return FactList(result["facts"])
        print(render_text(verb, result))
        return None

    def _cmd_apply(self, rest: str) -> None:
        from deerflow_kernel.notebook import edits_command

        edits_command(self.session, "apply", rest)

    def _cmd_discard(self, rest: str) -> None:
        from deerflow_kernel.notebook import edits_command

        edits_command(self.session, "discard", rest)

    def _cmd_undo(self, rest: str) -> None:
        from deerflow_kernel.notebook import edits_command

        edits_command(self.session, "undo", rest)

    def _cmd_mcp(self, rest: str) -> None:
        from deerflow.mcp.cli import ACTIONS, RESET_TEXT, problem_lines, server_lines, tool_lines

        action = rest or "list"
        if action not in ACTIONS:
            raise UsageError(f"%deerflow mcp: expected one of {', '.join(ACTIONS)}, got {action!r}")
        found = self.session.backend().mcp(action)
        if action == "reset":
            print(RESET_TEXT)
            return
        servers = found.get("servers", [])
        lines = tool_lines(found["tools"]) + problem_lines(servers) if action == "tools" else server_lines(servers)
        print("\n".join(lines))


def _split(rest: str, command: str) -> list[str]:
    try:
        return shlex.split(rest)
    except ValueError as exc:
        raise UsageError(f"%deerflow {command}: {exc}") from None


def _no_args(rest: str, command: str) -> None:
    if rest:
        raise UsageError(f"%deerflow {command} takes no arguments (to send a prompt that starts with "
                         f"{command!r}, use the %%deerflow cell magic)")


def _reply_answer(rest: str) -> Any:
    """``"text"`` (quotes optional) or ``--field NAME=VALUE`` pairs, like ``deerflow reply``."""
    if not rest.startswith("--field"):
        tokens = _split(rest, "reply") if rest[:1] in "\"'" else []
        return tokens[0] if len(tokens) == 1 else rest
    tokens = _split(rest, "reply")
    fields = []
    while tokens:
        flag = tokens.pop(0)
        if flag != "--field" or not tokens:
            raise UsageError(f"%deerflow reply: expected --field NAME=VALUE, got {flag!r}")
        fields.append(tokens.pop(0))
    return parse_reply_args(None, fields)
