"""Skills over HTTP: list, show, install (upload), enable and disable.

    GET  /deerflow/api/skills                 {"skills": [...], "problems": [...]}
    GET  /deerflow/api/skills/{name}          one skill, with its instructions and files
    PUT  /deerflow/api/skills/{name}          {"enabled": true|false} → the updated skill
    POST /deerflow/api/skills/install         a .skill/.zip upload (multipart field ``file``,
                                              or the raw body with ``?name=pkg.skill``);
                                              ``?replace=true`` overwrites a custom skill

State is per DeerFlow user (the request's user), like threads.  Every route
reads the skill directories and state files, so the work runs off the event
loop with a deadline (:func:`deerflow.persistence.offloop.off_loop`; a hung
disk is a 503 "try again shortly"): the listing, a skill's files, the state
write, and an install (the upload's temporary copy, the harness installer's
limits, SkillScan and atomic rename; :data:`INSTALL_DEADLINE_SECONDS`); a
package SkillScan blocks is answered 422 with the findings, so the UI can show
them.  Authentication and authorization are the same as every
other route (:mod:`.base`).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from jupyter_server.auth.decorator import authorized
from pydantic import BaseModel, ConfigDict, StrictBool
from tornado import web

from deerflow.persistence.offloop import off_loop
from deerflow.skills.archive import ARCHIVE_SUFFIXES
from deerflow.skills.installer import InstallResult, SkillScanBlocked
from deerflow.skills.library import SkillLibrary
from deerflow_jupyter.handlers.base import DeerFlowHandler

NAME_PATTERN = r"(?P<name>[a-z0-9][a-z0-9-]{0,63})"
INSTALL_DEADLINE_SECONDS = 120.0
"""An install may take longer than a read (copy, unpack, SkillScan of every file, rename)."""


class SkillUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: StrictBool


class _SkillsHandler(DeerFlowHandler):
    async def library(self) -> SkillLibrary:
        skills = (await self.manager()).skills
        assert skills is not None, "RunManager.open opens the skill library"
        return skills


class SkillsHandler(_SkillsHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        listing = await off_loop((await self.library()).listing, self.user_id, what="listing the skills")
        self.send_json({"skills": [s.to_dict() for s in listing.infos()],
                        "problems": [p.to_dict() for p in listing.problems]})


class SkillHandler(_SkillsHandler):
    @web.authenticated
    @authorized
    async def get(self, name: str) -> None:
        library, user_id = await self.library(), self.user_id

        def read() -> dict:
            skill = library.skill(user_id, name)
            return {**skill.info().to_dict(), "instructions": skill.body, "files": skill.files()}

        self.send_json(await off_loop(read, what=f"reading the skill {name}"))

    @web.authenticated
    @authorized("write")
    async def put(self, name: str) -> None:
        update = self.body(SkillUpdate)
        info = await off_loop((await self.library()).set_enabled, self.user_id, name, update.enabled,
                              what=f"changing the skill {name}")
        self.send_json(info.to_dict())


class SkillInstallHandler(_SkillsHandler):
    @web.authenticated
    @authorized("write")
    async def post(self) -> None:
        library = await self.library()
        filename, data = self._upload()
        suffix = next((x for x in ARCHIVE_SUFFIXES if filename.lower().endswith(x)), None)
        if suffix is None:
            raise web.HTTPError(422, f"{filename!r}: upload a .skill or .zip archive")
        if len(data) > library.limits.max_total_bytes:
            raise web.HTTPError(413, f"the archive is larger than {library.limits.max_total_bytes:,} bytes")
        replace = self.get_argument("replace", "false").lower() in {"1", "true", "yes"}
        user_id = self.user_id

        def install() -> InstallResult:
            with tempfile.TemporaryDirectory(prefix="deerflow-skill-upload-") as tmp:
                archive = Path(tmp) / f"upload{suffix}"  # the uploader's name never reaches the disk
                archive.write_bytes(data)
                return library.install(user_id, archive, replace=replace)

        try:
            result = await off_loop(install, what="installing the skill", deadline=INSTALL_DEADLINE_SECONDS)
        except SkillScanBlocked as exc:
            self.send_json({"installed": False, "detail": str(exc), "message": str(exc),
                            "skill": exc.name, "scan": exc.report.to_dict()}, status=422)
            return
        self.send_json({"installed": True, **result.to_dict()}, status=201)

    def _upload(self) -> tuple[str, bytes]:
        files = self.request.files.get("file", [])
        if len(files) > 1:
            raise web.HTTPError(400, "upload one skill package at a time")
        if files:
            return files[0].filename, files[0].body
        name = self.get_argument("name", "")
        if not name:
            raise web.HTTPError(400, "send a multipart 'file' field, or the raw bytes with ?name=PACKAGE.skill")
        return name, self.request.body
