"""Attacks on the thread's skills view from a writer of the thread's folders.

Such a writer is the agent's own code under the ``local`` provider (no isolation) or another
machine on a shared ``thread_files_root``.  It plants a symbolic link (to a host canary: a
directory outside every thread with a secret file in it) where the host is about to (re)build
the view, then the next build runs (:func:`project_skills`, what every run on the thread
calls).  Nothing may be written or deleted in the canary; the view must come out right or the
build fail with a one-line :class:`Conflict` naming no host path.  Each attack runs with
``openat2`` and with the ``O_NOFOLLOW`` walk that replaces it on older kernels.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from deerflow.config.paths import HomePaths, ThreadPaths
from deerflow.errors import Conflict
from deerflow.skills import SkillLibrary
from deerflow.skills.catalog import Skill
from deerflow.skills.projection import project_skills
from fixtures.canary import host_canary
from fixtures.resolvers import resolver_fixture  # noqa: F401  (registers the fixture)
from fixtures.skill_runs import write_skill

SECRET = "host-canary-skills-view"


pytestmark = pytest.mark.usefixtures("resolver")  # every test under both resolvers


@pytest.fixture
def setup(tmp_path: Path) -> tuple[SkillLibrary, ThreadPaths, Path]:
    public = tmp_path / "public"
    write_skill(public, "alpha", files={"scripts/a.txt": "first\n", "scripts/run.py": "print('alpha')\n"})
    write_skill(public, "beta")
    library = SkillLibrary(public_root=public, home=HomePaths(tmp_path / "home"),
                           extensions_path=tmp_path / "ext.json")
    paths = library.home.thread("local", "t1").ensure()
    return library, paths, public


@pytest.fixture
def canary(tmp_path: Path) -> Path:
    return host_canary(tmp_path, SECRET)


def snapshot(directory: Path) -> dict[str, tuple[str, int]]:
    """Every entry below ``directory`` (no link followed): digest (or kind) and mtime."""
    found = {}
    for root, dirs, files in os.walk(directory):
        for name in dirs + files:
            path = Path(root, name)
            st = path.lstat()
            digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
            found[str(path.relative_to(directory))] = (digest, st.st_mtime_ns)
    return found


def enabled(library: SkillLibrary) -> list[Skill]:
    return [s for s in library.listing("local").skills if s.enabled]


def assert_view(view: Path, names: list[str]) -> None:
    assert view.is_dir() and not view.is_symlink()
    assert sorted(p.name for p in view.iterdir()) == names
    for name in names:
        assert (view / name / "SKILL.md").is_file() and not (view / name / "SKILL.md").is_symlink()
    if "alpha" in names:
        assert (view / "alpha" / "scripts" / "run.py").read_text() == "print('alpha')\n"


def test_a_link_in_place_of_the_view_is_replaced_never_followed(setup, canary: Path) -> None:
    library, paths, _ = setup
    view = project_skills(enabled(library), paths)
    for child in view.iterdir():  # the writer empties the view and puts a link to the host in its place
        for f in sorted(child.rglob("*"), reverse=True):
            f.rmdir() if f.is_dir() else f.unlink()
        child.rmdir()
    view.rmdir()
    view.symlink_to(canary)
    before = snapshot(canary)
    library.set_enabled("local", "beta", False)  # the next run rebuilds the view
    assert project_skills(enabled(library), paths) == view
    assert snapshot(canary) == before and (canary / "canary.txt").read_text() == SECRET
    assert_view(view, ["alpha"])


@pytest.mark.parametrize("planted", ["dangling", "file"])
def test_a_dangling_or_file_link_in_place_of_the_view_is_replaced(setup, canary: Path, planted: str) -> None:
    library, paths, _ = setup
    view = paths.skills_view
    view.symlink_to(canary / "new-dir" if planted == "dangling" else canary / "canary.txt")
    before = snapshot(canary)
    project_skills(enabled(library), paths)
    assert snapshot(canary) == before and (canary / "canary.txt").read_text() == SECRET
    assert_view(view, ["alpha", "beta"])


def test_links_planted_at_a_skill_folder_and_at_files_inside_the_view(setup, canary: Path) -> None:
    """Links in place of a skill, a skill's subfolder, a skill's file and stale entries: each is
    removed or moved aside as the link itself.  (The path-based build resisted these too, since
    it renamed whole skill folders; the test keeps the descriptor-based one honest.)"""
    library, paths, public = setup
    view = project_skills(enabled(library), paths)
    (view / "alpha" / "SKILL.md").unlink()
    (view / "alpha" / "SKILL.md").symlink_to(canary / "canary.txt")  # a file inside a skill
    (view / "alpha" / "scripts").rename(paths.root / "elsewhere")
    (view / "alpha" / "scripts").symlink_to(canary)  # a subfolder of a skill
    for f in (view / "beta").iterdir():
        f.unlink()
    (view / "beta").rmdir()
    (view / "beta").symlink_to(canary)  # a whole skill folder
    (view / "stale").symlink_to(canary)  # an entry no skill has: removed on rebuild
    (view / "stale.txt").symlink_to(canary / "canary.txt")
    before = snapshot(canary)
    (public / "beta" / "notes.md").write_text("v2")
    project_skills(enabled(library), paths)
    assert snapshot(canary) == before and (canary / "canary.txt").read_text() == SECRET
    assert_view(view, ["alpha", "beta"])
    assert (view / "beta" / "notes.md").read_text() == "v2"


def test_the_signature_file_is_never_written_through_a_link(setup, canary: Path) -> None:
    library, paths, _ = setup
    project_skills(enabled(library), paths)
    state = paths.root / "sandbox-state"
    (state / "skills-view.json").unlink()
    (state / "skills-view.json").symlink_to(canary / "canary.txt")
    library.set_enabled("local", "beta", False)
    before = snapshot(canary)
    project_skills(enabled(library), paths)
    assert snapshot(canary) == before and (canary / "canary.txt").read_text() == SECRET
    assert_view(paths.skills_view, ["alpha"])


def test_a_signature_folder_swapped_for_a_link_gets_nothing_written_into_it(setup, canary: Path) -> None:
    library, paths, _ = setup
    project_skills(enabled(library), paths)
    state = paths.root / "sandbox-state"
    for f in state.iterdir():
        f.unlink()
    state.rmdir()
    state.symlink_to(canary)
    library.set_enabled("local", "beta", False)
    before = snapshot(canary)
    project_skills(enabled(library), paths)
    assert snapshot(canary) == before
    assert_view(paths.skills_view, ["alpha"])


def test_a_folder_of_the_copy_swapped_for_a_link_mid_build_gets_nothing_written(setup, canary: Path,
                                                                                monkeypatch) -> None:
    """The racing writer, made deterministic: as the first file of ``scripts`` is copied, the copy's
    ``scripts`` folder (in the thread's folder, under whatever name) is moved away and replaced by a
    link to the host; the next file of it must not land on the host."""
    library, paths, _ = setup
    view = project_skills(enabled(library), paths)
    sendfile = os.sendfile
    swapped: list[str] = []

    def sendfile_then_swap(out: int, src: int, offset, count: int) -> int:
        written = os.readlink(f"/proc/self/fd/{out}")
        if written.endswith("/scripts/a.txt") and not swapped:
            folder = os.path.dirname(written)
            os.rename(folder, folder + "-moved")
            os.symlink(canary, folder)
            swapped.append(folder)
        return sendfile(out, src, offset, count)

    monkeypatch.setattr(os, "sendfile", sendfile_then_swap)
    library.set_enabled("local", "beta", False)
    before = snapshot(canary)
    error: Conflict | None = None
    try:
        project_skills(enabled(library), paths)
    except Conflict as exc:
        error = exc
    monkeypatch.undo()
    assert swapped and swapped[0].startswith(str(paths.root))
    assert snapshot(canary) == before and (canary / "canary.txt").read_text() == SECRET
    assert error is not None, "the build must fail: its copy has a link where a folder was"
    text = str(error)  # one line for the user (HTTP 409), no host path
    assert "\n" not in text and str(paths.root) not in text and str(canary) not in text
    assert text.startswith("the thread's skills view could not be built: ") and "skills/alpha/scripts/run.py" in text
    assert "symbolic link" in text or "not a directory" in text
    assert not [p for p in paths.root.iterdir() if p.name.startswith(".skills-staging-")]
    project_skills(enabled(library), paths)  # the next run, unraced, builds it
    assert_view(view, ["alpha"])
