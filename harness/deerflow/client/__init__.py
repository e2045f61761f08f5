"""The embedded client: DeerFlow in your own Python process.

:class:`AsyncDeerFlowClient` (``async_client.py``) is the async-native API over a
:class:`~deerflow.runs.manager.RunManager`.  :class:`DeerFlowClient` (``sync_client.py``) offers
the same methods synchronously by running the async client on a private
event-loop thread, so it works in scripts, the CLI and inside a Jupyter
kernel (whose own loop is busy) alike.  What they return (:class:`RunResult`,
:class:`ThreadView`) is in ``results.py``.
"""

from deerflow.client.async_client import AsyncDeerFlowClient
from deerflow.client.results import RunResult, ThreadView
from deerflow.client.sync_client import DeerFlowClient

__all__ = ["AsyncDeerFlowClient", "DeerFlowClient", "RunResult", "ThreadView"]
