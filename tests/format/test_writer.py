"""The SAM writer (dmap.format.writer): a new file appended with O_DIRECT, a large output kept
out of the page cache, chunks written in place at reserved offsets or copied from part files,
and failed writes reported as the output's."""

import errno
import io
import os
import shutil
import subprocess
import tempfile

import numpy as np
import pytest
from helpers import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dmap.errors import OutputError
from dmap.format import writer
from dmap.format.writer import (
    DIRECT_ALIGN,
    DIRECT_FILE_SYSTEMS,
    DirectAppends,
    PageCacheLimit,
    Parts,
    SamWriter,
    _file_system_type,
    direct_writes,
)


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


def test_parts_are_removed_while_workers_still_write_them(tmp_path):
    """After a failed run, workers may still write chunks' part files while the client removes
    the directory: it is gone afterwards all the same."""
    import threading

    for attempt in range(10):
        parts = Parts.create(str(tmp_path / f"out{attempt}.sam"))
        started = threading.Event()

        def worker(parts, started):
            for number in range(300):  # chunks still in flight, until the directory is gone
                started.set()
                try:
                    open(parts.path(number), "wb").close()
                except FileNotFoundError:
                    return

        thread = threading.Thread(target=worker, args=(parts, started))
        thread.start()
        started.wait()
        parts.remove()
        thread.join()
        assert not os.path.lexists(parts.directory)


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
        writer.finish()  # the length given ahead of the chunks is cut back
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


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(0, 5 * DIRECT_ALIGN), max_size=12), arrays=st.booleans())
def test_direct_appends_write_every_byte_in_order(tmp_path, sizes, arrays):
    """Pieces of any size, across the buffer's end and the blocks' edges: whole blocks as the
    buffer fills, the last partial block left to the caller.  (The buffering is the same with or
    without O_DIRECT, which a test's file system may lack: here on a plain descriptor.)"""
    rng = np.random.default_rng(len(sizes))
    pieces = [rng.integers(0, 256, n, dtype=np.uint8) for n in sizes]
    path = tmp_path / f"out-{len(list(tmp_path.iterdir()))}.sam"
    appends = DirectAppends(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL), size=3 * DIRECT_ALIGN)
    for piece in pieces:
        appends.write(piece if arrays else piece.tobytes())
        assert appends.written % DIRECT_ALIGN == 0 and os.path.getsize(path) == appends.written
    tail = appends.finish()
    assert len(tail) < DIRECT_ALIGN and appends.fd is None
    with open(path, "r+b") as f:
        f.seek(appends.written)
        f.write(tail)
    assert path.read_bytes() == b"".join(p.tobytes() for p in pieces)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(header=st.integers(1, 3 * DIRECT_ALIGN), sizes=st.lists(st.integers(0, 6 * DIRECT_ALIGN), max_size=10),
       order=st.randoms(use_true_random=False))
def test_chunks_written_in_place_share_their_edge_blocks(tmp_path, monkeypatch, header, sizes, order):
    """Workers write chunks in place at once, in any order: each chunk's whole blocks directly
    (here from one block on), the partial blocks it shares with its neighbours through the page
    cache: every byte lands where it belongs."""
    from concurrent.futures import ThreadPoolExecutor

    from dmap.format import writer as module

    monkeypatch.setattr(module, "DIRECT_AT_LEAST", DIRECT_ALIGN)
    rng = np.random.default_rng(header)
    chunks = [rng.integers(0, 256, n, dtype=np.uint8) for n in sizes]
    path = tmp_path / f"out-{len(list(tmp_path.iterdir()))}.sam"
    head = rng.integers(0, 256, header, dtype=np.uint8)
    with open(path, "xb") as f:
        writer = SamWriter(f, direct=True)
        writer.write(head)
        offsets = [writer.reserve(c.size) for c in chunks]
        jobs = list(zip(offsets, chunks))
        order.shuffle(jobs)
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda job: module.write_at(str(path), *job), jobs))
        writer.write_end(b"end")
        writer.finish()
    assert path.read_bytes() == head.tobytes() + b"".join(c.tobytes() for c in chunks) + b"end"


