"""dmap.io.output: which destinations are written in place, which are renamed into place, and what is refused."""

import os
import stat
import subprocess

import pytest

from dmap.errors import DmapError, DmapWarning, OutputError
from dmap.format import bgzf
from dmap.io import output
from dmap.io.output import Output, record_format, released_elsewhere, written_by_dmap

DMAP_SAM = b"@HD\tVN:1.6\tSO:unsorted\n@SQ\tSN:a\tLN:4\n@PG\tID:dmap\tPN:dmap\tVN:0\tCL:dmap run\nr\t4\t*\n"


def test_a_new_file_appears_only_when_committed(tmp_path):
    path = tmp_path / "o.sam"
    with Output(path) as out:
        out.file.write(b"@HD\n")
        assert not path.exists() and out.is_file
        assert [p.name for p in tmp_path.iterdir()] == [f"o.sam.partial-{os.getpid()}"]
    assert path.read_bytes() == b"@HD\n" and os.listdir(tmp_path) == ["o.sam"]


def test_what_a_failure_leaves_is_told_after_the_file_is_removed(tmp_path):
    """A failed run builds its message after removing the temporary file: it still says that no
    output was written (a file), not that the records so far are incomplete (a stream)."""
    out = Output(tmp_path / "out.sam")
    out.file.write(b"@HD\tVN:1.6\n")
    out.discard()
    assert out.after_failure == "no output was written"
    assert os.listdir(tmp_path) == []
    read_end, write_end = os.pipe()
    stream = Output(f"/dev/fd/{write_end}")
    stream.discard()
    os.close(read_end)
    os.close(write_end)
    assert stream.after_failure == "the records written so far are incomplete"


def test_a_failed_block_leaves_the_old_file(tmp_path):
    path = tmp_path / "o.sam"
    path.write_bytes(DMAP_SAM)
    with pytest.raises(KeyboardInterrupt), Output(path) as out:
        out.file.write(b"new")
        raise KeyboardInterrupt
    assert path.read_bytes() == DMAP_SAM and os.listdir(tmp_path) == ["o.sam"]


@pytest.mark.parametrize("content, ours", [
    (b"", True), (DMAP_SAM, True), (b"precious\n", False), (b"@HD\tVN:1.6\n@PG\tID:bwa\n", False),
    (b"@HD\tVN:1.6\nr\t4\t*\n@PG\tID:dmap\n", False),  # @PG after the header is not a header line
    (b"@HD\tVN:1.6\n", False), (b"@HD", False),
    # SAM text in BGZF blocks (dmap's sam.gz, bgzip's), by the same rules
    (bgzf.compress(DMAP_SAM) + bgzf.EOF, True), (bgzf.compress(b"precious\n") + bgzf.EOF, False),
    (bgzf.compress(b"@HD\tVN:1.6\n@PG\tID:bwa\n") + bgzf.EOF, False),
    (bgzf.compress(DMAP_SAM)[:40], False),  # a damaged block
])
def test_only_dmap_output_is_replaced(tmp_path, content, ours):
    path = tmp_path / "o.sam"
    path.write_bytes(content)
    assert written_by_dmap(str(path)) == ours
    if ours:
        with Output(path) as out:
            out.file.write(b"x")
        assert path.read_bytes() == b"x"
    else:
        with pytest.raises(OutputError, match="not a SAM or BAM file written by dmap"):
            Output(path)
        assert path.read_bytes() == content


@pytest.fixture
def keepers(monkeypatch):
    """The keeper processes :func:`released_elsewhere` starts."""
    started = []
    popen = subprocess.Popen

    def record(*args, **kwargs):
        started.append(popen(*args, **kwargs))
        return started[-1]
    monkeypatch.setattr(output.subprocess, "Popen", record)
    return started


def _holds(pid: int, inode: int) -> bool:
    """Whether process ``pid`` has the file ``inode`` open."""
    fds = f"/proc/{pid}/fd"
    for fd in os.listdir(fds):
        try:
            if os.stat(os.path.join(fds, fd)).st_ino == inode:
                return True
        except FileNotFoundError:  # closed since: the listing's own descriptor
            pass
    return False


def test_a_replaced_file_is_freed_by_a_keeper_that_ends_with_the_block(tmp_path, keepers):
    """The old file outlives the rename in the keeper alone, which exits when the block ends:
    freeing it is no longer the rename's work."""
    path, new = tmp_path / "o.sam", tmp_path / "o.sam.partial-1"
    path.write_bytes(DMAP_SAM)
    new.write_bytes(b"new")
    inode = path.stat().st_ino
    with released_elsewhere(str(path)):
        (keeper,) = keepers
        os.replace(new, path)
        assert keeper.poll() is None and _holds(keeper.pid, inode)
        assert not _holds(os.getpid(), inode)
    assert keeper.wait(timeout=60) == 0
    assert path.read_bytes() == b"new" and os.listdir(tmp_path) == ["o.sam"]



