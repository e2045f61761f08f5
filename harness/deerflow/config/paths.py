"""Where things live on the host.

Everything DeerFlow stores sits under one home directory (``$DEERFLOW_HOME``,
default ``~/.deerflow``).  Per user and thread the layout is::

    $DEERFLOW_HOME/users/{user}/threads/{thread}/user-data/{uploads,workspace,outputs}
    $DEERFLOW_HOME/users/{user}/threads/{thread}/acp-workspace/
    $DEERFLOW_HOME/users/{user}/threads/{thread}/skills/     (projection of enabled skills)
    $DEERFLOW_HOME/users/{user}/skills/{skill}/              (the user's custom skills)

``storage.thread_files_root`` moves the ``users`` tree elsewhere (a volume several
machines mount at the same path); see :meth:`HomePaths.with_files_root`.

User and thread ids become path components, so they are validated here, once,
before any directory is built from them.
"""

from __future__ import annotations

import getpass
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from deerflow.threadfs import SafeDir

if TYPE_CHECKING:
    from deerflow.config.storage import StorageConfig

_SAFE_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.@-]{0,127}$")


class UnsafeIdError(ValueError):
    """A user or thread id that cannot be used as a path component."""


def check_id(value: str, *, kind: str) -> str:
    """Return ``value`` if it is safe as a single path component.

    Raises:
        UnsafeIdError: for empty ids, separators, ``..`` or other odd characters.
    """
    if not isinstance(value, str) or not _SAFE_ID.match(value) or ".." in value:
        raise UnsafeIdError(
            f"invalid {kind} id {value!r}: use 1-128 letters, digits, '_', '-', '.', '@' "
            "(not starting with '.' or '-')"
        )
    return value


def default_home(env: Mapping[str, str] | None = None) -> Path:
    """``$DEERFLOW_HOME`` if set (in ``env``, default the process environment), else ``~/.deerflow``."""
    value = (os.environ if env is None else env).get("DEERFLOW_HOME")
    return Path(value).expanduser() if value else Path.home() / ".deerflow"


FALLBACK_USER = "local"
"""The user id when the OS user name cannot be a path component (or there is none)."""


def default_user(env: Mapping[str, str] | None = None) -> str:
    """Whose threads a process on this machine works with, unless told otherwise.

    ``$JUPYTERHUB_USER`` (the Hub's identity: a process in a Hub-spawned server, such as a
    terminal, agrees with its server), else ``$DEERFLOW_USER``, else the OS user (``local``
    when that name is not a safe id).  The CLI, the magics, the embedded client and the
    Jupyter server's single-user owner all start from here, so one person on one machine sees
    the same threads everywhere.

    Raises:
        UnsafeIdError: ``$JUPYTERHUB_USER`` or ``$DEERFLOW_USER`` is not a safe id.
    """
    env = os.environ if env is None else env
    value = env.get("JUPYTERHUB_USER") or env.get("DEERFLOW_USER")
    if value:
        return check_id(value, kind="user")
    try:
        name = getpass.getuser()
    except (KeyError, OSError):  # no user name for this uid (containers)
        return FALLBACK_USER
    try:
        return check_id(name, kind="user")
    except UnsafeIdError:
        return FALLBACK_USER


@dataclass(frozen=True)
class ThreadPaths:
    """Host directories of one user's thread.

    ``owed_skills_view`` is set on a run's paths when its thread had no skills view yet: the
    run builds it on first use (:meth:`ready_skills_view`, :mod:`deerflow.skills.projection`)
    instead of at its start.  It takes no part in equality or hashing.
    """

    root: Path
    owed_skills_view: Callable[[], None] | None = field(default=None, compare=False, repr=False)

    @property
    def user_data(self) -> Path:
        return self.root / "user-data"

    @property
    def uploads(self) -> Path:
        return self.user_data / "uploads"

    @property
    def workspace(self) -> Path:
        return self.user_data / "workspace"

    @property
    def outputs(self) -> Path:
        return self.user_data / "outputs"

    @property
    def acp_workspace(self) -> Path:
        return self.root / "acp-workspace"

    @property
    def skills_view(self) -> Path:
        """The thread's projection of its enabled skills, mounted read-only at ``/mnt/skills``."""
        return self.root / "skills"

    @property
    def owes_skills_view(self) -> bool:
        """Whether this run's view of its skills is owed and not built yet."""
        return self.owed_skills_view is not None and not getattr(self.owed_skills_view, "built", False)

    def ready_skills_view(self) -> None:
        """Build the thread's skills view now if this run deferred it (a no-op otherwise).

        Whatever mounts or reads ``/mnt/skills`` calls this first (the sandbox providers' mount
        table, the file tools), so nothing ever sees a view that is owed but not yet built.

        Raises:
            Conflict: the view could not be built (the thread's folders were tampered with).
        """
        if self.owed_skills_view is not None:
            self.owed_skills_view()

    def ensure(self) -> ThreadPaths:
        """Create the thread's directories (idempotent), following no link, and return self.

        The thread's root is the host's own layout, but what lies below it is the sandbox's
        to tamper with: ``user-data`` or ``workspace`` may have been swapped for a link to a
        host directory, and a plain ``mkdir(parents=True)`` would then create (and every
        later writer write) there.  Each folder is made and opened through
        :class:`~deerflow.threadfs.SafeDir`, so a link or a non-directory on the way
        raises instead.

        Raises:
            UnsafePath: a folder below the root is a link, a file or otherwise not a directory.
        """
        with SafeDir.open(self.root, create=True) as root:
            for rel in _THREAD_FOLDERS:
                root.makedirs(rel)
        return self


