"""One user's schedules, validated on the way in (CLI, API and client all use this).

A schedule is a cron expression (in a time zone), a prompt, optionally a custom
agent and optionally a thread.  Without a thread every run starts a fresh one
(clean context each time; the runs are listed with the schedule); with a thread,
runs continue it.  Everything a run will need is checked when the schedule is
added — the expression and zone, the agent, that the thread is the user's — so a
mistake is one clear error now, not a failed run at 3 a.m.
"""

from __future__ import annotations

import time

from deerflow.config.paths import HomePaths, check_id
from deerflow.custom_agents.store import AgentStore
from deerflow.errors import NotFoundError, UserError
from deerflow.persistence.store import MetadataStore
from deerflow.scheduling.runner import first_slot
from deerflow.scheduling.store import Schedule, ScheduleRun, ScheduleStore

MAX_PROMPT_CHARS = 20_000


class ScheduleBook:
    """The schedules of ``user_id``.

    Args:
        home: ``$DEERFLOW_HOME`` (agents are looked up there).
        user_id: Whose schedules.
        metadata: The thread store (ownership of ``thread_id``).
        store: The schedule store (default: on the home's database).
    """

    def __init__(self, home: HomePaths, user_id: str, *, metadata: MetadataStore | None = None,
                 store: ScheduleStore | None = None) -> None:
        self.home = home
        self.user_id = check_id(user_id, kind="user")
        self.metadata = metadata or MetadataStore(home.metadata)
        self.store = store or ScheduleStore(home.metadata)

    def add(self, *, cron: str, prompt: str, agent_name: str | None = None, thread_id: str | None = None,
            timezone: str = "UTC") -> Schedule:
        """Validate and store a schedule; it first runs at its next slot after now.

        Raises:
            UserError: empty or huge prompt, bad cron expression or zone, unknown agent,
                unknown (or another user's) thread.
        """
        prompt = prompt.strip()
        if not prompt:
            raise UserError("the schedule's prompt is empty: say what the agent should do each time")
        if len(prompt) > MAX_PROMPT_CHARS:
            raise UserError(f"the prompt is longer than {MAX_PROMPT_CHARS} characters")
        next_run_at = first_slot(cron, timezone, after=time.time())
        if agent_name:
            AgentStore.for_user(self.home, self.user_id).get(agent_name)
        if thread_id and self.metadata.get_thread(check_id(thread_id, kind="thread"), self.user_id) is None:
            raise NotFoundError(f"unknown thread {thread_id!r}")
        return self.store.add(user_id=self.user_id, cron=cron.strip(), timezone=timezone, prompt=prompt,
                              agent_name=agent_name or None, thread_id=thread_id or None, next_run_at=next_run_at)

    def list_schedules(self) -> list[Schedule]:
        return self.store.list_schedules(self.user_id)

    def get(self, schedule_id: str) -> Schedule:
        return self.store.get(schedule_id, self.user_id)

    def remove(self, schedule_id: str) -> None:
        self.store.remove(schedule_id, self.user_id)

    def runs(self, schedule_id: str, *, limit: int = 50) -> list[ScheduleRun]:
        self.store.get(schedule_id, self.user_id)
        return self.store.runs(schedule_id, self.user_id, limit=limit)


__all__ = ["ScheduleBook"]
