"""Guided chunk sizes: small chunks first, doubling up to half the full size, then growing by a
tenth of the reads done, shrinking toward the end (with several workers), every read once.

Sizes are chosen in reads and cut in bytes, with the bytes per record of the file's start: the
records here are all of one size, so the chunks hold exactly the reads chosen."""

import gzip
import shutil

import pytest
from helpers import write_fasta, write_fastq

from dmap.alphabet import get_alphabet
from dmap.io.fastx import iter_read_chunks
from dmap.mapping.schedule import (
    DEFAULT_APPROX_CHUNK_SIZE,
    DEFAULT_APPROX_GPU_CHUNK_SIZE,
    FIRST_CHUNK_SIZE,
    GuidedChunks,
)


def sizes(path, max_size, workers, first_size=None):
    schedule = GuidedChunks(path, max_size, min_size=100, first_size=first_size or max_size)
    schedule.n_workers = workers
    return [len(c) for c in iter_read_chunks(path, get_alphabet("dna"), max_size, next_size=schedule)]


def test_chunks_shrink_toward_the_end(tmp_path):
    write_fastq(tmp_path / "r.fq", ["ACGT" * 25] * 20_000, [f"read{i:05d}" for i in range(20_000)])
    got = sizes(tmp_path / "r.fq", 2000, 2)
    assert sum(got) == 20_000
    assert got[0] == 2000 and got[-2] == 100 and got[-1] <= 100
    assert all(a >= b for a, b in zip(got[1:-1], got[2:-1]))  # never grows again


def test_compressed_input_keeps_equal_chunks(tmp_path):
    write_fastq(tmp_path / "r.fq", ["ACGT" * 25] * 5000)
    with open(tmp_path / "r.fq", "rb") as f, gzip.open(tmp_path / "r.fq.gz", "wb") as g:
        shutil.copyfileobj(f, g)
    assert sizes(tmp_path / "r.fq.gz", 1000, 2) == [1000] * 5


# Doubling from 250 to half the largest size (1000); 1000 until 10,000 reads
# are done, then a tenth of the reads done, up to 2000.
GROWTH = [250, 250, 500, 1000] + [1000] * 9 + [1100, 1210, 1331, 1464, 1610, 1771, 1948, 2000]


def test_chunks_grow_from_the_first_size(tmp_path):
    write_fastq(tmp_path / "r.fq", ["ACGT" * 25] * 40_000, [f"read{i:05d}" for i in range(40_000)])
    got = sizes(tmp_path / "r.fq", 2000, 2, first_size=250)
    assert sum(got) == 40_000
    assert got[:len(GROWTH)] == GROWTH
    peak = got.index(2000)
    assert got[peak:peak + 3] == [2000] * 3 and got[-1] <= 100
    assert all(a >= b for a, b in zip(got[peak:-1], got[peak + 1:-1]))  # then never grows again
    with open(tmp_path / "r.fq", "rb") as f, gzip.open(tmp_path / "r.fq.gz", "wb") as g:
        shutil.copyfileobj(f, g)
    got = sizes(tmp_path / "r.fq.gz", 2000, 2, first_size=250)
    assert got[:len(GROWTH)] == GROWTH and got[len(GROWTH):-1] == [2000] * (len(got) - len(GROWTH) - 1)


def test_one_worker_chunks_grow_and_do_not_shrink(tmp_path):
    # With nothing to balance, small chunks at the end only cost Dask tasks and kernel launches.
    write_fastq(tmp_path / "r.fq", ["ACGT" * 25] * 40_000, [f"read{i:05d}" for i in range(40_000)])
    got = sizes(tmp_path / "r.fq", 2000, 1, first_size=250)
    assert got == GROWTH + [2000] * 8 + [40_000 - sum(GROWTH) - 8 * 2000]


def test_a_first_chunk_of_the_full_size_stays_so(tmp_path):
    write_fastq(tmp_path / "r.fq", ["ACGT" * 25] * 20_000, [f"read{i:05d}" for i in range(20_000)])
    assert sizes(tmp_path / "r.fq", 2000, 1) == [2000] * 10


def test_the_first_chunk_is_small_by_default():
    assert GuidedChunks("-", 200_000)(0, 0) == FIRST_CHUNK_SIZE < 200_000
    assert GuidedChunks("-", 64)(0, 0) == 64  # never above the chunk size asked for


@pytest.mark.parametrize("gpu, given, embedded, expected", [  # the largest chunk as planning starts, and at the end
    (False, None, False, (DEFAULT_APPROX_CHUNK_SIZE, DEFAULT_APPROX_CHUNK_SIZE)),
    (True, None, False, (DEFAULT_APPROX_CHUNK_SIZE, DEFAULT_APPROX_GPU_CHUNK_SIZE)),
    (True, 30_000, False, (30_000, 30_000)),
    (True, None, True, (DEFAULT_APPROX_GPU_CHUNK_SIZE, DEFAULT_APPROX_GPU_CHUNK_SIZE)),
    (False, None, True, (DEFAULT_APPROX_CHUNK_SIZE, DEFAULT_APPROX_CHUNK_SIZE)),
], ids=["cpu", "gpu", "given", "embedded-gpu", "embedded-cpu"])
def test_approximate_chunks_grow_larger_on_gpus(tmp_path, client, monkeypatch, gpu, given, embedded, expected):
    """With --max-errors chunks grow to 50,000 reads, and to 200,000 where every device is a GPU
    (whose host work per chunk weighs more), unless the user gave a size: a running cluster's
    devices tell once connected, the embedded cluster's before it starts (so that pairs' byte
    ranges, cut then, take the size too).  The CPU device here is made to say whether it is a GPU."""
    import dmap
    import dmap.mapping.pipeline as pipeline
    from dmap.opencl.device import Device

    made = []

    class Spy(GuidedChunks):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append((self, self.max_size))

    monkeypatch.setattr(Device, "is_gpu", property(lambda self: gpu))
    monkeypatch.setattr(pipeline, "_local_gpus_only", lambda: gpu)
    monkeypatch.setattr(pipeline, "GuidedChunks", Spy)
    write_fasta(tmp_path / "ref.fa", [("chr", "ACGTTGCAAGGCTTAACCGGATCGATCGGATTACAGGCATTTACGGA" * 4)])
    write_fastq(tmp_path / "r.fq", ["GGCTTAACCGGATCGATCGGATTACAGG"])
    idx = dmap.build_index(tmp_path / "ref.fa", tmp_path / "idx", max_query_length=40)
    dmap.map_reads(idx, tmp_path / "r.fq", sam_path=tmp_path / "out.sam", client=None if embedded else client,
                   max_errors=1, chunk_size=given)
    assert [(first, schedule.max_size) for schedule, first in made] == [expected]
