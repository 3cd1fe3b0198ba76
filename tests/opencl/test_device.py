"""Device discovery, pinning and fission."""

import threading

import numpy as np
import pytest
from helpers import alphabet_for, genome_case, kernel_hits, single_block

import dmap.opencl.device as device_module
from dmap.alphabet import reverse_complement
from dmap.errors import DeviceError
from dmap.format.sam import format_records_device
from dmap.host import RECYCLE_TAKES, RecycledArrays
from dmap.opencl.device import Device, device_resource, device_tasks, start_devices, take_device
from dmap.opencl.discovery import list_devices
from dmap.reads import ReadChunk, ReadFields, encode_reads
from dmap.search.exact import search_block
from dmap.search.hits import ChunkHits
from dmap.testing.sam import format_records
from dmap.testing.search import backward_search_numpy, brute_force_hits


def test_list_devices():
    infos = list_devices()
    assert infos and all(d.spec.count(":") == 1 and d.compute_units >= 1 for d in infos)


@pytest.mark.parametrize("spec", ["9:9", "0:0/0:0", "0:0/2:2", "0:0/999:0", "zero"])
def test_bad_specs(spec):
    with pytest.raises(DeviceError):
        Device(spec)


def test_a_device_begun_early_is_made_in_its_own_thread_and_handed_over_once(monkeypatch):
    spec = list_devices()[0].spec
    take_device(spec)  # one begun by an in-process cluster of an earlier test, never used
    made = []

    class Recorded(Device):
        def __init__(self, spec=None):
            super().__init__(spec)
            made.append(threading.current_thread().name)

    monkeypatch.setattr(device_module, "Device", Recorded)
    start_devices([spec])
    start_devices([spec])  # already begun: left alone
    first = take_device(spec)
    second = take_device(spec)  # each is handed over once: a new one
    assert made == [f"dmap-device-{spec}", threading.current_thread().name]
    assert first is not second and first.spec == second.spec == spec


def test_a_device_that_cannot_be_made_early_fails_where_it_is_taken():
    start_devices(["9:9"])
    with pytest.raises(DeviceError, match="no OpenCL device '9:9'"):
        take_device("9:9")


def test_split_device_searches_like_the_whole():
    info = list_devices()[0]
    if info.max_split < 2:
        pytest.skip("this device cannot be split")
    text = "".join(np.random.default_rng(1).choice(list("ACGT"), size=3000))
    alphabet = alphabet_for("dna", [("t", text)])
    block = single_block(alphabet.reference_table[np.frombuffer(text.encode(), np.uint8)], alphabet)
    reads = [text[i : i + 20] for i in range(0, 2900, 7)]
    codes, offsets, lengths, _ = encode_reads(reads, alphabet, reads)
    want = backward_search_numpy(block, codes, offsets, lengths, 2)
    for k in range(2):
        part = Device(f"{info.spec}/2:{k}")
        assert part.device.max_compute_units == info.compute_units // 2
        assert (search_block(part, part.upload_block(block), codes, offsets, lengths, 2) == want).all()


def test_threads_launch_their_own_kernel_objects_again_and_again():
    """Each thread makes a kernel object once and sets its arguments at every launch:
    launches from two threads at once, each with reads of its own, find what numpy finds."""
    import threading

    text = "".join(np.random.default_rng(2).choice(list("ACGT"), size=3000))
    alphabet = alphabet_for("dna", [("t", text)])
    block = single_block(alphabet.reference_table[np.frombuffer(text.encode(), np.uint8)], alphabet)
    device = Device()
    dblock = device.upload_block(block)
    cases = []
    for start, length in ((0, 20), (3, 31)):
        reads = [text[i : i + length] for i in range(start, 2900, 11)]
        codes, offsets, lengths, _ = encode_reads(reads, alphabet, reads)
        cases.append(((codes, offsets, lengths), backward_search_numpy(block, codes, offsets, lengths, 2)))
    wrong = []

    def launch(args, want):
        for _ in range(20):
            if not (search_block(device, dblock, *args, 2) == want).all():
                wrong.append(threading.current_thread().name)
        if len(device._local.kernels) != 1:  # one kernel (exact_search), made once in this thread
            wrong.append(f"{len(device._local.kernels)} kernel objects")

    threads = [threading.Thread(target=launch, args=case) for case in cases]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong


