"""The controls in a live run view's header: Stop, Continue and the running clock.

A widget click is a comm message, which the kernel reads only between cells: while a
``%%deerflow`` cell holds the kernel it would wait until the run ends.  So Stop (here) and
"insert as a new cell below" (:mod:`deerflow_kernel.cells`) are plain HTML buttons whose
``onclick`` posts to the server itself, server-relative and with Jupyter's XSRF cookie.
:class:`RunControls` is the widget side, mixed into :class:`~deerflow_kernel.view.RunView`:
it shows the widget Stop or the browser-posted one, runs the clock, and handles Continue.
ipywidgets is only named for types here: :mod:`deerflow_kernel.cells` (and the static
rendering) import this module without loading it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from deerflow_kernel.markup import esc, hidden

if TYPE_CHECKING:
    import ipywidgets as widgets

XSRF_JS = "const x=decodeURIComponent((document.cookie.match(/(?:^|; )_xsrf=([^;]*)/)||[])[1]||'');"
"""Browser code that reads Jupyter's XSRF cookie into ``x`` (sent as ``X-XSRFToken``)."""

_STOP_JS = (
    "(async b=>{const d=b.dataset,s=b.nextElementSibling;b.disabled=true;s.textContent=' stopping\u2026';"
    + XSRF_JS
    + "try{const r=await fetch(d.api+'threads/'+encodeURIComponent(d.thread)+'/runs/'+encodeURIComponent(d.run)"
    "+'/cancel',{method:'POST',credentials:'same-origin',headers:{'X-XSRFToken':x}});"
    "if(!r.ok&&r.status!==409){const j=await r.json().catch(()=>({}));"
    "s.textContent=' '+(j.message||('stop failed ('+r.status+')'));b.disabled=false}}"
    "catch(e){s.textContent=' stop failed: '+e;b.disabled=false}})(this)")


def stop_button_html(api: str, thread_id: str, run_id: str) -> str:
    """The Stop control of a run that streams from the server: the browser posts the cancel itself.

    A widget click is a comm message, and the kernel reads comm messages only
    between cells: while a ``%%deerflow`` cell holds the kernel, a widget Stop
    would wait until the run ends.  Like "insert as a new cell below", this
    button posts to the server's cancel route (server-relative URL, Jupyter's
    XSRF cookie), so a click cancels at once; the run's stream then ends the
    cell as cancelled.  A 409 means the run already ended: nothing to say.
    """
    data = f"data-api='{esc(api)}' data-thread='{esc(thread_id)}' data-run='{esc(run_id)}'"
    return (f"<button class='deerflow-stop' {data} title='Cancel this run' style='color:#fff;background:#d9534f;"
            f"border:0;border-radius:2px;padding:2px 8px;margin:2px' onclick=\"{esc(_STOP_JS)}\">■ Stop</button>"
            f"<span class='deerflow-stop-status' style='color:#777'></span>")


def clock_text(seconds: float, *, background: bool) -> str:
    """The header's running line: elapsed time, and for a background run that it is one and how to stop it."""
    minutes, secs = divmod(int(seconds), 60)
    elapsed = f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"
    if not background:
        return f"<span style='color:#777'>&nbsp;· {elapsed}</span>"
    return (f"<span style='color:#b36b00'>&nbsp;· running in the background for {elapsed} (the kernel is free): "
            "Stop or Kernel → Interrupt cancels it</span>")


class RunControls:
    """Stop, Continue and the clock of :class:`~deerflow_kernel.view.RunView` (which builds the widgets below)."""

    header: widgets.HTML
    clock: widgets.HTML
    stop: widgets.Button
    resume: widgets.Button
    browser_stop: widgets.HTML
    _top: widgets.HBox
    _cancel: Callable[[], Any] | None
    _on_continue: Callable[[Any], None] | None
    _ticking: threading.Event | None
    _clock_lock: threading.Lock

    if TYPE_CHECKING:  # the view's own, used here
        def note(self, text: str) -> None: ...
        def _notice(self, text: str) -> None: ...

    @property
    def live(self) -> bool:
        return self._cancel is not None

    def attach(self, cancel: Callable[[], Any], *, background: bool = False) -> None:
        """A run is streaming into this view: show Stop (``cancel`` cancels the run)."""
        self._cancel = cancel
        hidden(self.stop, False)
        self.stop.disabled = False
        if background:
            self.note("Running in the background: Stop (or Kernel → Interrupt) cancels it.")
        self._start_clock(background)

    def detach(self) -> None:
        self._cancel = None
        hidden(self.stop, True)
        self._use_stop(self.stop)
        self.browser_stop.value = ""
        with self._clock_lock:
            if self._ticking is not None:
                self._ticking.set()
                self._ticking = None
            self.clock.value = ""

    def _use_stop(self, control: widgets.Widget) -> None:
        """Put ``control`` (the widget Stop or the browser-posted one) in the header; only one is there."""
        self._top.children = (self.header, self.clock, control, self.resume)

    def _start_clock(self, background: bool) -> None:
        """Elapsed time beside Stop while a run streams; a background run says so and how to stop it.

        A background run leaves the kernel idle (its cells run meanwhile), so the
        header must tell the user the run is still going and what stops it.
        """
        if self._ticking is not None:
            self._ticking.set()
        stop = self._ticking = threading.Event()
        started = time.monotonic()

        def tick() -> None:
            while True:
                with self._clock_lock:  # never overwrite the cleared clock after detach
                    if stop.is_set():
                        return
                    self.clock.value = clock_text(time.monotonic() - started, background=background)
                if stop.wait(1.0):
                    return

        threading.Thread(target=tick, name="deerflow-view-clock", daemon=True).start()

    def request_stop(self) -> None:
        """Cancel the run streaming into this view (Stop button, kernel interrupt)."""
        cancel = self._cancel
        if cancel is None:
            return
        self.stop.disabled = True
        self.note("Stopping the run…")
        cancel()

    def _stop_clicked(self, _button: Any = None) -> None:
        self.request_stop()

    def _continue_clicked(self, _button: Any = None) -> None:
        if self._on_continue is None or self.live:
            return
        self.resume.disabled = True
        self._on_continue(self)

    def continue_failed(self, message: str) -> None:
        """The Continue button could not start a run: say why, and let the user try again."""
        self.resume.disabled = False
        self._notice(message)


__all__ = ["XSRF_JS", "RunControls", "clock_text", "stop_button_html"]
