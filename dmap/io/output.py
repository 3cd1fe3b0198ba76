"""Where a run's records go, without ever destroying a user's file.

Three kinds of destination:

* standard output (``-o -`` or no ``-o``), and the paths that name an open
  descriptor (``/dev/stdout``, ``/dev/fd/N``, ``/proc/self/fd/N``, as bash's
  ``>(samtools sort ...)`` gives): the descriptor is duplicated and written
  in place, so a file opened for appending is appended to;
* anything else that is not a regular file (a FIFO, a character device):
  opened and written in place, as ``cat > FIFO`` would;
* a regular file, or a path that does not exist yet: written under a
  temporary name beside it (``OUT.partial-PID``) and renamed over it at the
  end, so a failed or interrupted run leaves the old file as it was and no
  partial one.  A symbolic link is followed: the file it points to is
  replaced, the link stays.  A run killed outright (SIGKILL: the OOM killer,
  ``srun`` forwarding a job's cancellation, a time limit's last step) cannot
  remove its temporary file; the next run to the same output removes it
  (:func:`dmap.io.partial.remove_abandoned`).

An existing regular file is replaced only when dmap wrote it (its SAM header
has dmap's ``@PG`` line) or it is empty, and never when it is one of the
run's inputs or lies inside the index.  The file it replaces is released by
a process of its own (:func:`released_elsewhere`), not by the rename that
ends the run.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import re
import shutil
import stat
import subprocess
import sys
import threading
import warnings
import zlib
from collections.abc import Iterable, Iterator

from ..errors import DmapError, DmapWarning, OutputError
from ..format.bam import MAGIC as BAM_MAGIC
from ..format.bam import sam_header_text
from ..format.bgzf import is_bgzf
from .partial import hold_file, partial_name, remove_abandoned
from .splits import is_url

STDOUT = "-"
# Descriptor paths: written through a duplicate of that descriptor.
_FD_PATH = re.compile(r"/(?:dev/fd|proc/self/fd)/(\d+)")
_FD_NAMES = {"/dev/stdout": 1, "/dev/stderr": 2}
# How far into an existing file to look for the end of a SAM header (a
# draft assembly with a million contigs has a header of about 40 MB).
_HEADER_SCAN_BYTES = 256 << 20


def _descriptor(path: str) -> int | None:
    """The open descriptor ``path`` names, or None."""
    if path in _FD_NAMES:
        return _FD_NAMES[path]
    m = _FD_PATH.fullmatch(path)
    return int(m.group(1)) if m else None


# SAM text, BAM, and SAM text in BGZF blocks (as `bgzip` writes it: samtools, pysam and tabix read it).
FORMATS = ("sam", "bam", "sam.gz")
# Output names that choose a format when none is given.
_BY_NAME = ((".bam", "bam"), (".gz", "sam.gz"), (".bgz", "sam.gz"))


def record_format(path: str | os.PathLike, chosen: str | None, alphabet: str) -> str:
    """The output's format: ``chosen`` (one of :data:`FORMATS`), else by the output's name: BAM
    for ``.bam``, BGZF-compressed SAM for ``.gz`` or ``.bgz`` (``out.sam.gz``), else SAM.

    Raises
    ------
    dmap.errors.DmapError
        An unknown format; a name ending ``.cram`` with no format chosen (dmap does not write
        CRAM, and SAM text under that name would mislead whatever reads it next); BAM for
        reads that are not DNA (BAM stores bases as 4-bit nucleotide codes).
    """
    name = os.fspath(path).lower()
    if chosen is None and name.endswith(".cram"):
        raise DmapError(f"dmap does not write CRAM ({os.fspath(path)!r}); write BAM (-o OUT.bam) or pipe SAM "
                        "to 'samtools view -C -T REFERENCE.fa -o OUT.cram -'")
    fmt = chosen if chosen is not None else next((f for end, f in _BY_NAME if name.endswith(end)), "sam")
    if fmt not in FORMATS:
        raise DmapError(f"output format {fmt!r} is not one of {', '.join(FORMATS)}")
    if fmt == "bam" and alphabet != "dna":
        raise DmapError(f"BAM stores sequences as nucleotide codes and cannot hold {alphabet} reads; "
                        "write SAM (--output-format sam, or an output name not ending .bam)")
    return fmt


# The end of a SAM header (a line that is not a header line), or dmap's @PG line in it.
_HEADER_END_OR_DMAP = re.compile(rb"\n(?:@PG\tID:dmap|[^@])")


def _sam_text_written_by_dmap(f) -> bool:
    """Whether the SAM text that the binary file ``f`` reads is empty, or has dmap's ``@PG``
    line in its header (looked for in its first :data:`_HEADER_SCAN_BYTES`, a megabyte at a
    time: line by line, the 200,000 ``@SQ`` lines of a transcriptome took 0.16 s)."""
    start = f.read(4)
    if start != b"@HD\t":
        return start == b""
    carry, seen = b"", 4
    while seen < _HEADER_SCAN_BYTES and (block := f.read(min(1 << 20, _HEADER_SCAN_BYTES - seen))):
        data = carry + block
        if found := _HEADER_END_OR_DMAP.search(data):
            return found.group().startswith(b"\n@PG")
        seen += len(block)
        carry = data[-len(b"\n@PG\tID:dmap") + 1:]  # a match may straddle two blocks
    return False


def _bgzf_written_by_dmap(path: str) -> bool:
    """Whether the BGZF file ``path`` is BAM, or SAM text, whose header has dmap's ``@PG`` line."""
    try:
        with gzip.open(path, "rb") as f:
            head = f.read(8)
            if head[:4] != BAM_MAGIC:
                f.seek(0)
                return _sam_text_written_by_dmap(f)
            if len(head) == 8:
                head += f.read(min(int.from_bytes(head[4:8], "little", signed=True), _HEADER_SCAN_BYTES))
    except (OSError, EOFError, zlib.error):
        return False
    text = sam_header_text(head)
    return text is not None and any(line.startswith("@PG\tID:dmap") for line in text.split("\n"))


