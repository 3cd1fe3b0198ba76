"""map_reads end to end (Zarr index, embedded Dask cluster, device kernels)
against the brute-force oracle, on references cut into many small blocks."""

import os
import tempfile
from pathlib import Path

import numpy as np
import pysam
import pytest
from helpers import alphabet_for, examples, random_contig, sample_reads, samtools_quickcheck, write_fasta, write_fastq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dmap
from dmap.errors import InputFormatError
from dmap.io.fastx import iter_contigs
from dmap.testing.search import brute_force_hits

CASES = [
    # alphabet, layout, block length, max query length, contig lengths
    ("dna", "interleaved", 97, 25, [400, 61, 250, 7]),
    ("dna", "bitmap", 150, 30, [800, 333]),
    ("dna", "interleaved", 5000, 40, [1200, 900]),  # one block
    ("protein", "interleaved", 120, 20, [300, 200]),
    ("protein", "bitmap", 120, 20, [500]),
    ("text", "interleaved", 80, 15, [300, 150]),
]


def check_hits_against_brute_force(directory, client, rng, alphabet, layout, block_length, max_len, lengths,
                                   sa_sample_rate=5, n_reads=300, chunk_size=64):
    """Random contigs of ``lengths`` indexed in blocks of ``block_length``, reads from them (at
    contig ends, across junctions, with N, and straddling every block edge) mapped: dmap's hits
    equal the brute-force search's, and its SAM holds them."""
    contigs = [(f"chr{i}", random_contig(rng, alphabet, n)) for i, n in enumerate(lengths)]
    write_fasta(directory / "ref.fa", contigs)
    if alphabet == "text" and not any(seq.strip() for _, seq in iter_contigs(directory / "ref.fa")):
        # A few random text symbols can all be blanks, which FASTA does not count as sequence.
        with pytest.raises(InputFormatError, match="^the reference has no searchable symbols$"):
            dmap.build_index(directory / "ref.fa", directory / "idx", alphabet=alphabet)
        return
    idx = dmap.build_index(directory / "ref.fa", directory / "idx", alphabet=alphabet, occ_layout=layout,
                           block_length=block_length, max_query_length=max_len, sa_sample_rate=sa_sample_rate)
    assert idx.n_blocks == -(-idx.meta.text_length // block_length)
    reads = sample_reads(rng, contigs, n_reads, 1 if alphabet != "dna" else 8, max_len, alphabet)
    # Reads straddling every block boundary, inside the overlaps.
    joined = "|".join(s for _, s in contigs)
    for b in idx.meta.blocks[1:]:
        for length in (max_len, max_len // 2):
            r = joined[max(0, b.start - length // 2): max(0, b.start - length // 2) + length]
            if "|" not in r and r:
                reads.append(r)
    if not reads:
        return
    write_fastq(directory / "reads.fq", reads)
    res = dmap.map_reads(idx, directory / "reads.fq", sam_path=directory / "out.sam", client=client,
                         chunk_size=chunk_size)
    got = {(int(r), c, int(p), 0 if s == "+" else 1) for r, c, p, s in
           zip(res.hits.read, res.hits.contig, res.hits.position, res.hits.strand)}
    # The oracle sees the contigs as FASTA holds them (line-end whitespace is not sequence).
    contigs = [(name, seq.decode()) for name, seq in iter_contigs(directory / "ref.fa")]
    expected = brute_force_hits(contigs, reads, alphabet_for(alphabet, contigs))
    assert got == expected
    assert res.n_reads == len(reads) and res.n_hits == len(expected)
    check_sam(directory / "out.sam", reads, contigs, expected, alphabet)


@pytest.mark.parametrize("alphabet,layout,block_length,max_len,lengths", CASES)
def test_hits_equal_brute_force(tmp_path, client, alphabet, layout, block_length, max_len, lengths):
    rng = np.random.default_rng(block_length + max_len)
    check_hits_against_brute_force(tmp_path, client, rng, alphabet, layout, block_length, max_len, lengths)


@settings(max_examples=examples(6), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), alphabet=st.sampled_from(["dna", "protein", "text"]),
       layout=st.sampled_from(["interleaved", "bitmap"]), max_len=st.integers(8, 60),
       lengths=st.lists(st.integers(1, 900), min_size=1, max_size=5), sa_sample_rate=st.sampled_from([1, 2, 5, 32]),
       n_reads=st.integers(1, 120), chunk_size=st.integers(1, 100), data=st.data())
def test_random_cases_equal_brute_force(tmp_path, client, seed, alphabet, layout, max_len, lengths, sa_sample_rate,
                                        n_reads, chunk_size, data):
    """One to five contigs of any length (down to one symbol), blocks from just over the longest
    read to one block, any SA sample rate, chunks of one read upwards."""
    block_length = data.draw(st.integers(max_len + 5, 1500), label="block_length")
    check_hits_against_brute_force(Path(tempfile.mkdtemp(dir=tmp_path)), client, np.random.default_rng(seed),
                                   alphabet, layout, block_length, max_len, lengths, sa_sample_rate, n_reads,
                                   chunk_size)


def check_sam(path, reads, contigs, expected, alphabet):
    """SAM that samtools and pysam accept, reads in input order, every hit once."""
    samtools_quickcheck(path)
    with pysam.AlignmentFile(str(path), "r", check_sq=True) as sam:
        assert list(sam.references) == [n for n, _ in contigs]
        names, records = [], set()
        for rec in sam:
            if not rec.is_secondary:
                names.append(rec.query_name)
            if rec.is_unmapped:
                continue
            assert rec.cigarstring == f"{rec.query_length or len(reads[int(rec.query_name[4:])])}M"
            assert rec.get_tag("NM") == 0
            records.add((int(rec.query_name[4:]), rec.reference_name, rec.reference_start, int(rec.is_reverse)))
            if not rec.is_secondary and alphabet == "dna":  # BAM's 4-bit SEQ holds only nucleotides
                seq = reads[int(rec.query_name[4:])]
                want = dmap.alphabet.reverse_complement(seq) if rec.is_reverse else seq
                assert rec.query_sequence == want.upper()  # BAM encoding drops case
    assert names == [f"read{i}" for i in range(len(reads))]
    primary_seqs = [line.split("\t")[9] for line in open(path) if not line.startswith("@")
                    and not int(line.split("\t")[1]) & 256]
    if alphabet != "dna":
        assert primary_seqs == reads
    assert records == expected


def test_max_hits_caps_records(tmp_path, client):
    write_fasta(tmp_path / "ref.fa", [("rep", "ACGTTGCA" * 50)])
    idx = dmap.build_index(tmp_path / "ref.fa", tmp_path / "idx", max_query_length=20)
    write_fastq(tmp_path / "r.fq", ["ACGTTGCAACG", "GGGGGGGG"])
    res = dmap.map_reads(idx, tmp_path / "r.fq", sam_path=tmp_path / "o.sam", client=client, max_hits=3)
    assert res.n_hits == 49 * 2  # all hits are counted
    with pysam.AlignmentFile(str(tmp_path / "o.sam")) as sam:
        recs = list(sam)
    assert len(recs) == 4 and sum(not r.is_secondary for r in recs) == 2
    assert recs[0].mapping_quality == 0 and recs[0].get_tag("NH") == 3


def test_fasta_reads_and_gzip(tmp_path, client):
    import gzip

    seq = random_contig(np.random.default_rng(3), "dna", 500)
    write_fasta(tmp_path / "ref.fa", [("c", seq)])
    with open(tmp_path / "ref.fa", "rb") as f, gzip.open(tmp_path / "ref.fa.gz", "wb") as g:
        g.write(f.read())
    idx = dmap.build_index(tmp_path / "ref.fa.gz", tmp_path / "idx", max_query_length=50)
    with gzip.open(tmp_path / "r.fa.gz", "wt") as f:
        f.write(f">a\n{seq[10:40].upper()}\n>b\n{'T' * 30}\n")
    res = dmap.map_reads(idx, tmp_path / "r.fa.gz", sam_path=tmp_path / "o.sam", client=client)
    assert (10, "+") in {(int(p), s) for p, s in zip(res.hits.position, res.hits.strand)}
    with pysam.AlignmentFile(str(tmp_path / "o.sam")) as sam:
        first = next(iter(sam))
        assert first.query_qualities is None  # FASTA reads have QUAL '*'


def test_the_first_chunk_is_not_kept_once_handed_out():
    # map_reads reads the first chunk before the cluster starts; nothing may hold it (and its
    # codes) for the rest of the run once the writer is done with it.
    import weakref

    from dmap.mapping.pipeline import _prepended

    class Chunk:
        pass

    first, rest = Chunk(), [Chunk(), Chunk()]
    gone = weakref.ref(first)
    chunks = _prepended([first], iter(rest))
    del first
    handed_out = next(chunks)
    assert gone() is handed_out
    del handed_out
    assert gone() is None
    assert list(chunks) == rest


def test_a_streams_chunks_are_let_go_once_mapped(tmp_path, client, monkeypatch):
    # A chunk of a stream travels in its task's message.  Dask keeps a process's last 1,000
    # messages by reference where both ends share it, so the embedded cluster held every chunk
    # of a piped input until it closed (2.5 GB for 10M gzip reads); dmap's clients keep none.
    import gc
    import gzip
    import time
    import weakref

    import dmap.io.splits as splits

    seq = random_contig(np.random.default_rng(5), "dna", 2000, repeats=False)
    write_fasta(tmp_path / "ref.fa", [("c", seq)])
    idx = dmap.build_index(tmp_path / "ref.fa", tmp_path / "idx", max_query_length=50)
    rng = np.random.default_rng(6)
    starts = rng.integers(0, len(seq) - 40, 3000)
    with gzip.open(tmp_path / "r.fq.gz", "wt", compresslevel=1) as f:
        f.writelines(f"@r{i}\n{seq[s:s + 40]}\n+\n{'I' * 40}\n" for i, s in enumerate(starts.tolist()))
    chunks: list[weakref.ref] = []
    blocks = splits.stream_blocks

    def watched(*args, **kwargs):
        for offset, data, records in blocks(*args, **kwargs):
            chunks.append(weakref.ref(data))
            yield offset, data, records

    monkeypatch.setattr(splits, "stream_blocks", watched)
    res = dmap.map_reads(idx, tmp_path / "r.fq.gz", sam_path=tmp_path / "o.sam", client=client, chunk_size=200,
                         return_hits=False)
    assert res.n_reads == 3000 and len(chunks) >= 10
    # The scheduler forgets a finished chunk's task a moment after the client lets its future go.
    deadline = time.monotonic() + 30
    while (kept := sum(r() is not None for r in chunks)) and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.1)
    assert kept == 0, f"{kept} of {len(chunks)} chunks of the stream are still held after the run"


@pytest.mark.parametrize("max_errors", [0, 2])
def test_the_output_does_not_depend_on_how_the_input_is_cut(tmp_path, client, max_errors):
    """The same records, byte for byte (but @PG), whatever the chunk size (so wherever the file is
    split), whether the reads come as one file, several files in a comma-separated list (chunks
    spanning them) or listed in a file (@FILE), gzip read by this process or a list of paths, and
    with guided or fixed chunks."""
    import gzip

    rng = np.random.default_rng(11)
    contigs = [("chr1", random_contig(rng, "dna", 3000)), ("chr2", random_contig(rng, "dna", 1500))]
    write_fasta(tmp_path / "ref.fa", contigs)
    idx = dmap.build_index(tmp_path / "ref.fa", tmp_path / "idx", block_length=1000, max_query_length=60)
    reads = sample_reads(rng, contigs, 400, 20, 55, "dna")
    # Quality lines starting with '@' and '+', as a cut must not take for a record's start.
    with open(tmp_path / "r.fq", "w") as f:
        for i, seq in enumerate(reads):
            f.write(f"@r{i} c\n{seq}\n+\n{('@+' * len(seq))[:len(seq)]}\n")
    text = (tmp_path / "r.fq").read_bytes()
    records = text.split(b"\n@r")
    parts = [b"\n@r".join(records[:150]) + b"\n", b"@r" + b"\n@r".join(records[150:151]) + b"\n",
             b"@r" + b"\n@r".join(records[151:])]
    for k, part in enumerate(parts):
        (tmp_path / f"p{k}.fq").write_bytes(part)
    (tmp_path / "r.fq.gz").write_bytes(gzip.compress(text))
    (tmp_path / "p1.fq.gz").write_bytes(gzip.compress(parts[1]))

    def sam(reads_arg, **options):
        out = tmp_path / "o.sam"
        dmap.map_reads(idx, reads_arg, sam_path=out, client=client, max_errors=max_errors, return_hits=False,
                       **options)
        return [line for line in out.read_text().splitlines() if not line.startswith("@PG")]

    want = sam(tmp_path / "r.fq", chunk_size=100_000)
    assert len([r for r in want if not r.startswith("@")]) >= len(reads)
    for chunk_size in (1, 7, 64):
        assert sam(tmp_path / "r.fq", chunk_size=chunk_size, guided=False) == want, chunk_size
    assert sam(tmp_path / "r.fq", chunk_size=50) == want
    assert sam(",".join(str(tmp_path / f"p{k}.fq") for k in range(3)), chunk_size=33) == want
    assert sam([tmp_path / "p0.fq", tmp_path / "p1.fq", tmp_path / "p2.fq"], chunk_size=100_000) == want
    (tmp_path / "files.txt").write_text(f"# the parts\n{tmp_path / 'p0.fq'}\n\n{tmp_path / 'p1.fq.gz'}\n"
                                        f"  {tmp_path / 'p2.fq'}  \n")
    assert sam(f"@{tmp_path / 'files.txt'}", chunk_size=33) == want  # a file that lists them
    assert sam(tmp_path / "r.fq.gz", chunk_size=29) == want
    # Chunks that span files: a file's last reads with the next file's first, a gzip file read here
    # among files the workers cut.
    assert sam([tmp_path / "p0.fq", tmp_path / "p1.fq.gz", tmp_path / "p2.fq"], chunk_size=40, guided=False) == want


@pytest.mark.parametrize("max_errors", [0, 2])
def test_a_device_that_copies_gives_the_same_records(tmp_path, client, max_errors):
    """Workers whose device gets copies (a GPU: buffers pooled between tasks, ``Device.scratch``)
    write the records of workers whose device works in host memory (PoCL), byte for byte, over
    several chunks and blocks (part files written from pinned memory: tests/mapping/test_tasks.py)."""
    from dmap.opencl.device import DEVICE_PLUGIN

    rng = np.random.default_rng(12)
    contigs = [("chr1", random_contig(rng, "dna", 2500)), ("chr2", random_contig(rng, "dna", 900))]
    write_fasta(tmp_path / "ref.fa", contigs)
    idx = dmap.build_index(tmp_path / "ref.fa", tmp_path / "idx", block_length=1000, max_query_length=60)
    write_fastq(tmp_path / "r.fq", sample_reads(rng, contigs, 300, 20, 55, "dna") + ["ACGTN" * 8, "T" * 40])

    def sam(name):
        dmap.map_reads(idx, tmp_path / "r.fq", sam_path=tmp_path / name, client=client, max_errors=max_errors,
                       chunk_size=64, guided=False, return_hits=False)
        return [line for line in (tmp_path / name).read_text().splitlines() if not line.startswith("@PG")]

    def device(dask_worker):
        return dask_worker.plugins[DEVICE_PLUGIN].device

    shared = client.run(lambda dask_worker: device(dask_worker).zero_copy)
    try:
        client.run(lambda dask_worker: setattr(device(dask_worker), "zero_copy", False))
        copied = sam("copied.sam")
        made = client.run(lambda dask_worker: device(dask_worker).scratch_buffers_made)
    finally:
        client.run(lambda dask_worker: setattr(device(dask_worker), "zero_copy", shared[dask_worker.address]))
    assert all(made.values())
    assert copied == sam("shared.sam")


def test_device_workers_are_asked_of_the_scheduler_not_the_clients_cache(client, monkeypatch):
    """The client's cached scheduler information, which its periodic update replaces with one that
    lists no workers, is not what tells whether the cluster has device workers: a run that raced
    that update failed with "no worker with an OpenCL device"."""
    from dmap.cluster.client import require_device_workers

    monkeypatch.setattr(client, "scheduler_info", lambda *a, **k: {"workers": {}})
    assert require_device_workers(client) == [2]  # one worker, two device tasks at once


def test_a_run_on_gpus_writes_through_the_page_cache(tmp_path, client, monkeypatch):
    """Workers whose devices are GPUs: the SAM file goes through the page cache
    (dmap.format.writer.direct_writes), with the same bytes; on the CPU it is written directly."""
    from dmap.format.writer import SamWriter
    from dmap.opencl.device import Device

    rng = np.random.default_rng(14)
    contigs = [("chr1", random_contig(rng, "dna", 3000))]
    write_fasta(tmp_path / "ref.fa", contigs)
    idx = dmap.build_index(tmp_path / "ref.fa", tmp_path / "idx", max_query_length=60)
    write_fastq(tmp_path / "r.fq", sample_reads(rng, contigs, 400, 20, 55, "dna"))
    sent = []
    real = SamWriter.through_page_cache
    monkeypatch.setattr(SamWriter, "through_page_cache", lambda self: sent.append(self.path) or real(self))

    def sam(name):
        dmap.map_reads(idx, tmp_path / "r.fq", sam_path=tmp_path / name, client=client, chunk_size=64,
                       return_hits=False)
        return [line for line in (tmp_path / name).read_text().splitlines() if not line.startswith("@PG")]

    on_cpu = sam("cpu.sam")
    assert not sent
    monkeypatch.setattr(Device, "is_gpu", property(lambda self: True))
    assert sam("gpu.sam") == on_cpu
    assert len(sent) == 1 and sent[0].startswith(str(tmp_path))


def test_one_block_maps_a_chunk_in_one_task(tmp_path, client):
    """Against an index of one block a chunk is read, searched and written by one task; against
    several, by a read task, a task per block and a finish task: the same records either way."""
    from distributed import get_task_stream

    rng = np.random.default_rng(11)
    contigs = [("chr0", random_contig(rng, "dna", 1200))]
    write_fasta(tmp_path / "ref.fa", contigs)
    write_fastq(tmp_path / "reads.fq", sample_reads(rng, contigs, 400, 8, 40, "dna"))
    tasks, sams = [], []
    for length in (5000, 300):
        idx = dmap.build_index(tmp_path / "ref.fa", tmp_path / f"idx{length}", block_length=length,
                               max_query_length=40)
        with get_task_stream(client) as stream:
            dmap.map_reads(idx, tmp_path / "reads.fq", client=client, chunk_size=100,
                           sam_path=tmp_path / f"{length}.sam")
        tasks.append({t["key"].split("-", 1)[0] for t in stream.data})
        sams.append([line for line in open(tmp_path / f"{length}.sam") if not line.startswith("@")])
    assert tasks == [{"chunk_task"}, {"read_task", "block_task", "finish_task"}]
    assert sams[0] == sams[1] and len(sams[0]) >= 400


def test_a_device_that_fails_a_task_stops_the_run_in_one_line(tmp_path, client, monkeypatch):
    """pyopencl's error in a task (here the device refuses a buffer larger than it can hold, as
    a GPU that another process has filled refuses one) ends the run as a DeviceError naming it,
    with no output left. pyopencl's errors do not pickle: Dask gave the client a bare
    "Exception: LogicError(<pyopencl._cl._ErrorRecord object at 0x...>)"."""
    import os

    import pyopencl as cl

    from dmap.errors import DeviceError
    from dmap.mapping import tasks
    from dmap.opencl.device import current_device

    def failing_search(*args, **kwargs):
        cl.Buffer(current_device().context, cl.mem_flags.READ_WRITE, size=1 << 60)

    rng = np.random.default_rng(15)
    contigs = [("chr1", random_contig(rng, "dna", 3000))]
    write_fasta(tmp_path / "ref.fa", contigs)
    idx = dmap.build_index(tmp_path / "ref.fa", tmp_path / "idx", max_query_length=60)
    write_fastq(tmp_path / "r.fq", sample_reads(rng, contigs, 100, 20, 55, "dna"))
    monkeypatch.setattr(tasks, "search", failing_search)
    with pytest.raises(DeviceError) as failed:
        dmap.map_reads(idx, tmp_path / "r.fq", sam_path=tmp_path / "o.sam", client=client)
    name = current_device().name
    assert str(failed.value) == f"the OpenCL device {name} failed: LogicError: create_buffer failed: " \
                                "INVALID_BUFFER_SIZE"
    assert sorted(os.listdir(tmp_path)) == ["idx", "r.fq", "ref.fa"]


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs Linux's /proc")
@pytest.mark.parametrize("max_errors", [0, 2])
def test_mapping_against_many_indexes_leaves_no_file_open_per_block(tmp_path, client, max_errors):
    """The worker keeps the blocks of the indexes it mapped against resident, each array a
    mapping of the index's files: the mappings must not hold a file descriptor each, or a
    long-lived worker runs out of them (here the worker is in this process)."""
    rng = np.random.default_rng(5)

    def map_one(i: int) -> None:
        genome = "".join(rng.choice(list("ACGT"), 3000))
        write_fasta(tmp_path / f"g{i}.fa", [("a", genome[:1500]), ("b", genome[1500:])])
        dmap.build_index(tmp_path / f"g{i}.fa", tmp_path / f"i{i}", block_length=400)  # 8 blocks
        write_fastq(tmp_path / f"r{i}.fq", [genome[j:j + 50] for j in range(0, 2900, 97)])
        res = dmap.map_reads(tmp_path / f"i{i}", tmp_path / f"r{i}.fq", client=client, max_errors=max_errors,
                             return_hits=False)
        assert res.n_mapped == 29  # all but the read at 1455, across the two contigs

    map_one(0)
    before = len(os.listdir("/proc/self/fd"))
    for i in range(1, 13):
        map_one(i)
    assert len(os.listdir("/proc/self/fd")) - before < 8  # with a descriptor per array: 400 more
