"""HTTP routes of the DeerFlow API, all under ``{base_url}deerflow/api/``."""

from __future__ import annotations

from deerflow_jupyter.handlers import (
    agents,
    batches,
    browser,
    files,
    mcp,
    memory,
    notebooks,
    plugins,
    quickstart,
    runs,
    schedules,
    skills,
    threads,
    usage,
)

# Any segment: DeerFlowHandler.prepare checks thread and run ids, so a malformed one gets
# DeerFlow's JSON 404 (worded like an unknown id) instead of Jupyter's HTML page.
_T = r"(?P<thread_id>[^/]+)"
_R = r"(?P<run_id>[^/]+)"

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
    (rf"/threads/{_T}/export", files.ThreadExportHandler),
    (rf"/threads/{_T}/artifacts/(?P<relpath>.+)", files.ArtifactFileHandler),
    (rf"/threads/{_T}/notebook-edits", notebooks.NotebookEditsHandler),
    (rf"/threads/{_T}/notebook-edits/{notebooks.ACTION}", notebooks.NotebookEditActionHandler),
    (rf"/threads/{_T}/browser/frame", browser.BrowserFrameHandler),
    (rf"/threads/{_T}/browser/live", browser.BrowserLiveHandler),
    (r"/models", runs.ModelsHandler),
    (rf"/{quickstart.PATH}", quickstart.QuickstartHandler),
    (r"/skills", skills.SkillsHandler),
    (r"/skills/install", skills.SkillInstallHandler),  # before /skills/{name}: first match wins
    (rf"/skills/{skills.NAME_PATTERN}", skills.SkillHandler),
    (r"/mcp/config", mcp.McpConfigHandler),
    (r"/mcp/reset", mcp.McpResetHandler),
    (r"/mcp/servers", mcp.McpServersHandler),
    (r"/mcp/tools", mcp.McpToolsHandler),
    (r"/batches", batches.BatchesHandler),
    (rf"/batches/{batches.BATCH_ID}", batches.BatchHandler),
    (rf"/batches/{batches.BATCH_ID}/cancel", batches.BatchCancelHandler),
    (rf"/batches/{batches.BATCH_ID}/export", batches.BatchExportHandler),
    (r"/agents", agents.AgentsHandler),
    (rf"/agents/{agents.NAME}", agents.AgentHandler),
    (r"/schedules", schedules.SchedulesHandler),
    (rf"/schedules/{schedules.SCHEDULE_ID}", schedules.ScheduleHandler),
    (rf"/schedules/{schedules.SCHEDULE_ID}/runs", schedules.ScheduleRunsHandler),
    (rf"/schedules/{schedules.SCHEDULE_ID}/run", schedules.ScheduleRunNowHandler),
    *memory.ROUTES,
    (r"/usage", usage.UsageHandler),
    (r"/plugins", plugins.PluginsHandler),  # report only; plugin routes are added by the app at startup
]