def written_by_dmap(path: str) -> bool:
    """Whether the regular file ``path`` is empty, or a SAM (plain or BGZF-compressed) or BAM file
    whose header has dmap's ``@PG`` line."""
    try:
        with open(path, "rb") as f:
            if is_bgzf(f.read(16)):
                return _bgzf_written_by_dmap(path)
            f.seek(0)
            return _sam_text_written_by_dmap(f)
    except OSError:
        return False


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _inside(path: str, directory: str) -> bool:
    directory = os.path.realpath(directory)
    return os.path.commonpath([path, directory]) == directory


@contextlib.contextmanager
def released_elsewhere(path: str) -> Iterator[None]:
    """Within the block, the regular file ``path`` (if it has no other name) is held open by a
    keeper process, which closes it once the block has ended: renaming a new file over ``path``
    then leaves freeing the old one's blocks and cached pages to the keeper.

    Freeing them is the last reference's work, and it takes a while: a rename over a 3 GB
    output took 0.38-0.40 s on ext4 (0.037 s for a 1M-read run's 0.3 GB), all of it at the end
    of the run that replaced it.  The keeper is ``cat`` reading a pipe that this process
    closes at the end of the block, so it holds the file no longer than that, and a kill
    frees it as well.  Where no keeper can be started, the rename frees the file as before.
    A thread of this process reaps the keeper; once this process has exited (``dmap run``
    exits right after the rename), the system's init reaps it, as any orphan.
    """
    keeper = None
    try:
        st = os.stat(path, follow_symlinks=False)
        if stat.S_ISREG(st.st_mode) and st.st_nlink == 1 and (cat := shutil.which("cat")):
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                read, write = os.pipe()
                try:
                    keeper = subprocess.Popen([cat], stdin=read, stdout=subprocess.DEVNULL,
                                              stderr=subprocess.DEVNULL, pass_fds=[fd])
                finally:
                    os.close(read)
                    if keeper is None:
                        os.close(write)
            finally:
                os.close(fd)
    except OSError:
        keeper = None  # no such file, or no process to spare: the rename frees it
    try:
        yield
    finally:
        if keeper is not None:
            os.close(write)  # the keeper reads its end and exits, closing the old file
            threading.Thread(target=keeper.wait, name="dmap-output-keeper", daemon=True).start()


