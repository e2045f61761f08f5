"""Controls of a live run view that the browser works itself, and the running clock.

A widget click is a comm message, which the kernel reads only between cells: while a
``%%deerflow`` cell holds the kernel it would wait until the run ends.  So Stop (here) and
"insert as a new cell below" (:mod:`deerflow_kernel.cells`) are plain HTML buttons whose
``onclick`` posts to the server itself, server-relative and with Jupyter's XSRF cookie.
"""

from __future__ import annotations

from deerflow_kernel.markup import esc

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


__all__ = ["XSRF_JS", "clock_text", "stop_button_html"]