def test_an_output_replaced_by_a_run_is_freed_by_a_keeper(tmp_path, keepers):
    path = tmp_path / "o.sam"
    path.write_bytes(DMAP_SAM)
    with Output(path) as out:
        out.file.write(b"x")
    (keeper,) = keepers
    assert keeper.wait(timeout=60) == 0 and path.read_bytes() == b"x"


def test_no_keeper_for_a_new_name_or_a_file_with_other_names(tmp_path, keepers):
    path = tmp_path / "o.sam"
    os.mkfifo(tmp_path / "fifo")
    with released_elsewhere(str(tmp_path / "fifo")):  # not opened: that would wait for a writer
        pass
    with released_elsewhere(str(path)):  # nothing there yet
        path.write_bytes(DMAP_SAM)
    os.link(path, tmp_path / "other")  # the rename would free nothing
    with released_elsewhere(str(path)):
        os.replace(_written(tmp_path / "new", b"x"), path)
    assert keepers == [] and (tmp_path / "other").read_bytes() == DMAP_SAM


def test_without_a_keeper_the_rename_frees_the_file(tmp_path, monkeypatch):
    def fail(*args, **kwargs):
        raise OSError(11, "Resource temporarily unavailable")
    monkeypatch.setattr(output.subprocess, "Popen", fail)
    path = tmp_path / "o.sam"
    path.write_bytes(DMAP_SAM)
    replaced = path.stat()
    pipes = open_files(stat.S_ISFIFO)
    with Output(path) as out:
        out.file.write(b"x")
    assert path.read_bytes() == b"x" and os.listdir(tmp_path) == ["o.sam"]
    # The old file and the keeper's pipe closed.  Only those are looked for: the test process's
    # other threads (earlier tests' clusters) open and close descriptors of their own meanwhile.
    assert (replaced.st_dev, replaced.st_ino) not in open_files(stat.S_ISREG)
    assert open_files(stat.S_ISFIFO) <= pipes


def open_files(kind) -> set[tuple[int, int]]:
    """(device, inode) of this process's open descriptors of one kind (``stat.S_ISREG``, ...)."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            st = os.stat(f"/proc/self/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
        if kind(st.st_mode):
            found.add((st.st_dev, st.st_ino))
    return found


def _written(path, content: bytes):
    path.write_bytes(content)
    return path


def test_a_symlink_is_followed(tmp_path):
    (tmp_path / "real.sam").write_bytes(DMAP_SAM)
    (tmp_path / "link.sam").symlink_to("real.sam")
    with Output(tmp_path / "link.sam") as out:
        out.file.write(b"new")
    assert (tmp_path / "link.sam").is_symlink() and (tmp_path / "real.sam").read_bytes() == b"new"


def test_a_url_is_refused(tmp_path, monkeypatch):
    # Not a relative path whose folder ("s3:/bucket/") might exist: one line that says to pipe.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s3:" / "bucket").mkdir(parents=True)
    with pytest.raises(OutputError, match="'s3://bucket/o.sam' is a URL; dmap writes to a file or to standard out"):
        Output("s3://bucket/o.sam")
    assert list((tmp_path / "s3:" / "bucket").iterdir()) == []


def test_inputs_and_the_index_are_refused(tmp_path):
    reads = tmp_path / "r.fq"
    reads.write_bytes(b"")  # empty: it would pass as replaceable if it were not an input
    (tmp_path / "alias.fq").symlink_to("r.fq")
    for path in (reads, tmp_path / "alias.fq"):
        with pytest.raises(OutputError, match="also an input"):
            Output(path, inputs=[reads])
    (tmp_path / "idx").mkdir()
    with pytest.raises(OutputError, match="inside the index"):
        Output(tmp_path / "idx" / "new.sam", index=tmp_path / "idx")
    assert os.listdir(tmp_path / "idx") == []


def test_a_fifo_is_written_in_place(tmp_path):
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with Output(fifo) as out:
            assert not out.is_file
            out.file.write(b"abc")
        assert os.read(reader, 10) == b"abc"
    finally:
        os.close(reader)
    assert sorted(os.listdir(tmp_path)) == ["f"]


def test_a_descriptor_path_is_written_through_the_descriptor(tmp_path):
    path = tmp_path / "appended.sam"
    path.write_bytes(b"kept\n")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        with Output(f"/dev/fd/{fd}") as out:
            out.file.write(b"added\n")
    finally:
        os.close(fd)
    assert path.read_bytes() == b"kept\nadded\n"  # appended: neither truncated nor replaced


def test_a_directory_is_refused(tmp_path):
    with pytest.raises(OutputError, match="directory"):
        Output(tmp_path)


@pytest.mark.parametrize("packed", [False, True])
def test_a_header_is_looked_for_in_its_first_bytes_alone(tmp_path, monkeypatch, packed):
    """A file is read up to the header's scan limit, however long its lines: a file without
    newlines is not read whole."""
    monkeypatch.setattr("dmap.io.output._HEADER_SCAN_BYTES", 1000)
    path = tmp_path / "o.sam"
    for first_line, ours in ((b"@HD\t" + b"x" * 900, True), (b"@HD\t" + b"x" * 5000, False)):
        text = first_line + b"\n@PG\tID:dmap\tPN:dmap\n"
        path.write_bytes(bgzf.compress(text) + bgzf.EOF if packed else text)
        assert written_by_dmap(str(path)) == ours


@pytest.mark.parametrize("shift", range(-12, 2))
def test_a_header_read_in_blocks_is_judged_wherever_its_lines_fall(tmp_path, shift):
    """The header is read a megabyte at a time after its first 4 bytes: dmap's @PG line is found,
    and the first record ends the header, where they straddle the blocks' boundary."""
    path = tmp_path / "o.sam"
    first_line = b"@HD\t" + b"x" * ((1 << 20) + shift)  # its newline just before or after byte 4 + 1 MiB
    for rest, ours in ((b"\n@PG\tID:dmap\tPN:dmap\n", True), (b"\nr\t4\t*\n@PG\tID:dmap\n", False),
                       (b"\n@PG\tID:bwa\n@CO\tx\n", False)):
        path.write_bytes(first_line + rest)
        assert written_by_dmap(str(path)) == ours, rest