class Output:
    """A binary destination for SAM (see the module docstring); use as a context manager.

    ``with Output(path, inputs=[reads], index=idx) as out: out.file.write(...)``
    renames the temporary file over ``path`` when the block ends normally,
    and removes it when the block raises (an interrupt included).

    Parameters
    ----------
    path
        A file name, ``"-"`` or None for standard output.
    inputs
        Files the run reads: an output that is one of them is refused.
    index
        The index directory: an output inside it is refused.

    Raises
    ------
    dmap.errors.OutputError
        The destination is refused or cannot be opened.
    """

    def __init__(self, path: str | os.PathLike | None, inputs: Iterable[str | os.PathLike] = (),
                 index: str | os.PathLike | None = None):
        path = STDOUT if path is None else os.fspath(path)
        if is_url(path):  # else a relative path's folder ("s3:/bucket/"), where nothing should be written
            raise OutputError(f"output {path!r} is a URL; dmap writes to a file or to standard output: pipe "
                              "it on (e.g. 'dmap run ... -O bam | aws s3 cp - URL')")
        self.name = "standard output" if path == STDOUT else path
        self.tmp: str | None = None  # the temporary file renamed to self.target at the end
        self.target: str | None = None
        fd = 1 if path == STDOUT else _descriptor(path)
        if fd == 1 and sys.stdout is None:  # closed when Python started; the null device holds its number
            raise OutputError("cannot write 'standard output': it is closed; give an output file with -o")
        try:
            if fd is not None:
                self.file = open(os.dup(fd), "wb")
            elif os.path.exists(path) and not stat.S_ISREG(os.stat(path).st_mode):
                if os.path.isdir(path):
                    raise OutputError(f"output {path!r} is a directory")
                self.file = open(path, "wb")  # a FIFO or a device: in place
            else:
                self.target = os.path.realpath(path)  # through symbolic links
                self._check_replaceable(path, inputs, index)
                for left in remove_abandoned(self.target, written_by_dmap):
                    warnings.warn(f"removed {left}, the temporary file of a run to the same output that was "
                                  "killed", DmapWarning, stacklevel=2)
                self.tmp = partial_name(self.target)
                self.file = open(self.tmp, "xb")
                hold_file(self.file.fileno())
        except OSError as e:
            raise OutputError.writing(path, e) from None

    def _check_replaceable(self, path: str, inputs: Iterable[str | os.PathLike], index) -> None:
        for src in inputs:
            src = os.fspath(src)
            if src != STDOUT and (_same_file(path, src) or os.path.realpath(src) == self.target):
                raise OutputError(f"output {path!r} is also an input of the run; choose another output name")
        if index is not None and _inside(self.target, os.fspath(index)):
            raise OutputError(f"output {path!r} lies inside the index {os.fspath(index)!r}; "
                              "choose another output name")
        if os.path.exists(self.target) and not written_by_dmap(self.target):
            raise OutputError(f"output {path!r} exists and is not a SAM or BAM file written by dmap; dmap "
                              "replaces only its own output: remove it or choose another name")

    @property
    def is_file(self) -> bool:
        """Whether the output is written under a temporary name and renamed (also once it has
        been, or has been removed)."""
        return self.target is not None

    @property
    def after_failure(self) -> str:
        """What a failed run leaves, for its error message: nothing of a file, and
        whatever was already streamed to a pipe or device."""
        return "no output was written" if self.is_file else "the records written so far are incomplete"

    def __enter__(self) -> Output:
        return self

    def __exit__(self, kind, error, tb) -> None:
        if kind is None:
            self.commit()
        else:
            self.discard()

    def commit(self) -> None:
        """Close the output and, for a file, rename it into place."""
        try:
            self.file.close()
            if self.tmp is not None:
                with released_elsewhere(self.target):
                    os.replace(self.tmp, self.target)
                self.tmp = None
        except OSError as e:
            after = self.after_failure
            self.discard()
            raise OutputError.writing(self.name, e, after) from None

    def discard(self) -> None:
        """Close the output; a file's temporary name is removed (nothing is left)."""
        try:
            self.file.close()
        except OSError:
            pass  # a full disk refusing the last bytes: the file goes anyway
        if self.tmp is not None:
            try:
                os.unlink(self.tmp)
            except FileNotFoundError:
                pass
            self.tmp = None

