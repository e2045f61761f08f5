"""The base every ``config.yaml`` section shares (:mod:`deerflow.config.schema`, :mod:`deerflow.config.storage`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    """A section of ``config.yaml``: an unknown key is an error naming it (a typo is never silently
    ignored), and defaults are validated like written values."""

    model_config = ConfigDict(extra="forbid", validate_default=True)