@pytest.mark.parametrize("name, chosen, alphabet, fmt", [
    ("o.sam", None, "dna", "sam"), ("o.BAM", None, "dna", "bam"), ("o.sam.gz", None, "dna", "sam.gz"),
    ("o.bgz", None, "protein", "sam.gz"), ("o.txt", None, "text", "sam"), ("o.bam", "sam", "dna", "sam"),
    ("o.cram", "sam.gz", "dna", "sam.gz"), ("-", "bam", "dna", "bam"),
])
def test_the_format_is_chosen_or_follows_the_name(name, chosen, alphabet, fmt):
    assert record_format(name, chosen, alphabet) == fmt


@pytest.mark.parametrize("name, chosen, alphabet, words", [
    ("o.cram", None, "dna", "dmap does not write CRAM"), ("o.CRAM", None, "dna", "samtools view -C"),
    ("o.bam", None, "protein", "cannot hold protein reads"), ("o", "cram", "dna", "not one of sam, bam, sam.gz"),
])
def test_formats_dmap_cannot_write_are_refused(name, chosen, alphabet, words):
    with pytest.raises(DmapError, match=words):
        record_format(name, chosen, alphabet)


def _abandoned(path, content: bytes = DMAP_SAM, age: float = 60):
    """A temporary output file as a run killed ``age`` seconds ago left it."""
    path.write_bytes(content)
    then = os.path.getmtime(path) - age
    os.utime(path, (then, then))
    return path


def test_a_killed_runs_temporary_file_is_removed_by_the_next_run(tmp_path):
    left = _abandoned(tmp_path / "o.sam.partial-99999999")
    empty = _abandoned(tmp_path / "o.sam.partial-99999998", b"")  # killed before its header
    with pytest.warns(DmapWarning) as warned, Output(tmp_path / "o.sam") as out:
        out.file.write(b"x")
    assert sorted(str(w.message) for w in warned) == [
        f"removed {p}, the temporary file of a run to the same output that was killed" for p in (empty, left)]
    assert not left.exists() and not empty.exists() and os.listdir(tmp_path) == ["o.sam"]


@pytest.mark.parametrize("name, content, age", [
    ("o.sam.partial-1", b"precious\n", 60),  # not dmap's output
    ("o.sam.partial-1", DMAP_SAM, 1),  # too new: its run may not have locked it yet
    ("o.sam.partial-x1", DMAP_SAM, 60),  # not a temporary name dmap gives
    ("other.sam.partial-1", DMAP_SAM, 60),  # another output's
])
def test_other_files_beside_the_output_stay(tmp_path, name, content, age):
    kept = _abandoned(tmp_path / name, content, age)
    with Output(tmp_path / "o.sam") as out:
        out.file.write(b"x")
    assert kept.read_bytes() == content


def test_the_temporary_file_of_a_live_run_stays(tmp_path):
    """A run holds its temporary file's lock while it lives; another run to the same output
    (here, of this process: a lock is held by an open file) leaves the file alone."""
    first = Output(tmp_path / "o.sam")
    first.file.write(DMAP_SAM)
    first.file.flush()
    then = os.path.getmtime(first.tmp) - 60
    os.utime(first.tmp, (then, then))
    held = first.tmp
    os.rename(held, tmp_path / "o.sam.partial-1")  # as a run of another process would have named it
    first.tmp = str(tmp_path / "o.sam.partial-1")
    with Output(tmp_path / "o.sam") as second:
        second.file.write(b"x")
    assert (tmp_path / "o.sam.partial-1").read_bytes() == DMAP_SAM
    first.discard()
    assert os.listdir(tmp_path) == ["o.sam"]
