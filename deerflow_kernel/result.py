"""What a ``%%deerflow`` cell returns: the harness's RunResult, plus notebook conveniences.

``result.load("report.md")`` fetches an artifact through whichever backend
ran it and decodes it (DataFrame, image, str...); ``result.reply(...)``
answers the run's clarification.  Its repr is one line, because it is the
cell's ``Out[]`` right under the live view.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import PurePosixPath
from typing import Any

from deerflow.client import RunResult as HarnessRunResult
from deerflow.errors import UserError
from deerflow.runtime.events import short_id
from deerflow_kernel.artifacts import decode
from deerflow_kernel.backend import ArtifactNotFound

OUTPUTS_PREFIX = "/mnt/user-data/outputs/"


@dataclass(repr=False)
class RunResult(HarnessRunResult):
    """A finished run (``.text``, ``.artifacts``, ``.thread_id``, ``.status``, ``.load(name)``).

    ``status`` is ``stopped`` when a guard (loop detection...) ended the run;
    ``.stopped_by`` names it and ``.error`` says why.
    """

    session: Any = field(default=None, compare=False)
    answered_request: str | None = field(default=None, compare=False)  # set when a form's run replaced it
    answered_elsewhere: str | None = field(default=None, compare=False)  # "from a later cell"...
    _displays: list[Any] = field(default_factory=list, compare=False, repr=False)

    @property
    def waiting(self) -> bool:
        """True when the run ended with a question for you (answer with :meth:`reply`)."""
        return self.status == "interrupted" and self.clarification is not None

    def artifact_path(self, name: str) -> str:
        """The virtual path of an artifact given its name, its path under outputs, or its full path."""
        for path in self.artifacts:
            if name in (path, PurePosixPath(path).name, path.removeprefix(OUTPUTS_PREFIX)):
                return path
        return name if name.startswith("/") else OUTPUTS_PREFIX + name.lstrip("/")

    def read_bytes(self, name: str) -> bytes:
        """The raw bytes of an artifact (or any file in the thread's outputs).

        Raises:
            UserError: one line naming the files that do exist, when ``name`` is not one of them.
        """
        if self.session is None:
            raise UserError("this result is not attached to a notebook session; use DeerFlowClient.read_artifact")
        path = self.artifact_path(name)
        if path.startswith("/mnt/") and not path.startswith(OUTPUTS_PREFIX):
            raise UserError(f"load({name!r}): only the thread's outputs ({OUTPUTS_PREFIX}...) can be loaded; "
                            f"{self._existing()}")
        backend = self.session.backend()
        try:
            return backend.read_artifact(self.thread_id, path)
        except ArtifactNotFound:
            raise UserError(f"load({name!r}): no such file in thread {short_id(self.thread_id)}'s outputs; "
                            f"{self._existing()}") from None

    def _existing(self) -> str:
        """Which files can be loaded (what the thread presented), for error messages."""
        try:
            paths = self.session.backend().artifacts(self.thread_id)
        except UserError:
            paths = []
        names = [p.removeprefix(OUTPUTS_PREFIX) for p in dict.fromkeys([*self.artifacts, *paths])]
        return f"files you can load: {', '.join(names)}" if names else "this thread has presented no files yet"

    def load(self, name: str) -> Any:
        """An artifact as a Python value.

        CSV/TSV/Parquet → pandas DataFrame; PNG/JPEG/GIF/WebP → PIL image (bytes
        without Pillow); JSON → parsed; other text (markdown, HTML, SVG...) → str;
        anything else → bytes.
        """
        return decode(name, self.read_bytes(name))

    def reply(self, answer: Any) -> RunResult:
        """Answer this run's clarification (text, an option, or ``{field: value}``); returns the next run."""
        if self.session is None:
            raise UserError("this result is not attached to a notebook session")
        return self.session.reply(answer, thread_id=self.thread_id, answering=self)

    def __repr__(self) -> str:
        names = [PurePosixPath(p).name for p in self.artifacts]
        shown = ", ".join(names[:4]) + (f", +{len(names) - 4}" if len(names) > 4 else "")
        parts = [self.status, f"thread {short_id(self.thread_id)}"]
        if names:
            parts.append(f"{len(names)} artifact{'s' * (len(names) != 1)}: {shown}")
        if self.waiting:
            parts.append(f"asks: {_clip(str((self.clarification or {}).get('question', '')), 60)}")
            if self.answered_elsewhere:
                parts.append(f"answered {self.answered_elsewhere}")
        elif self.status == "stopped":
            parts.append(f"stopped by {self.stopped_by or 'a guard'}: {_clip(self.error or '', 60)}")
        elif self.error:
            parts.append(f"error: {_clip(self.error, 60)}")
        elif self.text:
            parts.append(repr(_clip(self.text, 60)))
        return f"<RunResult {' · '.join(parts)}>"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))

    def _ipython_display_(self) -> None:
        """Shown through a display id, so the line under a cell can follow the run to its end.

        IPython still binds the result to ``_`` and ``Out[n]``; only the
        printed line becomes an updatable display (see :meth:`refresh`).
        """
        from IPython.display import display

        self._displays.append(display({"text/plain": repr(self)}, raw=True, display_id=True))

    def refresh(self) -> None:
        """Re-render every place this result is shown (after :func:`adopt` or an answer elsewhere)."""
        for handle in self._displays:
            handle.update({"text/plain": repr(self)}, raw=True)


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def adopt(target: RunResult, final: RunResult, *, answered_request: str | None = None) -> None:
    """Make ``target`` (a cell's waiting result) hold ``final``'s state: one truth per cell.

    The object is updated in place, so ``_``, ``Out[n]`` and any variable the
    notebook bound to it see the run's final state.
    """
    for f in fields(HarnessRunResult):
        setattr(target, f.name, getattr(final, f.name))
    target.answered_request = answered_request
    target.refresh()
