"""A trivial tool shared by the benchmarks (loaded by config as ``bench_tools:echo``)."""

from langchain_core.tools import tool


@tool
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


def _sleepy_class():
    """A scripted model that sleeps before each answer (a stand-in for a slow provider)."""
    import asyncio
    import time

    from deerflow.models.scripted import ScriptedChatModel

    class Sleepy(ScriptedChatModel):
        delay: float = 0.5

        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            time.sleep(self.delay)
            return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)

        async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
            await asyncio.sleep(self.delay)
            return await asyncio.to_thread(super()._generate, messages, stop, None, **kwargs)

        async def _astream(self, messages, stop=None, run_manager=None, **kwargs):
            await asyncio.sleep(self.delay)
            for chunk in super()._stream(messages, stop=stop, run_manager=None, **kwargs):
                yield chunk

    return Sleepy


SleepyScriptedModel = _sleepy_class()


SCRIPTS: dict = {}
"""Scripts parsed before any timer starts, by key (``PreparsedScriptedModel``'s ``script_key``)."""

ANSWER_CLOCK: list[float] = []
"""``time.process_time()`` as each answer of a ``PreparsedScriptedModel`` is ready: consecutive answers
of one run are one agent step apart (``bench/long_thread.py`` reads steps off it).  Stamped when the
answer is made, not when asked for, so the first window starts after the run's first model call,
whose one-off work on a loaded thread (reading every message the checkpoint just deserialized) is
paid once per run, like the load itself."""


def _preparsed_class():
    """A scripted model whose script was parsed outside the timer (the bench's both sides do the same)."""
    import time

    from deerflow.models.scripted import ScriptedChatModel

    class Preparsed(ScriptedChatModel):
        def __init__(self, script_key: str, **kwargs):
            super().__init__(script=SCRIPTS[script_key], **kwargs)

        def _answer(self, messages, *, stop, kwargs):
            answer = super()._answer(messages, stop=stop, kwargs=kwargs)
            ANSWER_CLOCK.append(time.process_time())
            return answer

    return Preparsed


PreparsedScriptedModel = _preparsed_class()
