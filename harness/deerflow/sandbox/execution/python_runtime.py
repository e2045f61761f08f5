"""Making the server's Python usable inside a bubblewrap sandbox.

The kernel inside the sandbox should have the same interpreter and packages
as the server (ipykernel, matplotlib, pandas...), but the sandbox must not
see the host paths where they live (often under ``/root`` or a project
checkout).  So the installation is *relocated*:

* the base interpreter (``sys.base_prefix``) is bound read-only at
  ``/opt/deerflow/python`` — unless it already lives under a system directory
  the sandbox mounts anyway (``/usr``), in which case it stays where it is;
* a virtualenv's site-packages are bound read-only into a tiny synthetic venv
  at ``/opt/deerflow/venv`` whose ``pyvenv.cfg`` points at the relocated
  interpreter.  Python discovers its prefix from that file, so ``.pth`` files
  and ``python -m pip`` keep working;
* ``LD_LIBRARY_PATH`` points at the relocated ``lib`` because a shared-library
  build's RUNPATH names the host prefix (without it the loader silently picks
  up a different ``libpython`` from ``/usr/lib``).

The synthetic venv is a few files in a directory the provider owns.
"""

from __future__ import annotations

import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

SANDBOX_PYTHON_HOME = "/opt/deerflow/python"
SANDBOX_VENV = "/opt/deerflow/venv"
_SYSTEM_PREFIXES = ("/usr/",)


@dataclass(frozen=True)
class PythonRuntime:
    """A host Python installation to expose inside a sandbox.

    Attributes:
        base_prefix: The interpreter installation (``sys.base_prefix``).
        site_packages: The virtualenv's site-packages, or ``None`` outside a venv.
        version: ``major.minor`` (names ``lib/pythonX.Y``).
        full_version: ``major.minor.micro`` (written to ``pyvenv.cfg``).
    """

    base_prefix: Path
    site_packages: Path | None
    version: str
    full_version: str

    @classmethod
    def current(cls) -> PythonRuntime:
        """The interpreter running this process."""
        in_venv = sys.prefix != sys.base_prefix
        major, minor, micro = sys.version_info[:3]
        return cls(
            base_prefix=Path(sys.base_prefix),
            site_packages=Path(sysconfig.get_paths()["purelib"]) if in_venv else None,
            version=f"{major}.{minor}",
            full_version=f"{major}.{minor}.{micro}",
        )

    @property
    def relocated(self) -> bool:
        """Whether the base interpreter must be bound at a neutral path."""
        return not (str(self.base_prefix) + "/").startswith(_SYSTEM_PREFIXES)

    @property
    def home_view(self) -> str:
        """The base prefix as the sandbox sees it."""
        return SANDBOX_PYTHON_HOME if self.relocated else str(self.base_prefix)

    @property
    def executable(self) -> str:
        """The ``python`` to run inside the sandbox."""
        if self.site_packages is not None:
            return f"{SANDBOX_VENV}/bin/python"
        return f"{self.home_view}/bin/python{self.version}"

    @property
    def bin_dir(self) -> str:
        """Directory to put first on the sandbox ``PATH``."""
        return str(Path(self.executable).parent)

    def env(self) -> dict[str, str]:
        """Environment the relocated interpreter needs."""
        return {"LD_LIBRARY_PATH": f"{SANDBOX_PYTHON_HOME}/lib"} if self.relocated else {}

    def bwrap_args(self, skeleton: Path) -> list[str]:
        """Read-only binds exposing the interpreter (and venv) in the sandbox.

        Args:
            skeleton: Directory prepared by :meth:`write_skeleton`.
        """
        args: list[str] = []
        if self.relocated:
            args += ["--ro-bind", str(self.base_prefix), SANDBOX_PYTHON_HOME]
        if self.site_packages is not None:
            site_view = f"{SANDBOX_VENV}/lib/python{self.version}/site-packages"
            args += ["--ro-bind", str(skeleton / "venv"), SANDBOX_VENV]
            args += ["--ro-bind", str(self.site_packages), site_view]
        return args

    def write_skeleton(self, skeleton: Path) -> None:
        """Write the synthetic venv (``pyvenv.cfg``, ``bin/python``, mount point)."""
        if self.site_packages is None:
            return
        venv = skeleton / "venv"
        (venv / "bin").mkdir(parents=True, exist_ok=True)
        (venv / "lib" / f"python{self.version}" / "site-packages").mkdir(
            parents=True, exist_ok=True
        )
        (venv / "pyvenv.cfg").write_text(
            f"home = {self.home_view}/bin\n"
            "include-system-site-packages = false\n"
            f"version = {self.full_version}\n"
        )
        target = f"{self.home_view}/bin/python{self.version}"
        for name in ("python", "python3", f"python{self.version}"):
            link = venv / "bin" / name
            if not link.is_symlink():
                link.symlink_to(target)