_THREAD_FOLDERS = ("user-data/uploads", "user-data/workspace", "user-data/outputs")


def with_connect_timeout(url: str, seconds: float) -> str:
    """``url`` carrying ``storage.connect_timeout`` as libpq's ``connect_timeout`` parameter.

    The metadata stores receive their database as this one string (:meth:`HomePaths.store`),
    so the wait travels in it: their pools wait that long for a connection (and libpq that
    long for each attempt) instead of a fixed ten seconds.  libpq takes whole seconds, at
    least 2; a ``connect_timeout`` already in the URL is the user's and is kept.
    """
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    if any(key == "connect_timeout" for key, _ in query):
        return url
    whole = max(2, math.ceil(seconds))
    return urlunsplit(parts._replace(query=urlencode([*query, ("connect_timeout", str(whole))])))


@dataclass(frozen=True)
class HomePaths:
    """The layout of ``$DEERFLOW_HOME``."""

    home: Path
    files_root: Path | None = None
    """Root of the per-user folders when ``storage.thread_files_root`` moves them (a shared volume)."""
    database_url: str | None = None
    """``storage.url`` when it is PostgreSQL: the threads, runs and schedules live there, not in :attr:`database`."""

    @classmethod
    def from_env(cls) -> HomePaths:
        return cls(default_home())

    def with_files_root(self, root: str | None) -> HomePaths:
        """These paths with the per-user folders under ``root`` (``storage.thread_files_root``).

        ``None`` keeps ``$DEERFLOW_HOME/users``; a relative ``root`` is taken from the home,
        ``~`` is expanded.  Only the per-user tree moves (thread folders, custom skills and
        agents, MCP credentials); the home's own files stay where they are.
        """
        if root is None:
            return self
        path = Path(root).expanduser()
        return replace(self, files_root=path if path.is_absolute() else self.home / path)

    def with_storage(self, storage: StorageConfig) -> HomePaths:
        """These paths as ``storage`` places them: the per-user folders' root and, on PostgreSQL, the stores."""
        url = storage.postgres_url if storage.checkpointer == "postgres" else None
        if url is not None:
            url = with_connect_timeout(url, storage.connect_timeout)
        return self.with_files_root(storage.thread_files_root).with_database(url)

    def with_database(self, url: str | None) -> HomePaths:
        """These paths with the metadata stores in the PostgreSQL database ``url`` (None: SQLite files)."""
        return self if url is None else replace(self, database_url=url)

    def store(self, sqlite_file: Path) -> Path | str:
        """Where a store lives: the PostgreSQL URL when one is set, else ``sqlite_file`` under the home."""
        return self.database_url or sqlite_file

    @property
    def metadata(self) -> Path | str:
        """Where threads, runs and schedules live (:attr:`database`, or the PostgreSQL URL)."""
        return self.store(self.database)

    @property
    def users_root(self) -> Path:
        """Where ``users/{user}`` folders live: ``storage.thread_files_root`` or ``$DEERFLOW_HOME/users``."""
        return self.files_root if self.files_root is not None else self.home / "users"

    @property
    def database(self) -> Path:
        """SQLite file holding checkpoints, thread metadata and run records."""
        return self.home / "deerflow.db"

    def user_dir(self, user_id: str) -> Path:
        return self.users_root / check_id(user_id, kind="user")

    def user_skills(self, user_id: str) -> Path:
        """The user's custom skills, one directory per skill."""
        return self.user_dir(user_id) / "skills"

    def thread(self, user_id: str, thread_id: str) -> ThreadPaths:
        return ThreadPaths(self.user_dir(user_id) / "threads" / check_id(thread_id, kind="thread"))
