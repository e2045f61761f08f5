"""DeerFlow in a notebook: ``%load_ext deerflow_kernel``, then ``%%deerflow``.

The magics run the agent on a cell and show a live ipywidgets view of the
run; they talk to the Jupyter server's DeerFlow extension when the kernel
runs under it (``DEERFLOW_SERVER_URL``), else run the harness in-process.
See :mod:`deerflow_kernel.magics` for the commands.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for type checkers; at run time __getattr__ imports it on first use
    from deerflow_kernel.result import RunResult

__all__ = ["RunResult", "load_ipython_extension", "session_of", "unload_ipython_extension"]

_MAGICS = "DeerFlowMagics"


def __getattr__(name: str) -> Any:
    if name == "RunResult":  # lazy: importing the package must stay cheap
        from deerflow_kernel.result import RunResult

        return RunResult
    raise AttributeError(name)


def load_ipython_extension(ipython: Any) -> None:
    """Register ``%deerflow`` / ``%%deerflow`` on this shell (its state lives on the magics object)."""
    from deerflow_kernel.magics import DeerFlowMagics

    magics = DeerFlowMagics(ipython)
    ipython.register_magics(magics)
    if not ipython.custom_exceptions:  # another extension's handler stays in charge
        from deerflow.errors import UserError

        ipython.set_custom_exc((UserError,), _one_line_error)
        magics.owns_custom_exc = True


def _one_line_error(shell: Any, etype: type, value: BaseException, tb: Any, tb_offset: Any = None) -> None:
    """A DeerFlow user error raised in a cell (``result.load("nope.csv")``...) is one line, not a traceback.

    It stays an error output (Run All stops there), as IPython shows its own UsageError.
    """
    del tb, tb_offset
    shell._showtraceback(etype, value, [f"{etype.__name__}: {value}"])


def unload_ipython_extension(ipython: Any) -> None:
    """Close the session's backend (``%reload_ext`` then starts afresh)."""
    magics = ipython.magics_manager.registry.pop(_MAGICS, None)
    if getattr(magics, "owns_custom_exc", False):
        ipython.set_custom_exc((), None)
    if magics is not None:
        magics.session.close()


def session_of(ipython: Any) -> Any:
    """The :class:`~deerflow_kernel.session.KernelSession` of a shell (for Python use of the magics' state)."""
    magics = ipython.magics_manager.registry.get(_MAGICS)
    if magics is None:
        raise RuntimeError("the deerflow_kernel extension is not loaded: run %load_ext deerflow_kernel")
    return magics.session
