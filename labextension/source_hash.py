"""The digest of the labextension's sources, recorded in its committed build.

The built extension (``extension/jupyter-data/labextensions/deerflow-jupyterlab``) is committed so
that installing, testing and the demo need no npm.  ``make labext`` rebuilds it and then runs
``python labextension/source_hash.py record``, which writes the SHA-256 of the sources (below)
into the built ``package.json`` as ``deerflowSources``.  ``tests/unit/test_labext_build.py``
recomputes the digest: a source changed without a rebuild fails it, naming the fix.

Usage: ``python labextension/source_hash.py record|check``.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BUILT = HERE.parent / "extension" / "jupyter-data" / "labextensions" / "deerflow-jupyterlab"
# Everything the build reads from this folder (node_modules is pinned by the lock file).
SOURCES = ("package.json", "package-lock.json", "tsconfig.json", "install.json", "src", "style")
KEY = "deerflowSources"


def source_files(root: Path = HERE) -> list[Path]:
    """The source files, sorted by their path relative to ``root``."""
    files: list[Path] = []
    for name in SOURCES:
        path = root / name
        if path.is_dir():
            files.extend(p for p in path.rglob("*") if p.is_file())
        else:
            files.append(path)
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def sources_digest(root: Path = HERE) -> str:
    """SHA-256 over each source file's relative path and bytes (line endings as stored)."""
    digest = hashlib.sha256()
    for path in source_files(root):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def recorded_digest(built: Path = BUILT) -> str | None:
    """The digest the committed build was made from, or None when it records none."""
    return json.loads((built / "package.json").read_text()).get(KEY, {}).get("sha256")


def record(built: Path = BUILT, root: Path = HERE) -> str:
    """Write the sources' digest into the built ``package.json``; return it."""
    package = built / "package.json"
    data = json.loads(package.read_text())
    data[KEY] = {"sha256": sources_digest(root), "files": len(source_files(root))}
    package.write_text(json.dumps(data, indent=2) + "\n")
    return data[KEY]["sha256"]


def main(argv: list[str]) -> int:
    if argv == ["record"]:
        print(f"recorded the labextension's sources: {record()[:12]}")
        return 0
    if argv == ["check"]:
        if recorded_digest() == sources_digest():
            return 0
        print("the built labextension is stale: run `make labext` and commit the result", file=sys.stderr)
        return 1
    print("usage: python labextension/source_hash.py record|check", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
