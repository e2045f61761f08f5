"""The "DeerFlow" kernelspec: a Launcher card that opens a notebook with ``%%deerflow`` ready.

The wheel installs ``share/jupyter/kernels/deerflow`` (pyproject's data-files); here the same
folder is put on ``JUPYTER_PATH``, a real Jupyter server lists it, and a kernel started from it
has the ``deerflow_kernel`` extension loaded without a ``%load_ext``.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from fixtures.jupyter_process import running_jupyter
from fixtures.kernel_ws import KernelClient

pytestmark = pytest.mark.integration

DATA = Path(__file__).resolve().parents[2] / "extension" / "jupyter-data"


def test_the_deerflow_kernel_is_listed_with_its_logo_and_starts_with_the_magics_loaded(tmp_path: Path):
    env = {"JUPYTER_PATH": str(DATA), "DEERFLOW_HOME": str(tmp_path / "home")}
    with running_jupyter(tmp_path, env=env, timeout=120) as server:
        specs = httpx.get(f"{server.url}api/kernelspecs", headers=server.headers, timeout=30).json()["kernelspecs"]
        deerflow = specs["deerflow"]
        assert deerflow["spec"]["display_name"] == "DeerFlow"
        assert deerflow["spec"]["language"] == "python"
        assert "logo-svg" in deerflow["resources"]  # the Launcher card's icon
        logo = httpx.get(f"{server.url.rstrip('/')}{deerflow['resources']['logo-svg']}", headers=server.headers,
                         timeout=30)
        assert logo.status_code == 200 and logo.text.lstrip().startswith("<svg")
        kernel = KernelClient(server.url, server.token, kernel_name="deerflow")
        try:
            cell = kernel.execute("ip = get_ipython()\n"
                                  "print(ip.find_cell_magic('deerflow') is not None, "
                                  "'deerflow_kernel' in ip.extension_manager.loaded)")
        finally:
            kernel.close()
        assert (cell.status, cell.error, cell.stdout.strip()) == ("ok", "", "True True")
