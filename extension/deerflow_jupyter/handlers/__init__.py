"""HTTP routes of the DeerFlow API, all under ``{base_url}deerflow/api/``."""

from __future__ import annotations

from deerflow_jupyter.handlers import files, runs, threads

_T = r"(?P<thread_id>[A-Za-z0-9_][A-Za-z0-9_.@-]{0,127})"
_R = r"(?P<run_id>[A-Za-z0-9_-]{1,64})"

ROUTES = [
    (r"/assistants/search", threads.AssistantSearchHandler),
    (r"/assistants/(?P<assistant_id>[^/]+)", threads.AssistantHandler),
    (r"/threads", threads.ThreadsHandler),
    (r"/threads/search", threads.ThreadSearchHandler),
    (rf"/threads/{_T}", threads.ThreadHandler),
    (rf"/threads/{_T}/state", threads.ThreadStateHandler),
    (rf"/threads/{_T}/history", threads.ThreadHistoryHandler),
    (rf"/threads/{_T}/runs", runs.RunsHandler),
    (rf"/threads/{_T}/runs/stream", runs.RunStreamHandler),
    (rf"/threads/{_T}/runs/wait", runs.RunWaitHandler),
    (rf"/threads/{_T}/runs/{_R}", runs.RunHandler),
    (rf"/threads/{_T}/runs/{_R}/cancel", runs.RunCancelHandler),
    (rf"/threads/{_T}/runs/{_R}/join", runs.RunJoinHandler),
    (rf"/threads/{_T}/runs/{_R}/stream", runs.RunJoinStreamHandler),
    (rf"/threads/{_T}/runs/{_R}/events", runs.RunEventsHandler),
    (rf"/threads/{_T}/runs/{_R}/changes", files.RunChangesHandler),
    (rf"/threads/{_T}/uploads", files.UploadsHandler),
    (rf"/threads/{_T}/artifacts", files.ArtifactsHandler),
    (rf"/threads/{_T}/artifacts/(?P<relpath>.+)", files.ArtifactFileHandler),
]