@pytest.mark.parametrize("mode", ["copied", "shared", "pooled"])
def test_copied_and_shared_buffers_give_the_same_results(mode):
    """A GPU gets copies of the host's arrays and copies its results back
    (inside a task, into buffers pooled between tasks: ``Device.scratch``);
    a device sharing host memory (PoCL) uses the numpy arrays in place.
    Every way must give the oracle's hits and the same SAM bytes."""
    device = Device()
    if mode == "shared" and not device.zero_copy:
        pytest.skip("this device does not share host memory")
    device.zero_copy = mode == "shared"
    if mode != "pooled":
        _search_and_format(device)
        assert device.scratch_buffers_made == 0
        return
    with device.scratch():
        _search_and_format(device, scratch=True)
    made = device.scratch_buffers_made
    assert made > 0
    for _ in range(2):  # the same work again takes the buffers back from the pool
        with device.scratch():
            _search_and_format(device, scratch=True)
    assert device.scratch_buffers_made == made


def _search_and_format(device, scratch=False):
    """Exact search, locate, the early stop and SAM records of a random case, each against its oracle
    (``scratch``: the records in the device's scratch memory, ``Device.host_array``); the records."""
    rng = np.random.default_rng(7)
    text = "".join(rng.choice(list("ACGT"), size=4000))
    reads = [text[i : i + int(rng.integers(8, 60))] for i in rng.integers(0, 3900, size=150)]
    reads += [reverse_complement(r) for r in reads[:40]] + ["ACGTN" * 6, "T" * 50]
    alphabet = alphabet_for("dna", [("t", text)])
    codes = alphabet.reference_table[np.frombuffer(text.encode(), np.uint8)]
    # Searches, locates and the early stop (reads as bytes, the text on the device), each against its oracle.
    hits = kernel_hits(device, single_block(codes, alphabet), codes, alphabet, reads)
    assert hits == brute_force_hits([("t", text)], reads, alphabet)
    read, position, strand = (np.array(col, dtype=np.int64) for col in zip(*[(r, p, s) for r, _, p, s in sorted(hits)]))
    chunk = ReadChunk(0, ReadFields.from_strings([f"r{i}" for i in range(len(reads))], reads,
                                                   ["I" * len(r) for r in reads]), alphabet.read_table, "dna")
    chunk_hits = ChunkHits(read, strand.astype(np.int8), np.zeros(read.size, np.int64), position, len(reads))
    records = format_records_device(device, chunk, chunk_hits, ["t"], scratch=scratch)
    assert records.tobytes() == format_records(chunk, chunk_hits, ["t"]).encode()
    return records


def test_pooled_buffers_never_hold_resident_ones(tmp_path):
    """A block's text loaded inside a task stays on the device after it: the pool never
    lends it out, so later tasks' buffers of the same size do not overwrite it."""
    index = genome_case(tmp_path, 5, 3000, 30, 1)
    device = Device()
    device.zero_copy = False
    with device.scratch():
        text = device.block_text(index, 0)
    for fill in range(3):
        with device.scratch():
            device.upload(np.full(text.nbytes, fill, dtype=np.uint8))
            device.output(np.empty(text.nbytes, dtype=np.uint8))
    back = np.empty_like(text.host)
    device.read_back(text.buffer, back)
    assert (back == text.host).all()
    assert device.block_text(index, 0) is text


def test_the_pool_follows_the_work():
    """Buffers a task took come back to the next one; a size that tasks stopped taking is let go."""
    device = Device()
    device.zero_copy = False
    big, small = np.ones(1 << 20, dtype=np.uint8), np.ones(1000, dtype=np.uint8)
    for _ in range(3):
        with device.scratch():
            device.upload(big)
            device.upload(small)
    assert device.scratch_buffers_made == 2
    for _ in range(3):  # a large task and a small one, in turn, keep what both take
        with device.scratch():
            device.upload(small)
        with device.scratch():
            device.upload(big)
    assert device.scratch_buffers_made == 2
    for _ in range(3):  # tasks that no longer take 1 MiB: it is let go
        with device.scratch():
            device.upload(small)
    with device.scratch():
        device.upload(big)
    assert device.scratch_buffers_made == 3