@pytest.mark.parametrize("limit", [1 << 21, (1 << 21) + 1000])
def test_a_file_size_limit_inside_a_direct_write_is_told_as_such(tmp_path, limit):
    """A limit that cuts a chunk's direct write at a block's edge or inside a block (which
    O_DIRECT refuses with EINVAL) fails the write with EFBIG, as through the page cache."""
    import sys

    path = tmp_path / "out.sam"
    path.write_bytes(b"")
    code = f"""
import errno, resource, signal
import numpy as np
from dmap.format.writer import write_at
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
try:
    write_at({str(path)!r}, 100, np.ones(3 << 20, np.uint8))
except OSError as e:
    print(errno.errorcode[e.errno])
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "EFBIG", r.stderr


def test_a_file_given_its_length_ahead_is_cut_back_to_its_records(tmp_path, monkeypatch):
    """The length given ahead of the chunks written in place, in steps, is cut back at the end,
    also when a later step was refused (a disk too full for it)."""
    from dmap.format import writer as module

    monkeypatch.setattr(module, "PREALLOCATE", 3 * DIRECT_ALIGN)
    steps = []

    def fallocate(fd, offset, length):
        steps.append(length)
        if len(steps) > 1:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        os.ftruncate(fd, offset + length)  # as posix_fallocate leaves the length

    monkeypatch.setattr(module.os, "posix_fallocate", fallocate)
    path = tmp_path / "out.sam"
    with open(path, "xb") as f:
        writer = SamWriter(f, direct=True)
        writer.write(b"@HD\n")
        chunks = [bytes([65 + k]) * 5000 for k in range(4)]
        for c in chunks:
            module.write_at(str(path), writer.reserve(len(c)), np.frombuffer(c, np.uint8))
        writer.finish()
    assert path.read_bytes() == b"@HD\n" + b"".join(chunks)
    assert (steps[:1] == [3 * DIRECT_ALIGN]) == _direct_possible(tmp_path)  # only where direct writes go


def test_closed_direct_appends_refuse_writes(tmp_path):
    """An interrupted run closes the output while its writer thread may still append: the
    descriptor is not written after it is closed (another file may have its number by then)."""
    appends = DirectAppends(os.open(tmp_path / "out.sam", os.O_WRONLY | os.O_CREAT), size=DIRECT_ALIGN)
    appends.write(b"x" * DIRECT_ALIGN)
    appends.close()
    with pytest.raises(ValueError, match="closed"):
        appends.write(b"y")
    assert (tmp_path / "out.sam").read_bytes() == b"x" * DIRECT_ALIGN


def _direct_possible(directory) -> bool:
    probe = os.open(directory, os.O_RDONLY)
    try:
        return hasattr(os, "O_DIRECT") and _file_system_type(probe) in DIRECT_FILE_SYSTEMS
    finally:
        os.close(probe)


def test_a_new_regular_file_on_a_local_disk_is_appended_directly(tmp_path):
    """The header and chunks appended, then a chunk in place (the writer goes back to the page
    cache for it and for what follows), then the end: the bytes in order."""
    path = tmp_path / "out.sam"
    chunks = [b"@HD\tVN:1.6\n", b"r1\tx\n" * 2000, b"", b"r2\ty\n" * 7]
    with open(path, "xb") as f:
        writer = SamWriter(f, direct=True)
        assert writer.direct == _direct_possible(tmp_path)
        for c in chunks:
            writer.write(np.frombuffer(c, np.uint8))
        offset = writer.reserve(5)
        assert not writer.direct and offset == sum(map(len, chunks))
        writer.write_at(offset, np.frombuffer(b"r3\tz\n", np.uint8))
        writer.write_end(b"end\n")
        writer.finish()
    assert path.read_bytes() == b"".join(chunks) + b"r3\tz\nend\n"
    with open(path, "wb") as f:  # only a new, empty file
        assert not SamWriter(f, direct=False).direct
        f.write(b"x")
        f.flush()
        assert not SamWriter(f, direct=True).direct


def test_runs_on_gpus_write_through_the_page_cache():
    """Direct writes where the search takes the host's cores (a CPU device among the run's)."""
    assert direct_writes([False]) and direct_writes([True, False]) and direct_writes([])
    assert not direct_writes([True]) and not direct_writes([True, True])


def test_a_writer_sent_to_the_page_cache_writes_nothing_directly(tmp_path, monkeypatch):
    """After through_page_cache(), neither the appends nor the chunks written in place open the
    file with O_DIRECT, and every byte lands where it belongs."""
    from dmap.format import writer as module

    opened = []
    real = module._open_direct
    monkeypatch.setattr(module, "_open_direct", lambda path: opened.append(path) or real(path))
    monkeypatch.setattr(module, "DIRECT_AT_LEAST", DIRECT_ALIGN)
    path = tmp_path / "out.sam"
    chunks = [b"r1\tx\n" * 3000, b"r2\ty\n" * 5000]
    with open(path, "xb") as f:
        writer = SamWriter(f, direct=True)
        writer.through_page_cache()
        assert not writer.direct
        writer.write(b"@HD\n")
        writer.write_at(writer.reserve(len(chunks[0])), np.frombuffer(chunks[0], np.uint8))
        module.write_at(str(path), writer.reserve(len(chunks[1])), np.frombuffer(chunks[1], np.uint8), direct=False)
        writer.finish()
    assert path.read_bytes() == b"@HD\n" + b"".join(chunks)
    assert opened == [str(path)]  # SamWriter's own open, before it was sent to the page cache


def test_direct_appends_are_not_for_memory_or_network_file_systems():
    if not os.path.isdir("/dev/shm") or _direct_possible("/dev/shm"):
        pytest.skip("no tmpfs at /dev/shm")
    with tempfile.NamedTemporaryFile(dir="/dev/shm") as f:
        assert DirectAppends.open(f.name) is None


def test_parts_a_killed_run_left_are_removed_by_the_next_run(tmp_path):
    """A run killed outright leaves its parts directory (part files of the chunks in flight); the
    next run's directory beside it removes it, and leaves those of live runs alone."""
    from dmap.io.partial import FOLDER_LOCK

    live = Parts.create(str(tmp_path / "a.sam"))
    killed = Parts.create(str(tmp_path / "b.sam"))
    open(killed.path(0), "wb").close()
    for parts in (live, killed):  # both a minute old
        lock = os.path.join(parts.directory, FOLDER_LOCK)
        then = os.path.getmtime(lock) - 60
        os.utime(lock, (then, then))
    os.close(writer._held.pop(killed.directory))  # its process is gone: so is its lock
    new = Parts.create(str(tmp_path / "c.sam"))
    assert sorted(os.listdir(tmp_path)) == sorted(os.path.basename(p.directory) for p in (live, new))
    for parts in (live, new):
        parts.remove()
    assert os.listdir(tmp_path) == [] and not writer._held
