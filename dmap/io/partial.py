"""The temporary names that dmap writes under (an output file, an index folder), and the
removal of those that a killed run left.

A run writes ``TARGET.partial-PID`` beside its target and renames it into place at the
end; a failure or a signal removes it.  A run killed outright (SIGKILL: the OOM killer,
a time limit's last step, ``srun`` passing on a job's cancellation) cannot, and what it
leaves may be as large as an output or an index.  So a run holds a lock (``flock``) on its
temporary file, or on a lock file inside its temporary folder, while it lives, and the next
run to the same target removes what no one holds (:func:`remove_abandoned`); so does the
next run for the folders of part files that workers write (:func:`remove_abandoned_folders`).  A lock is
seen by other processes on any host of a file system that has locks (local ones, NFS,
Lustre mounted with ``-o flock``); where there are none, nothing is removed.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import stat
import time
from collections.abc import Callable

# What is younger than this is never taken for abandoned: its run may not hold its lock yet
# (it takes it right after making the file or folder).
ABANDONED_AFTER_SECONDS = 10
# Inside a temporary folder: the file whose lock the run holds.
FOLDER_LOCK = ".dmap-lock"


def partial_name(target: str) -> str:
    """The temporary name of this process's ``target``."""
    return f"{target}.partial-{os.getpid()}"


def _lock(fd: int) -> bool:
    """Take the exclusive lock of the open file ``fd`` without waiting; False where another
    open file holds it.  Raises OSError where the file system has no locks."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def hold_file(fd: int) -> None:
    """Lock this process's temporary file, open as ``fd``, for as long as it is open."""
    with contextlib.suppress(OSError):
        _lock(fd)


def hold_folder(folder: str) -> int | None:
    """Lock this process's temporary folder (its :data:`FOLDER_LOCK`); returns the lock file's
    descriptor, for :func:`release_folder` before the folder is renamed into place."""
    with contextlib.suppress(OSError):
        fd = os.open(os.path.join(folder, FOLDER_LOCK), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        hold_file(fd)
        return fd
    return None


def release_folder(folder: str, fd: int | None) -> None:
    """Remove a finished folder's lock file; its lock ends as the file is closed."""
    if fd is not None:
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(folder, FOLDER_LOCK))
        os.close(fd)


def remove_abandoned(target: str, ours: Callable[[str], bool]) -> list[str]:
    """Remove the temporary files and folders of runs to ``target`` that were killed before
    they could: named as :func:`partial_name` names them, older than
    :data:`ABANDONED_AFTER_SECONDS`, locked by no one, and, for a file, ``ours`` (a folder is
    dmap's by its lock file).  Returns their paths."""
    folder, name = os.path.split(target)
    return _remove_unheld(folder, re.compile(re.escape(name) + r"\.partial-\d+"), ours)


def remove_abandoned_folders(folder: str, prefixes: tuple[str, ...]) -> list[str]:
    """Remove the folders in ``folder`` whose names start with one of ``prefixes``
    (``tempfile.mkdtemp``'s) that killed runs left, as :func:`remove_abandoned` does (a run's
    parts folder)."""
    pattern = re.compile("(?:" + "|".join(map(re.escape, prefixes)) + r")\w+")
    return _remove_unheld(folder, pattern, lambda _: False)


def _remove_unheld(folder: str, pattern: re.Pattern, ours: Callable[[str], bool]) -> list[str]:
    removed = []
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            if not pattern.fullmatch(entry.name):
                continue
            is_folder = entry.is_dir(follow_symlinks=False)
            lock = os.path.join(entry.path, FOLDER_LOCK) if is_folder else entry.path
            with contextlib.suppress(OSError):  # gone meanwhile, not ours to open, no locks here
                fd = os.open(lock, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
                try:
                    st = os.fstat(fd)
                    if (stat.S_ISREG(st.st_mode) and time.time() - st.st_mtime > ABANDONED_AFTER_SECONDS
                            and _lock(fd) and (is_folder or ours(entry.path))):
                        if is_folder:
                            shutil.rmtree(entry.path)
                        else:
                            os.unlink(entry.path)
                        removed.append(entry.path)
                finally:
                    os.close(fd)
    return removed
