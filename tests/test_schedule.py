"""Guided chunk sizes: full chunks first, shrinking toward the end, every read once."""

import gzip
import shutil

from conftest import write_fastq

from dmap.alphabet import get_alphabet
from dmap.fastx import iter_read_chunks
from dmap.schedule import GuidedChunks


def sizes(path, max_size, workers):
    schedule = GuidedChunks(path, max_size, min_size=100)
    schedule.n_workers = workers
    return [len(c) for c in iter_read_chunks(path, get_alphabet("dna"), max_size, next_size=schedule)]


def test_chunks_shrink_toward_the_end(tmp_path):
    write_fastq(tmp_path / "r.fq", ["ACGT" * 25] * 20_000, [f"read{i}" for i in range(20_000)])
    got = sizes(tmp_path / "r.fq", 2000, 2)
    assert sum(got) == 20_000
    assert got[0] == 2000 and got[-2] == 100 and got[-1] <= 100
    assert all(a >= b for a, b in zip(got[1:-1], got[2:-1]))  # never grows again


def test_compressed_input_keeps_equal_chunks(tmp_path):
    write_fastq(tmp_path / "r.fq", ["ACGT" * 25] * 5000)
    with open(tmp_path / "r.fq", "rb") as f, gzip.open(tmp_path / "r.fq.gz", "wb") as g:
        shutil.copyfileobj(f, g)
    assert sizes(tmp_path / "r.fq.gz", 1000, 2) == [1000] * 5
