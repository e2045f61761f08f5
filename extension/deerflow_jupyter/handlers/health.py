"""``GET /deerflow/api/health``: is this DeerFlow usable, and if not, what to do.

The same findings as ``deerflow doctor`` (config, storage files or the PostgreSQL
database of ``storage.url``, sandbox),
for operators and probes: 200 when everything is usable, 503 when something
is broken, each finding naming the file or part, the problem and the fix.
The checks touch files and maybe the Docker engine, so they run off the
event loop with a deadline (:func:`deerflow.persistence.offloop.off_loop`); checks that
do not finish in time are a finding like any other.  ``?deep=1`` also reads every page of the store
files (``PRAGMA quick_check``): slower, it finds corruption the cheap checks
(file type, permissions, header, size, opening) cannot.
"""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from deerflow import doctor
from deerflow.errors import ConfigError
from deerflow.persistence.offloop import DiskUnavailable, off_loop
from deerflow_jupyter.handlers.base import DeerFlowHandler

DEADLINE_SECONDS = 30.0


class HealthHandler(DeerFlowHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        deep = self.get_argument("deep", "0").lower() in {"1", "true", "yes"}
        try:
            findings = await off_loop(self._findings, deep, what="running the health checks",
                                      deadline=DEADLINE_SECONDS)
        except DiskUnavailable as exc:  # past the deadline, or earlier calls still stuck
            findings = [doctor.Finding("storage", str(self.host.home.home), False, str(exc),
                                       "look for a hung file system or a very large store; run deerflow doctor")]
        ok = all(f.ok for f in findings)
        self.send_json({
            "status": "ok" if ok else "broken",
            "problems": [f.line() for f in findings if not f.ok],
            "findings": [f.to_dict() for f in findings],
        }, status=200 if ok else 503)

    def _findings(self, deep: bool) -> list[doctor.Finding]:
        try:
            loaded = self.host.loaded()
        except ConfigError as exc:
            config_finding = doctor.Finding("config", self.host.config_path or "config.yaml", False, str(exc),
                                            "fix the file at the key the message names, then restart the server")
            loaded = None
        else:
            where = str(loaded.path) if loaded.path else "(no file: built-in defaults)"
            config_finding = doctor.Finding("config", where, True, "loaded")
        config = loaded.config if loaded is not None else None
        findings = [config_finding, *doctor.check_storage(doctor.store_files(self.host.home, config), deep=deep)]
        if config is not None:
            database = doctor.check_storage_url(config.storage)  # None on SQLite: the files above are the store
            if database is not None:
                findings.append(database)
            findings.append(doctor.check_sandbox(config))
        return findings
