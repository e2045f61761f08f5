"""Several processes on one SQLite store, each with several threads: no "disk I/O error", no
malformed file, every row there.

This is a home shared by the CLI, the server and the notebooks' kernels. It failed when
checking a store file opened and closed a descriptor of its own: ``fcntl`` locks belong to the
process, so that close dropped the locks the process's other connections held, and another
process recovered the WAL under them.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fixtures.processes import start_process, stop_process

pytestmark = pytest.mark.integration

WORKER = textwrap.dedent("""
    import sys, threading
    from pathlib import Path
    from deerflow.persistence.sqlite import check_database, file_problem
    from deerflow.persistence.store import MetadataStore

    path, tag = Path(sys.argv[1]), sys.argv[2]
    failures = []

    def work(k):
        store = MetadataStore(path)
        try:
            for i in range(120):
                store.create_thread(f"{tag}-{k}-{i}", "alice")
                assert store.get_thread(f"{tag}-{k}-{i}", "alice") is not None
                if i % 8 == 0:  # what hosts do when they open: a new store checks the file first
                    MetadataStore(path).list_threads("alice", limit=3)
                    assert file_problem(path) is None and check_database(path, deep=False) is None
        except BaseException as exc:
            failures.append(repr(exc))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("\\n".join(failures))
    sys.exit(1 if failures else 0)
""")


def test_processes_and_threads_sharing_a_store_never_damage_it(tmp_path: Path) -> None:
    db = tmp_path / "deerflow.db"
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER)
    procs = [start_process([sys.executable, str(worker), str(db), tag], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True) for tag in "abc"]
    outputs = []
    try:
        for proc in procs:
            out, _ = proc.communicate(timeout=300)  # hang guard
            outputs.append((proc.returncode, out))
    finally:
        for proc in procs:
            stop_process(proc)
    assert all(code == 0 for code, _ in outputs), "\n".join(out[-2000:] for _, out in outputs)
    check = sqlite3.connect(db)
    try:
        assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert check.execute("SELECT count(*) FROM threads").fetchone() == (3 * 3 * 120,)
    finally:
        check.close()
