"""dmap.io.partial: which temporary files and folders beside a target are taken for those of
a killed run and removed (those of outputs are also tested through Output, test_output.py)."""

import os

from dmap.io.partial import FOLDER_LOCK, hold_folder, partial_name, release_folder, remove_abandoned


def _aged(path, age: float = 60):
    then = os.path.getmtime(path) - age
    os.utime(path, (then, then))
    return path


def _folder(tmp_path, name: str, locked: bool = True, age: float = 60):
    folder = tmp_path / name
    (folder / "blocks").mkdir(parents=True)
    (folder / "blocks" / "0").write_bytes(b"x" * 1000)
    if locked:
        (folder / FOLDER_LOCK).write_bytes(b"")
        _aged(folder / FOLDER_LOCK, age)
    return folder


def test_a_killed_builds_folder_is_removed(tmp_path):
    left = _folder(tmp_path, "idx.partial-99999999")
    assert remove_abandoned(str(tmp_path / "idx"), lambda _: False) == [str(left)]
    assert os.listdir(tmp_path) == []


def test_folders_that_are_not_a_killed_builds_stay(tmp_path):
    kept = [_folder(tmp_path, "idx.partial-1", locked=False),  # no lock file: not dmap's
            _folder(tmp_path, "idx.partial-2", age=1),  # too new: its run may not hold its lock yet
            _folder(tmp_path, "idx.partial-x3"), _folder(tmp_path, "other.partial-4")]
    (tmp_path / "idx.partial-5").write_bytes(b"")  # a file, not ours by the test given
    _aged(tmp_path / "idx.partial-5")
    assert remove_abandoned(str(tmp_path / "idx"), lambda _: False) == []
    assert sorted(os.listdir(tmp_path)) == sorted([p.name for p in kept] + ["idx.partial-5"])


def test_a_live_builds_folder_stays_until_released(tmp_path):
    folder = tmp_path / partial_name(str(tmp_path / "idx"))
    folder.mkdir()
    fd = hold_folder(str(folder))
    _aged(folder / FOLDER_LOCK)
    live = tmp_path / "idx.partial-1"
    folder.rename(live)  # as a build of another process would have named it
    assert remove_abandoned(str(tmp_path / "idx"), lambda _: False) == []
    release_folder(str(live), fd)  # finished: the lock file goes with its lock
    assert os.listdir(live) == []