def test_a_failed_task_leaves_its_buffers_out_of_the_pool():
    device = Device()
    device.zero_copy = False
    with pytest.raises(RuntimeError), device.scratch():
        device.upload(np.ones(100, dtype=np.uint8))
        raise RuntimeError("the task failed")
    with device.scratch():
        device.upload(np.ones(100, dtype=np.uint8))
    assert device.scratch_buffers_made == 2


def test_recycled_arrays_come_back_once_nothing_refers_to_them():
    pool = RecycledArrays(min_base=4096)
    first = pool.take(5000)
    assert first.size == 5000 and first.dtype == np.uint8
    # Held in any form (a view of a view, an array over its buffer, a memoryview), it is not lent again.
    holders = [first[10:][:5], np.frombuffer(first[:8], np.uint64), memoryview(first)]
    del first
    for holder in holders:
        second = pool.take(6000)  # the same size class (8 KiB)
        assert not np.shares_memory(second, np.asarray(holder))
        del second
    assert pool.made == 2  # the second came back each time: only the first was held
    del holder, holders
    taken = [pool.take(4097) for _ in range(3)]  # both free ones, then a third: none lent twice
    assert pool.made == 3
    assert not any(np.shares_memory(a, b) for k, a in enumerate(taken) for b in taken[k + 1:])


def test_recycled_arrays_follow_the_work():
    """A base that no take has had for a while leaves the pool, so a standing worker keeps no more
    bases than its chunks in flight need now; sizes of a power of two's class share their arrays."""
    pool = RecycledArrays(min_base=4096)
    for _ in range(3):
        pool.take(1 << 20)
        pool.take((1 << 20) - 10)
    assert pool.made == 1
    held = [pool.take(1 << 20) for _ in range(3)]  # three chunks in flight: three bases
    assert pool.made == 3
    del held
    for _ in range(RECYCLE_TAKES):  # then one at a time: one base serves them, the others go
        pool.take(100)
    assert len(pool._entries) == 1
    both = [pool.take(1 << 20) for _ in range(2)]  # two in flight again: the one base, and a new one
    assert pool.made == 4 and both[0].base is not both[1].base


def test_recycled_arrays_serve_larger_takes_from_the_most_touched_base():
    """Chunks grow: a base made for a small take serves the larger ones after it (only the pages
    written cost memory), and a take gets the free base already written furthest."""
    pool = RecycledArrays(min_base=1 << 20)
    small, smaller = pool.take(100_000), pool.take(10_000)
    assert pool.made == 2
    smaller_base = smaller.base
    del small, smaller
    grown = pool.take(500_000)
    assert pool.made == 2 and grown.base is not smaller_base  # the base 100,000 bytes were written to
    bigger = pool.take(2 << 20)  # more than any base holds: a new one, of a power of two
    assert pool.made == 3 and bigger.base.size == 2 << 20
    del grown
    again = pool.take(200_000)
    assert pool.made == 3 and again.base is not smaller_base and again.base.size == 1 << 20


def test_records_kept_after_their_task_reuse_memory_no_longer_used():
    """SAM records that leave their task (``Device.recycled_array``) are correct whether their memory
    is fresh or recycled, and another task's records never overwrite records still held."""
    device = Device()
    held = [_search_and_format(device) for _ in range(3)]
    made = device.recycled.made
    assert made == 3 and len({id(r.base) for r in held}) == 3
    want = held[0].tobytes()
    assert all(r.tobytes() == want for r in held)
    del held
    for _ in range(3):
        assert _search_and_format(device).tobytes() == want
    assert device.recycled.made == made


def _search_case():
    text = "".join(np.random.default_rng(3).choice(list("ACGT"), size=2000))
    alphabet = alphabet_for("dna", [("t", text)])
    block = single_block(alphabet.reference_table[np.frombuffer(text.encode(), np.uint8)], alphabet)
    reads = [text[i : i + 25] for i in range(0, 1900, 11)]
    codes, offsets, lengths, _ = encode_reads(reads, alphabet, reads)
    return block, (codes, offsets, lengths, 2), backward_search_numpy(block, codes, offsets, lengths, 2)


