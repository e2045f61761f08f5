"""The ``local`` provider: commands and kernels run directly on the host.

This is the development default and it is *not* a security boundary.  A host
shell can reach every file the server can, whatever the virtual mounts say,
so ``bash`` is refused unless the operator sets ``allow_host_bash=True``.
The Python kernel still runs (it is the notebook experience the project is
about) with the workspace as its working directory and a scrubbed
environment; use the ``bwrap`` provider when the model is not trusted.

Because the host has no ``/mnt/user-data``, virtual paths in commands and
cells are rewritten to the thread's host directories before they run, and
host paths in output are masked back.  This is a convenience, not
containment.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import ClassVar

from deerflow.config.paths import ThreadPaths
from deerflow.sandbox.env import scrub_env
from deerflow.sandbox.provider import VIRTUAL_USER_DATA, KernelLaunch, Launch, SandboxProvider

# Variables of a surrounding Jupyter/matplotlib session that would confuse a child kernel.
_KERNEL_ENV_DROP_PREFIXES = ("JPY_", "MPLBACKEND", "IPYTHONDIR", "JUPYTER_RUNTIME_DIR")


class LocalSandboxProvider(SandboxProvider):
    """Run on the host, with host bash off unless explicitly allowed.

    Args:
        allow_host_bash: Run shell commands on the host (trusted setups only).
        python: Interpreter for kernels; defaults to the server's own.
        **kwargs: See :class:`SandboxProvider`.
    """

    name: ClassVar[str] = "local"

    def __init__(
        self, *, allow_host_bash: bool = False, python: str | None = None, **kwargs: object
    ) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.allow_host_bash = allow_host_bash
        self.python = python or sys.executable
        self._shell = shutil.which("bash") or "/bin/sh"

    @property
    def allows_bash(self) -> bool:
        return self.allow_host_bash

    def translate_in(self, paths: ThreadPaths, text: str) -> str:
        """Point virtual paths at the thread's host directories."""
        pairs = [(str(m.virtual), str(m.host)) for m in self.mounts(paths)]
        pairs.append((VIRTUAL_USER_DATA, str(paths.user_data)))
        for virtual, host in sorted(pairs, key=lambda p: len(p[0]), reverse=True):
            text = text.replace(virtual, host)
        return text

    def command_launch(self, paths: ThreadPaths, command: str) -> Launch:
        return Launch(
            argv=[self._shell, "-c", command],
            env=scrub_env(os.environ),
            cwd=paths.workspace,
        )

    def kernel_launch(self, paths: ThreadPaths, runtime_dir: Path) -> KernelLaunch:
        env = {
            name: value
            for name, value in scrub_env(os.environ).items()
            if not name.startswith(_KERNEL_ENV_DROP_PREFIXES)
        }
        # A private IPython dir: no host profile startup scripts, no shared history.
        env["IPYTHONDIR"] = str(runtime_dir / "ipython")
        env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
        return KernelLaunch(
            argv=[self.python, "-m", "ipykernel_launcher", "--HistoryManager.enabled=False"],
            env=env,
            cwd=paths.workspace,
            runtime_view=str(runtime_dir),
        )
