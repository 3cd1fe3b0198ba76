"""The mapping tasks run directly in this process (no Dask): where a chunk's records go."""

import dataclasses

import pytest
from helpers import genome_case

from dmap.format.writer import Parts
from dmap.io.fastx import iter_read_chunks
from dmap.mapping.tasks import RecordSettings, block_task, finish_task
from dmap.opencl.device import current_device


@pytest.mark.parametrize("zero_copy", [False, True])
def test_records_in_a_part_file_equal_those_handed_over(tmp_path, monkeypatch, zero_copy):
    """A worker that writes its chunk's records to a part file (from pinned scratch memory on a
    device that gets copies, ``Device.host_array``) writes the bytes it would hand over."""
    index = genome_case(tmp_path, 9, 4000, 40, 300)
    path = str(tmp_path / "idx")
    device = current_device()
    if zero_copy and not device.zero_copy:
        pytest.skip("this device does not share host memory")
    monkeypatch.setattr(device, "zero_copy", zero_copy)
    made = device.scratch_buffers_made
    chunk = next(iter_read_chunks(tmp_path / "r.fq", index.alphabet))
    located = [block_task(path, b, chunk, None) for b in range(len(index.meta.blocks))]
    settings = RecordSettings(max_hits=None, tail="", approx=None, strict=True, keep_hits=False)
    handed_over = finish_task(path, chunk, located, settings)
    assert handed_over.part is None and handed_over.n_hits >= 300
    parts = Parts.create(str(tmp_path / "out.sam"))
    settings = dataclasses.replace(settings, parts=parts)
    monkeypatch.setattr(Parts, "usable", lambda self: True)  # as in a worker process of its own
    try:
        for _ in range(2):  # the second time from buffers back in the pool
            written = finish_task(path, chunk, located, settings)
            assert written.records.size == 0 and written.nbytes == handed_over.nbytes
            with open(written.part, "rb") as f:
                assert f.read() == handed_over.records.tobytes()
    finally:
        parts.remove()  # and its lock: tests/format/test_writer.py counts the folders this process holds
    assert (device.scratch_buffers_made > made) == (not zero_copy)


def test_a_workers_write_error_crosses_the_wire():
    """Dask pickles a task's exception on the worker and unpickles it in the client: the path and
    the OSError survive."""
    import errno
    import pickle

    from dmap.mapping.tasks import WorkerWriteError

    sent = WorkerWriteError.of("/data/out.sam.partial-1", OSError(errno.ENOSPC, "No space left on device"))
    got = pickle.loads(pickle.dumps(sent))
    assert got.path == "/data/out.sam.partial-1"
    assert (got.error.errno, got.error.strerror) == (errno.ENOSPC, "No space left on device")


def test_a_worker_that_does_not_see_the_index_says_so(tmp_path):
    """The client opened the index; a worker on a host without it names the host and what to do,
    an error of the index, not an OSError (which the client would take for a lost cluster)."""
    import socket

    from dmap.errors import IndexFormatError
    from dmap.mapping.tasks import cached_index

    with pytest.raises(IndexFormatError) as e:
        cached_index(str(tmp_path / "gone.dmap"))
    assert str(e.value) == (f"index {str(tmp_path / 'gone.dmap')!r} cannot be read by the worker on host "
                            f"{socket.gethostname()!r}: No such file or directory; the workers load the index "
                            "themselves: give a path every worker sees (a shared file system)")


@pytest.mark.parametrize("direct", [False, True])
def test_a_chunk_written_in_place_goes_direct_only_when_asked(tmp_path, monkeypatch, direct):
    """write_at_task opens the output with O_DIRECT only with ``direct`` (a run with a CPU
    device among its devices, dmap.format.writer.direct_writes); either way the bytes land."""
    import numpy as np

    from dmap.format import writer as module
    from dmap.mapping.tasks import ChunkOutput, write_at_task

    opened = []
    real = module._open_direct
    monkeypatch.setattr(module, "_open_direct", lambda path: opened.append(path) or real(path))
    records = np.frombuffer(b"r1\t0\tchr1\n" * 200_000, np.uint8)  # over DIRECT_AT_LEAST
    out = ChunkOutput(number=1, records=records, part=None, nbytes=records.size, n_reads=1, n_mapped=1, n_hits=1,
                      file_bytes=0)
    path = tmp_path / "out.sam"
    path.write_bytes(b"@HD\n")
    made = Parts.create(str(path))
    parts = dataclasses.replace(made, client_pid=-1)  # as seen by a worker in its own process
    try:
        write_at_task(out, parts, str(path), 4, direct)
    finally:
        made.remove()
    assert path.read_bytes() == b"@HD\n" + records.tobytes()
    assert opened == ([str(path)] if direct else [])


def test_a_reads_record_group_comes_before_its_files():
    """What ends each read's records: its BAM record's read group where its tag named one of the
    run's (ReadFields.group), else its file's (several files in one chunk)."""
    import numpy as np
    from readfiles import DNA

    from dmap.mapping.tasks import _record_tails
    from dmap.reads import NO_GROUP, ReadChunk, ReadFields

    fields = ReadFields.from_strings([f"r{i}" for i in range(5)], ["ACGT"] * 5, ["IIII"] * 5)
    chunk = ReadChunk(0, fields, DNA.read_table, DNA.name, files=(("a.bam", 2), ("m.bam", 3)))
    settings = RecordSettings(None, "", None, True, False, tails={"a.bam": "\tRG:Z:a", "m.bam": ""})
    tails = _record_tails(chunk, settings)
    assert [tails.for_read(r) for r in range(5)] == ["\tRG:Z:a"] * 2 + [""] * 3
    chunk.fields.group = np.array([NO_GROUP, 1, 2, NO_GROUP, 0], np.uint32)
    groups = ("\tRG:Z:a", "\tRG:Z:L1", "\tRG:Z:L2")
    tails = _record_tails(chunk, dataclasses.replace(settings, group_tails=groups))
    assert [tails.for_read(r) for r in range(5)] == ["\tRG:Z:a", "\tRG:Z:L1", "\tRG:Z:L2", "", "\tRG:Z:a"]
    one = RecordSettings(None, "\tRG:Z:x", None, True, False, group_tails=groups)  # one tail for every file
    assert [_record_tails(chunk, one).for_read(r) for r in range(5)] == [
        "\tRG:Z:x", "\tRG:Z:L1", "\tRG:Z:L2", "\tRG:Z:x", "\tRG:Z:a"]
