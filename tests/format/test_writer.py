"""The SAM writer (dmap.format.writer): a large output kept out of the page cache, chunks written
in place at reserved offsets (through a mapping where the file system allows) or copied from
part files, and failed writes reported as the output's."""

import errno
import io
import os
import shutil
import subprocess

import numpy as np
import pytest

from dmap.errors import OutputError
from dmap.format.writer import PageCacheLimit, SamWriter


def _resident_bytes(path) -> int:
    """Bytes of ``path`` in the page cache, as util-linux's fincore counts them."""
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", str(path)],
                         capture_output=True, text=True, check=True).stdout
    return int(out.split()[0])


def test_a_large_output_leaves_only_its_tail_in_the_page_cache(tmp_path):
    if shutil.which("fincore") is None:
        pytest.skip("util-linux's fincore is not installed")
    probe = tmp_path / "probe"
    with open(probe, "wb") as f:
        f.write(b"x" * (1 << 20))
        f.flush()
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    if _resident_bytes(probe):
        pytest.skip("this file system keeps written pages cached whatever the advice (tmpfs)")
    pieces = [bytes([65 + i]) * 300_000 for i in range(20)]
    path = tmp_path / "out.sam"
    with open(path, "wb") as f:
        limit = PageCacheLimit(f, keep=1 << 20)
        for piece in pieces:
            f.write(piece)
            f.flush()
            # Between two chunks of a real run the disk has time to take the
            # earlier ones; here fsync makes sure of it, so that what is
            # dropped does not depend on how busy the disk is.
            os.fsync(f.fileno())
            limit.wrote(f.tell())
        assert _resident_bytes(path) <= (1 << 20) + 300_000 + 4096
    assert path.read_bytes() == b"".join(pieces)


def test_a_pipe_is_written_without_page_cache_advice():
    read_end, write_end = os.pipe()
    with open(write_end, "wb") as w, open(read_end, "rb") as r:
        assert PageCacheLimit(w).fd is None
        SamWriter(w).write(b"@HD\tVN:1.6\n")
        w.flush()
        assert r.read(11) == b"@HD\tVN:1.6\n"


def test_a_failed_write_is_an_output_error_naming_the_output():
    """Not a plain OSError, which the pipeline takes for a Dask cluster that went away."""
    class Full(io.RawIOBase):
        def writable(self):
            return True

        def write(self, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    writer = SamWriter(Full(), name="/data/out.sam")
    with pytest.raises(OutputError, match="cannot write '/data/out.sam': No space left on device"):
        writer.write(b"@HD\tVN:1.6\n")


def test_parts_are_used_by_other_processes_that_see_them(tmp_path):
    """A worker in the client's process hands its records over in memory; one elsewhere writes a
    part file only where it sees the run's marker (a directory of the same name on another host
    lacks it)."""
    import multiprocessing

    from dmap.format.writer import Parts

    parts = Parts.create(str(tmp_path / "out.sam.partial-1"))
    assert os.path.dirname(parts.directory) == str(tmp_path) and not parts.usable()
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        assert pool.apply(parts.usable)
        os.unlink(os.path.join(parts.directory, parts.marker))
        assert not pool.apply(parts.usable)
    parts.remove()
    assert os.listdir(tmp_path) == []


def test_chunks_written_in_place_and_copied_from_parts(tmp_path):
    """The header through the file object, then chunks at reserved offsets in any order and from
    part files: the bytes in order."""
    from dmap.format.writer import write_at

    path = tmp_path / "out.sam"
    chunks = [b"r1\tx\n" * 3, b"", b"r2\ty\n", b"r3\tzz\n" * 100]
    with open(path, "wb") as f:
        writer = SamWriter(f)
        writer.write(b"@HD\tVN:1.6\n")
        offsets = [writer.reserve(len(c)) for c in chunks]
        for offset, c in reversed(list(zip(offsets, chunks))):
            write_at(str(path), offset, np.frombuffer(c, np.uint8))
    assert path.read_bytes() == b"@HD\tVN:1.6\n" + b"".join(chunks)
    read_end, write_end = os.pipe()
    with open(write_end, "wb") as w, open(read_end, "rb") as r:
        writer = SamWriter(w)
        writer.write(b"@HD\n")
        for k, c in enumerate(chunks):
            (tmp_path / f"{k}.part").write_bytes(c)
            writer.write_part(str(tmp_path / f"{k}.part"), len(c))
        w.close()
        assert r.read() == b"@HD\n" + b"".join(chunks)
    assert not list(tmp_path.glob("*.part"))