def test_kernel_binaries_are_cached_on_disk(tmp_path, monkeypatch):
    monkeypatch.setenv("DMAP_KERNEL_CACHE", str(tmp_path))
    block, args, want = _search_case()
    first = Device()
    assert (search_block(first, first.upload_block(block), *args) == want).all()
    assert first._kernel_cache.loads == 0 and list(tmp_path.glob("*.bin"))
    assert not list(tmp_path.glob("*.partial"))
    # A new process (here: a new context) builds from the stored binary.
    second = Device()
    assert (search_block(second, second.upload_block(block), *args) == want).all()
    assert second._kernel_cache.loads == 1


def test_a_damaged_kernel_binary_is_rebuilt_from_source(tmp_path, monkeypatch):
    monkeypatch.setenv("DMAP_KERNEL_CACHE", str(tmp_path))
    block, args, want = _search_case()
    first = Device()
    search_block(first, first.upload_block(block), *args)
    for path in tmp_path.glob("*.bin"):
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data[: len(data) - 100]))
    second = Device()
    assert (search_block(second, second.upload_block(block), *args) == want).all()
    assert second._kernel_cache.loads == 0
    third = Device()  # the rebuilt binary was stored again
    search_block(third, third.upload_block(block), *args)
    assert third._kernel_cache.loads == 1


@pytest.mark.parametrize("setting", ["off", "unwritable"])
def test_without_a_kernel_cache_kernels_build_from_source(tmp_path, monkeypatch, setting):
    if setting == "unwritable":
        (tmp_path / "file").write_text("")
        monkeypatch.setenv("DMAP_KERNEL_CACHE", str(tmp_path / "file" / "kernels"))  # under a file: mkdir fails
    else:
        monkeypatch.setenv("DMAP_KERNEL_CACHE", "off")
    block, args, want = _search_case()
    for _ in range(2):
        device = Device()
        assert (search_block(device, device.upload_block(block), *args) == want).all()
        assert device._kernel_cache.loads == 0


def test_compiler_output_is_logged_not_warned(tmp_path, monkeypatch, caplog):
    """A kernel that builds with compiler output (NVIDIA's says something of every kernel)
    gives no Python warning on the user's terminal; the output goes to dmap's debug log."""
    import logging
    import warnings

    import dmap.opencl.device

    (tmp_path / "warns.cl").write_text('#warning "dmap test warning"\n__kernel void k(__global int *a) { a[0] = 1; }\n')
    monkeypatch.setattr(dmap.opencl.device, "kernel_dir", lambda: tmp_path)
    monkeypatch.setenv("DMAP_KERNEL_CACHE", "off")
    with warnings.catch_warnings(), caplog.at_level(logging.DEBUG, logger="dmap"):
        warnings.simplefilter("error")
        Device().program("warns.cl", {})
    assert "dmap test warning" in caplog.text


def test_a_kernel_that_does_not_build_is_an_error_that_reaches_the_client(tmp_path, monkeypatch):
    """A kernel the device's compiler refuses is a DeviceError naming the file and the compiler's
    words, raised with no pyopencl error as its context: Dask pickles a task's error with its
    context, pyopencl's do not pickle, and `dmap run` got a bare Exception and a traceback."""
    import pickle

    (tmp_path / "broken.cl").write_text("__kernel void k(__global int *a) { const int half = 1; a[0] = half; }\n")
    monkeypatch.setattr(device_module, "kernel_dir", lambda: tmp_path)
    monkeypatch.setenv("DMAP_KERNEL_CACHE", "off")
    with pytest.raises(DeviceError, match="building broken.cl for .* failed") as raised:
        Device().program("broken.cl", {})
    assert raised.value.__context__ is None
    assert type(pickle.loads(pickle.dumps(raised.value))) is DeviceError


@pytest.mark.parametrize("threads", [1, 2, 3, 8, 16])
def test_a_workers_declared_share_gives_back_its_device_tasks(threads):
    """The scheduler sees a worker's share of the device (``opencl`` = threads / 2 as a float);
    the client counts that worker's device tasks from it: one per thread."""
    assert device_tasks(device_resource(threads)) == threads
    assert device_tasks(0.25) == 1  # a worker started by hand with less than one task's share runs one
