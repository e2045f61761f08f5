"""The ``local`` provider: commands and kernels run directly on the host.

This is the development default and it is *not* a security boundary.  A host
shell can reach every file the server can, whatever the virtual mounts say,
so ``bash`` is refused unless the operator sets ``allow_host_bash=True``.
The Python kernel still runs (it is the notebook experience the project is
about) with the workspace as its working directory and an environment built
from the allowlist of :mod:`deerflow.sandbox.execution.env` (never the server's own);
use the ``bwrap`` provider when the model is not trusted.

``HOME`` is a private directory per thread that the provider creates and
removes on :meth:`LocalSandboxProvider.close`, so tools that write dot files
(pip, matplotlib, IPython) touch neither the server's home nor the workspace.
A cell's leftover child processes are killed when it ends (see
:mod:`deerflow.sandbox.kernels.kernel`); processes that detach from the kernel
entirely (double fork) escape on the host, which is one more reason this
provider is no boundary.

Because the host has no ``/mnt/user-data``, virtual paths in commands and
cells are rewritten to the thread's host directories before they run, and
host paths in output are masked back.  This is a convenience, not
containment.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from deerflow.config.paths import ThreadPaths
from deerflow.sandbox.execution.env import SYSTEM_PATH, check_environment, sandbox_env
from deerflow.sandbox.execution.provider import (
    VIRTUAL_USER_DATA,
    KernelLaunch,
    Launch,
    SandboxProvider,
)
from deerflow.threadfs import remove_tree


class LocalSandboxProvider(SandboxProvider):
    """Run on the host, with host bash off unless explicitly allowed.

    Args:
        allow_host_bash: Run shell commands on the host (trusted setups only).
        python: Interpreter for kernels; defaults to the server's own.
        environment: Extra variables for commands and kernels (``sandbox.environment``).
        **kwargs: See :class:`SandboxProvider`.
    """

    name: ClassVar[str] = "local"

    def __init__(
        self,
        *,
        allow_host_bash: bool = False,
        python: str | None = None,
        environment: Mapping[str, str] | None = None,
        **kwargs: Any,  # SandboxProvider's
    ) -> None:
        super().__init__(**kwargs)
        self.allow_host_bash = allow_host_bash
        self.python = python or sys.executable
        self.environment = check_environment(environment or {})
        self._shell = shutil.which("bash") or "/bin/sh"
        self._homes = Path(tempfile.mkdtemp(prefix="deerflow-local-home-"))
        self._cleanup = weakref.finalize(self, remove_tree, self._homes)  # the agent's: any depth, links

    def close(self) -> None:
        """Remove the per-thread home directories (idempotent)."""
        self._cleanup()

    def home(self, paths: ThreadPaths) -> Path:
        """The thread's private ``HOME`` (created on first use)."""
        key = hashlib.sha256(str(paths.root).encode()).hexdigest()[:16]
        home = self._homes / key
        home.mkdir(mode=0o700, exist_ok=True)
        return home

    def child_env(self, paths: ThreadPaths, **fixed: str) -> dict[str, str]:
        """The allowlisted environment of a command or kernel of the thread."""
        return sandbox_env(
            path=f"{Path(self.python).parent}:{SYSTEM_PATH}",
            home=str(self.home(paths)),
            host=os.environ,
            extra=self.environment,
            fixed=fixed,
        )

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
            env=self.child_env(paths),
            cwd=paths.workspace,
        )

    def kernel_launch(self, paths: ThreadPaths, runtime_dir: Path) -> KernelLaunch:
        # A private IPython dir: no host profile startup scripts, no shared history.
        env = self.child_env(
            paths, IPYTHONDIR=str(runtime_dir / "ipython"), PYDEVD_DISABLE_FILE_VALIDATION="1"
        )
        return KernelLaunch(
            argv=[self.python, "-m", "ipykernel_launcher", "--HistoryManager.enabled=False"],
            env=env,
            cwd=paths.workspace,
            runtime_view=str(runtime_dir),
        )
