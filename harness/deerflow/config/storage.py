"""The ``storage`` section of ``config.yaml``: where shared state lives, from one URL.

Operators write ``storage.url`` (SQLite or PostgreSQL); it is resolved at load into the per-part
keys every consumer reads (``checkpointer``, ``sqlite_path``, ``postgres_url``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from deerflow.config.section import Section

_SQLITE_SCHEME = "sqlite://"
_POSTGRES_SCHEMES = ("postgresql://", "postgres://")


class StorageConfig(Section):
    """Where shared state lives: one ``url`` for the whole installation.

    ``url`` is the setting operators write (``sqlite:///path/checkpoints.db``, or
    ``postgresql://user@host/db`` for a team).  It is resolved here, at load, into the
    older keys every consumer reads (``checkpointer``, ``sqlite_path``, ``postgres_url``),
    which stay accepted so existing configs keep working; a ``url`` that contradicts
    them is an error rather than a silent choice between the two.
    """

    url: str | None = Field(
        default=None,
        description="sqlite:///PATH (the checkpoint file; default $DEERFLOW_HOME/checkpoints.db) or "
        "postgresql://USER@HOST/DB (checkpoints and memory in PostgreSQL, for a team).")
    checkpointer: Literal["sqlite", "memory", "postgres"] = "sqlite"
    sqlite_path: str | None = None
    postgres_url: str | None = None
    pool_max_size: int = Field(default=10, ge=1, le=200,
                               description="PostgreSQL connections this process may hold (checkpoints).")
    connect_timeout: float = Field(default=10.0, gt=0, le=600,
                                   description="Seconds to wait for a PostgreSQL connection before failing.")
    thread_files_root: str | None = Field(
        default=None,
        description="Root of the per-user folders (threads' uploads, workspace, outputs; custom skills); "
        "default $DEERFLOW_HOME/users.  Point it at a shared volume when servers run on several machines.")
    run_lease_seconds: float = Field(
        default=30.0, gt=0, le=3600,
        description="A run's lease on its thread lasts this long unless renewed (every third of it); "
        "after a crash, the thread is free again once it expires.")

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        """Only the two backends the project ships; the message never repeats the URL (it may hold a password)."""
        if value is None:
            return None
        value = value.strip()
        if value.startswith(_SQLITE_SCHEME) or value.startswith(_POSTGRES_SCHEMES):
            if value.startswith(_POSTGRES_SCHEMES) and value.split("://", 1)[1] in ("", "/"):
                raise ValueError("a postgresql:// URL needs a host or a database (postgresql://USER@HOST/DB)")
            return value
        scheme = value.split("://", 1)[0] + "://" if "://" in value else "no scheme"
        raise ValueError(f"unsupported storage URL ({scheme}): use sqlite:///PATH or postgresql://USER@HOST/DB")

    @model_validator(mode="after")
    def _resolve_url(self) -> StorageConfig:
        """Fill the per-part keys from ``url``; refuse a combination that says two things."""
        if self.url is None:
            return self
        if self.url.startswith(_POSTGRES_SCHEMES):
            if "checkpointer" in self.model_fields_set and self.checkpointer != "postgres":
                raise ValueError(f"storage.url is PostgreSQL but storage.checkpointer is {self.checkpointer}: "
                                 "drop storage.checkpointer")
            if self.postgres_url is not None and self.postgres_url != self.url:
                raise ValueError("storage.url and storage.postgres_url differ: keep only storage.url")
            self.checkpointer, self.postgres_url = "postgres", self.url
            return self
        path = sqlite_url_path(self.url)
        if "checkpointer" in self.model_fields_set and self.checkpointer != "sqlite":
            raise ValueError(f"storage.url is SQLite but storage.checkpointer is {self.checkpointer}: "
                             "drop storage.checkpointer")
        if self.sqlite_path is not None and path is not None and self.sqlite_path != path:
            raise ValueError("storage.url and storage.sqlite_path name different files: keep only storage.url")
        self.checkpointer = "sqlite"
        self.sqlite_path = path if path is not None else self.sqlite_path
        return self

    @property
    def is_postgres(self) -> bool:
        """Shared state (checkpoints, memory) is in PostgreSQL."""
        return self.checkpointer == "postgres"


def sqlite_url_path(url: str) -> str | None:
    """The file a ``sqlite://`` URL names (``sqlite:///rel``, ``sqlite:////abs``); None for the default."""
    rest = url[len(_SQLITE_SCHEME):]
    if rest.startswith("/"):
        rest = rest[1:]
    return rest or None
