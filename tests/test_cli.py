"""The dmap command: bad input gets one clear line, exit status 1 and no output file."""

import contextlib
import gzip
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pysam
import pytest
from helpers import (
    assert_clean_failure,
    dmap_cmd,
    examples,
    have,
    http_server,
    random_contig,
    sam_body,
    without_pg,
    write_fasta,
    write_fastq,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dmap

REF = [("chrA", "ACGTTGCATGCAAGTCCGATGACTGACTAGCTAGCTAGGATCGATCGGATC"), ("chrB", "TTTTGGGGCCCCAAAA")]


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    d = tmp_path_factory.mktemp("idx")
    write_fasta(d / "ref.fa", REF)
    r = dmap_cmd("index", d / "ref.fa", "-o", d / "idx", "--max-query-length", "20")
    assert r.returncode == 0, r.stderr
    return d / "idx"


def test_index_info_and_run(index, tmp_path):
    info = dmap_cmd("index", "info", index)
    assert info.returncode == 0 and "chrA" in info.stdout and "dna" in info.stdout
    write_fastq(tmp_path / "r.fq", ["GCATGCAAG", "GGGGCCCC"])
    r = dmap_cmd("run", index, tmp_path / "r.fq", "-o", tmp_path / "o.sam")
    assert r.returncode == 0, r.stderr
    body = [line.split("\t") for line in open(tmp_path / "o.sam") if not line.startswith("@")]
    assert [(f[0], f[2], f[3]) for f in body] == [("read0", "chrA", "6"), ("read1", "chrB", "5"),
                                                  ("read1", "chrB", "5")]


def test_verbose_says_where_the_time_went(index, tmp_path):
    write_fastq(tmp_path / "r.fq", ["GCATGCAAG", "GGGGCCCC"])
    r = dmap_cmd("run", index, tmp_path / "r.fq", "-o", tmp_path / "o.sam", "-v")
    assert r.returncode == 0, r.stderr
    number = r"(\d+\.\d\d)"
    m = re.search(rf"^dmap: time: {number} s to start \(interpreter, imports\), cluster {number} s up and "
                  rf"{number} s down, mapping {number} s; CPU {number} s \(user {number} s, system {number} s\), "
                  r"peak RSS (\d+) MiB \(this process\)$", r.stderr, re.M)
    assert m, r.stderr
    start, up, down, mapping, cpu, user, system = map(float, m.groups()[:7])
    total = float(re.search(rf"hits in {number} s", r.stderr).group(1))
    # Each of the four printed times is rounded to 0.01 s (0.005 either way), so the three parts
    # may add up to 0.02 s more than the printed whole; the epsilon absorbs float addition.
    assert start > 0 and up > 0 and min(down, mapping) >= 0 and up + down + mapping <= total + 0.02 + 1e-9
    assert abs(cpu - user - system) <= 0.011 and int(m.group(8)) > 0
    # Without -v there is no such line.
    r = dmap_cmd("run", index, tmp_path / "r.fq", "-o", tmp_path / "o.sam")
    assert r.returncode == 0 and "dmap: time:" not in r.stderr, r.stderr


def test_several_reads_files_map_as_one_run_in_order(index, tmp_path):
    write_fastq(tmp_path / "a.fq", ["GCATGCAAG"], ["a0"])
    write_fastq(tmp_path / "b.fq", ["GGGGCCCC", "TTTTGGGG"], ["b0", "b1"])
    (tmp_path / "b.fq.gz").write_bytes(gzip.compress((tmp_path / "b.fq").read_bytes()))
    r = dmap_cmd("run", index, f"{tmp_path / 'a.fq'},{tmp_path / 'b.fq.gz'},{tmp_path / 'a.fq'}")
    assert r.returncode == 0, r.stderr
    assert [line.split("\t")[0] for line in r.stdout.splitlines() if not line.startswith("@")] == [
        "a0", "b0", "b0", "b1", "b1", "a0"]
    # A missing file is found before the first is mapped, also when the output is a stream.
    r = dmap_cmd("run", index, f"{tmp_path / 'a.fq'},{tmp_path / 'missing.fq'}")
    assert r.returncode == 1 and r.stdout == "" and "does not exist" in r.stderr, r.stderr
    assert_clean_failure(dmap_cmd("run", index, f"{tmp_path / 'a.fq'},{tmp_path / 'missing.fq'}", "-o",
                                  tmp_path / "o.sam"), tmp_path / "o.sam", "missing.fq", "does not exist")


def test_a_mistyped_reads_path_is_told_before_dask_and_opencl_start(index, tmp_path):
    # The reads are checked first: a typo costs the command's own imports, not Dask's and OpenCL's
    # (0.7-0.9 s against 0.37 s to the error line on a 2-core VM).
    probe = ("import sys; from click.testing import CliRunner; from dmap.cli import main; "
             f"r = CliRunner().invoke(main, ['run', {str(index)!r}, {str(tmp_path / 'missing.fq')!r}]); "
             "print(r.exit_code, sorted(m for m in ('distributed', 'pyopencl', 'zarr') if m in sys.modules), "
             "'does not exist' in r.output)")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.stdout.split() == ["1", "[]", "True"], (r.stdout, r.stderr)


def test_reads_from_a_web_server(index, tmp_path):
    """A reads URL served over HTTP with byte ranges maps to the records of the local file."""
    write_fastq(tmp_path / "r.fq", ["GCATGCAAG", "GGGGCCCC", "TTTTGGGG"] * 50)
    local = dmap_cmd("run", index, tmp_path / "r.fq", "--chunk-size", "20")
    with http_server(tmp_path) as base:
        remote = dmap_cmd("run", index, f"{base}/r.fq", "--chunk-size", "20")
        missing = dmap_cmd("run", index, f"{base}/missing.fq")
    assert local.returncode == remote.returncode == 0, remote.stderr
    body = lambda r: [line for line in r.stdout.splitlines() if not line.startswith("@PG")]  # noqa: E731
    assert body(remote) == body(local) and len(body(local)) > 150
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1 and "does not exist" in missing.stderr


@pytest.mark.parametrize("compress", [False, True])
def test_reads_from_standard_input(index, tmp_path, compress):
    write_fastq(tmp_path / "r.fq", ["GCATGCAAG", "GGGGCCCC"])
    data = (tmp_path / "r.fq").read_bytes()
    r = subprocess.run([sys.executable, "-m", "dmap.cli", "run", str(index), "-", "-o", str(tmp_path / "o.sam")],
                       capture_output=True, input=gzip.compress(data) if compress else data, timeout=120)
    assert r.returncode == 0, r.stderr
    body = [line.split("\t") for line in open(tmp_path / "o.sam") if not line.startswith("@")]
    assert [(f[0], f[2], f[3]) for f in body] == [("read0", "chrA", "6"), ("read1", "chrB", "5"),
                                                  ("read1", "chrB", "5")]


def test_standard_input_redirected_from_a_file_is_read_as_a_stream(index, tmp_path):
    """``dmap run IDX - < r.fq``: standard input is a regular file, but workers cannot open it by
    name: the client reads it from its current offset, as it reads a pipe (a file named ``-``
    in the working directory is not read instead)."""
    write_fastq(tmp_path / "r.fq", ["GCATGCAAG", "GGGGCCCC", "TTTTGGGG"] * 50)
    (tmp_path / "-").write_text("@decoy\nACGT\n+\nIIII\n")
    by_name = dmap_cmd("run", index, tmp_path / "r.fq", "--chunk-size", "20")
    with open(tmp_path / "r.fq", "rb") as f:
        redirected = subprocess.run([sys.executable, "-m", "dmap", "run", str(index), "-", "--chunk-size", "20"],
                                    stdin=f, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    first = b"".join((tmp_path / "r.fq").read_bytes().splitlines(keepends=True)[:4])
    with open(tmp_path / "r.fq", "rb", buffering=0) as f:
        os.lseek(f.fileno(), len(first), os.SEEK_SET)  # past read0
        rest = subprocess.run([sys.executable, "-m", "dmap", "run", str(index), "-"], stdin=f,
                              capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert by_name.returncode == redirected.returncode == rest.returncode == 0, redirected.stderr + rest.stderr
    body = lambda r: [line for line in r.stdout.splitlines() if not line.startswith("@PG")]  # noqa: E731
    assert body(redirected) == body(by_name) and len(body(by_name)) > 150
    assert sam_body(rest.stdout) == [f for f in sam_body(by_name.stdout) if f[0] != "read0"]
    assert "decoy" not in rest.stdout


@pytest.mark.parametrize("reads", ["", "\ufeff", "\n\n", "\ufeff\r\n \n"])
def test_no_reads_give_a_header_alone(index, tmp_path, reads):
    """An empty input (a file, standard input, a byte-order mark or blank lines alone) maps to a SAM header."""
    (tmp_path / "r.fq").write_text(reads, encoding="utf-8")
    for source, stdin in ((tmp_path / "r.fq", None), ("-", reads)):
        r = dmap_cmd("run", index, source, "-o", tmp_path / "o.sam", stdin=stdin)
        assert r.returncode == 0, r.stderr
        text = (tmp_path / "o.sam").read_text()
        assert text.startswith("@HD\t") and not sam_body(text) and "0 reads" in r.stderr


BAD_READS = {
    "missing": None,
    "truncated": "@r1\nACGT\n+\nIIII\n@r2\nACG",
    "quality_length": "@r1\nACGT\n+\nIII\n",
    "binary": "\x00\x01\x02\xff\xfe" * 20,
    "not_fastx": "hello world\n",
    "long_name": "@" + "n" * 255 + "\nACGT\n+\nIIII\n",
    "no_name": "@" + "n" * 250 + "\nACGT\n+\nIIII\n@\nACGT\n+\nIIII\n",
    "tab_in_quality": "@r1\nACGT\n+\nIIII\n@r2 x\nACGT\n+\nII\tI\n",  # would cut a SAM record
    "space_in_quality": "@r1\nACGT\n+\nIIII\n@r2\nACGT\n+\n III\n",
}
# What a bad input's one line says: a long read name is cut short in it.
BAD_READS_SAY = {"long_name": ["SAM allows at most 254", "n" * 40 + "'..."],
                 "no_name": ["a read has no name", "n" * 40 + "'...)"],
                 "tab_in_quality": ["the quality of read 'r2' holds a tab"],
                 "space_in_quality": ["the quality of read 'r2' holds a space"]}
# Reads that cannot be searched: written unmapped, or with --strict an error.
ODD_READS = {
    "empty_read": "@r1\n\n+\n\n",
    "unknown_symbol": "@r1\nACG7T\n+\nIIIII\n",
    "too_long": "@r1\n" + "A" * 21 + "\n+\n" + "I" * 21 + "\n",
}


@pytest.mark.parametrize("case", sorted(BAD_READS))
def test_bad_reads(index, tmp_path, case):
    reads = tmp_path / "r.fq"
    if BAD_READS[case] is not None:
        reads.write_bytes(BAD_READS[case].encode("latin-1"))
    out = tmp_path / "o.sam"
    r = dmap_cmd("run", index, reads, "-o", out)
    assert_clean_failure(r, out, *BAD_READS_SAY.get(case, []))
    assert "n" * 41 not in r.stderr


def test_cram_reads_say_how_to_convert_them(index, tmp_path):
    """Reads given as CRAM: one line that names the format and says how to get FASTQ."""
    (tmp_path / "r.cram").write_bytes(b"CRAM\x03\x00" + bytes(60))
    out = tmp_path / "o.sam"
    assert_clean_failure(dmap_cmd("run", index, tmp_path / "r.cram", "-o", out), out,
                         "is CRAM, not FASTA, FASTQ or BAM", "samtools fastq r.cram > reads.fq")


def test_bam_reads_map_as_their_fastq(index, tmp_path):
    """Reads given as unaligned BAM (`samtools import`) map as the FASTQ they came from, and so does
    BAM in plain gzip (not BGZF, which no BAM writer makes), read as a stream."""
    reads = tmp_path / "r.fq"
    reads.write_text("@r1\nGCATGCAAG\n+\nIIIIIIIII\n@r2\nGGGGCCCC\n+\nIIIIIIII\n")
    subprocess.run(["samtools", "import", "-0", str(reads), "-o", str(tmp_path / "r.bam")], check=True)
    (tmp_path / "gz.bam").write_bytes(gzip.compress(gzip.decompress((tmp_path / "r.bam").read_bytes())))
    for name in ("r.fq", "r.bam", "gz.bam"):
        r = dmap_cmd("run", index, tmp_path / name, "-o", tmp_path / f"{name}.sam")
        assert r.returncode == 0, r.stderr
        assert without_pg((tmp_path / f"{name}.sam").read_bytes()) == without_pg((tmp_path / "r.fq.sam").read_bytes())


@pytest.mark.parametrize("case", sorted(ODD_READS))
def test_odd_reads_are_unmapped_or_with_strict_an_error(index, tmp_path, case):
    reads = tmp_path / "r.fq"
    reads.write_text("@ok\nGCATGCAAG\n+\nIIIIIIIII\n" + ODD_READS[case] + "@ok2\nGGGGCCCC\n+\nIIIIIIII\n")
    out = tmp_path / "o.sam"
    assert_clean_failure(dmap_cmd("run", index, reads, "-o", out, "--strict"), out)
    r = dmap_cmd("run", index, reads, "-o", out)
    assert r.returncode == 0, r.stderr
    body = sam_body(out.read_text())
    assert [f[0] for f in body] == ["ok", "r1", "ok2", "ok2"] and body[1][1:4] == ["4", "*", "0"]
    why = {"empty_read": "1 empty", "unknown_symbol": "1 unknown symbol", "too_long": "1 too long"}[case]
    assert f"1 reads written unmapped without a search ({why})" in r.stderr
    assert body[1][9] == {"empty_read": "*", "unknown_symbol": "ACGNT", "too_long": "A" * 21}[case]


def test_letters_other_than_acgt_are_n_in_dna_reads(index, tmp_path):
    """As bwa reads them: a J or an R does not stop a read from mapping where its other bases allow."""
    write_fastq(tmp_path / "r.fq", ["GCATGCAAG", "GCATGJAAG"])
    r = dmap_cmd("run", index, tmp_path / "r.fq", "-e", "1")
    assert r.returncode == 0 and "unmapped" not in r.stderr, r.stderr
    assert [(f[0], f[3], f[5]) for f in sam_body(r.stdout)] == [("read0", "6", "9M"), ("read1", "6", "9M")]


@pytest.mark.parametrize("fasta", [False, True])
def test_bom_and_blank_lines_around_the_records_are_accepted(index, tmp_path, fasta):
    text = ("\ufeff\n\n>r1\nGCATGCAAG\n>r2\n\n\n" if fasta  # r2 is empty
            else "\ufeff\r\n\n@r1\nGCATGCAAG\n+\nIIIIIIIII\n@r2\n\n+\n\n\n\n\r\n")
    (tmp_path / "r.fq").write_text(text, encoding="utf-8")
    for source, stdin in ((tmp_path / "r.fq", None), ("-", text)):
        r = dmap_cmd("run", index, source, stdin=stdin)
        assert r.returncode == 0, r.stderr
        assert [(f[0], f[1]) for f in sam_body(r.stdout)] == [("r1", "0"), ("r2", "4")]


@pytest.mark.parametrize("strict", [True, False])
def test_unknown_symbol_in_a_later_chunk_is_found_on_the_device(index, tmp_path, strict):
    """Only the first chunk is checked on the host; the search kernel checks the others."""
    write_fastq(tmp_path / "r.fq", ["ACGT", "GGCC", "AC7T", "ACGT"], ["r1", "r2", "r3", "r4"])
    out = tmp_path / "o.sam"
    r = dmap_cmd("run", index, tmp_path / "r.fq", "-o", out, "--chunk-size", "1", *(["--strict"] if strict else []))
    if strict:
        assert_clean_failure(r, out, "read 'r3'", "'7'", "dna alphabet")
    else:
        assert r.returncode == 0 and "(1 unknown symbol)" in r.stderr, r.stderr
        assert [f[1] for f in sam_body(out.read_text()) if f[0] == "r3"] == ["4"]


def test_bad_gzip(index, tmp_path):
    (tmp_path / "r.fq.gz").write_bytes(gzip.compress(b"@r1\nACGT\n+\nII")[:-10])
    r = dmap_cmd("run", index, tmp_path / "r.fq.gz", "-o", tmp_path / "o.sam")
    assert_clean_failure(r, tmp_path / "o.sam")


@pytest.mark.parametrize("case", ["missing", "empty", "unknown_symbol", "duplicate_names", "empty_contig"])
def test_bad_reference(tmp_path, case):
    ref = tmp_path / "ref.fa"
    ref.write_text({
        "missing": None, "empty": "", "unknown_symbol": ">a\nACGT1\n", "duplicate_names": ">a\nACGT\n>a x\nAC\n",
        "empty_contig": ">a\n>b\nACGT\n",
    }[case] or "") if case != "missing" else None
    out = tmp_path / "idx"
    assert_clean_failure(dmap_cmd("index", ref, "-o", out), out)


@pytest.mark.parametrize("alphabet", ["dna", "text"])
def test_reference_from_standard_input(tmp_path, alphabet):
    # One pass over the reference for DNA; the text alphabet needs two, which a pipe cannot give.
    r = dmap_cmd("index", "-", "-o", tmp_path / "idx", "--alphabet", alphabet, stdin=">a\nACGTTGCA\n")
    if alphabet == "dna":
        assert r.returncode == 0, r.stderr
    else:
        assert_clean_failure(r, tmp_path / "idx", "not a regular file")


def test_protein_reads_against_a_dna_index_get_a_warning(index, tmp_path):
    write_fastq(tmp_path / "r.fq", ["MKVLEEQW"])
    r = dmap_cmd("run", index, tmp_path / "r.fq", "-o", tmp_path / "o.sam")
    assert r.returncode == 0 and "Traceback" not in r.stderr
    assert r.stderr.startswith("dmap: warning: ") and "the index is of DNA" in r.stderr.splitlines()[0]


def test_dna_reads_against_a_protein_index_get_a_warning(tmp_path):
    write_fasta(tmp_path / "p.fa", [("p", "MKVLEEQWACDEFGHIKLMNPQRSTVWY")])
    assert dmap_cmd("index", tmp_path / "p.fa", "-o", tmp_path / "idx", "--alphabet", "protein").returncode == 0
    write_fastq(tmp_path / "r.fq", ["ACGTTGCA"])
    r = dmap_cmd("run", tmp_path / "idx", tmp_path / "r.fq", "-o", tmp_path / "o.sam")
    assert r.returncode == 0 and "dmap: warning: the reads hold only A, C, G, T and N" in r.stderr, r.stderr


def test_not_an_index(tmp_path):
    write_fastq(tmp_path / "r.fq", ["ACGT"])
    (tmp_path / "notidx").mkdir()
    for path in (tmp_path / "notidx", tmp_path / "nothere"):
        r = dmap_cmd("run", path, tmp_path / "r.fq", "-o", tmp_path / "o.sam")
        assert_clean_failure(r, tmp_path / "o.sam", "index")


def test_damaged_index(index, tmp_path):
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(index, broken)
    chunk = next(p for p in (broken / "blocks" / "0" / "occ").rglob("*") if p.is_file() and p.name != "zarr.json")
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2] ^= 0xFF
    chunk.write_bytes(bytes(data))
    write_fastq(tmp_path / "r.fq", ["ACGT"])
    r = dmap_cmd("run", broken, tmp_path / "r.fq", "-o", tmp_path / "o.sam")
    assert_clean_failure(r, tmp_path / "o.sam", "checksum")


def test_unreachable_scheduler(index, tmp_path):
    write_fastq(tmp_path / "r.fq", ["ACGT"])
    r = dmap_cmd("run", index, tmp_path / "r.fq", "-o", tmp_path / "o.sam", "--scheduler", "tcp://127.0.0.1:1")
    assert_clean_failure(r, tmp_path / "o.sam", "scheduler")


def test_no_opencl_device(index, tmp_path):
    write_fastq(tmp_path / "r.fq", ["ACGT"])
    env = dict(os.environ, OCL_ICD_VENDORS=str(tmp_path / "no-vendors"), OCL_ICD_FILENAMES="")
    r = subprocess.run([sys.executable, "-m", "dmap.cli", "run", str(index), str(tmp_path / "r.fq"), "-o",
                        str(tmp_path / "o.sam")], capture_output=True, text=True, env=env, timeout=120)
    assert_clean_failure(r, tmp_path / "o.sam", "OpenCL")


def test_existing_output_is_not_clobbered_on_failure(index, tmp_path):
    out = tmp_path / "o.sam"
    out.write_text("previous run\n")
    r = dmap_cmd("run", index, tmp_path / "missing.fq", "-o", out)
    assert r.returncode == 1 and out.read_text() == "previous run\n"


def test_output_directory_missing(index, tmp_path):
    write_fastq(tmp_path / "r.fq", ["ACGT"])
    out = tmp_path / "no" / "such" / "dir" / "o.sam"
    r = dmap_cmd("run", index, tmp_path / "r.fq", "-o", out)
    assert r.returncode == 1 and "Traceback" not in r.stderr and "cannot write" in r.stderr


def test_a_mistyped_command_line_is_one_line(index, tmp_path):
    """Usage errors (a missing argument, a bad value, a directory for a file, an unknown command)
    are one ``dmap: error:`` line naming the help to read, exit status 2, nothing written."""
    write_fastq(tmp_path / "r.fq", ["ACGT"])
    cases = {("run",): "Missing argument 'INDEX'; see '",
             ("run", index, tmp_path, "-o", tmp_path / "o.sam"): "is a directory; see '",
             ("run", index, tmp_path / "r.fq", "-o", tmp_path / "o.sam", "-e", "x"): "'x' is not a valid integer",
             ("frobnicate",): "No such command 'frobnicate'; see '"}
    for args, message in cases.items():
        r = dmap_cmd(*args)
        assert r.returncode == 2 and r.stdout == "", r
        assert r.stderr.startswith("dmap: error: ") and message in r.stderr and r.stderr.count("\n") == 1, r.stderr
        assert r.stderr.endswith(f"{args[0]} --help'\n" if args[0] == "run" else "dmap --help'\n"), r.stderr
    assert not (tmp_path / "o.sam").exists()


def test_max_errors_out_of_range(index, tmp_path):
    write_fastq(tmp_path / "r.fq", ["ACGT"])
    for k in ("-1", "33"):
        r = dmap_cmd("run", index, tmp_path / "r.fq", "-o", tmp_path / "o.sam", "--max-errors", k)
        assert_clean_failure(r, tmp_path / "o.sam", "--max-errors must be between 0 and 32")


def test_read_too_long_for_max_errors(tmp_path):
    write_fasta(tmp_path / "ref.fa", [("g", "ACGT" * 50)])
    assert dmap_cmd("index", tmp_path / "ref.fa", "-o", tmp_path / "idx", "-L", "30").returncode == 0
    write_fastq(tmp_path / "r.fq", ["ACGT" * 7])  # 28 symbols: fits L = 30 exactly, not with 3 errors
    assert dmap_cmd("run", tmp_path / "idx", tmp_path / "r.fq", "-o", tmp_path / "exact.sam").returncode == 0
    r = dmap_cmd("run", tmp_path / "idx", tmp_path / "r.fq", "-o", tmp_path / "o.sam", "--max-errors", "3",
                 "--strict")
    assert_clean_failure(r, tmp_path / "o.sam", "maximum query length")
    r = dmap_cmd("run", tmp_path / "idx", tmp_path / "r.fq", "-o", tmp_path / "o.sam", "--max-errors", "3")
    assert r.returncode == 0 and "(1 too long)" in r.stderr, r.stderr
    assert [f[1] for f in sam_body((tmp_path / "o.sam").read_text())] == ["4"]


def test_approximate_run(tmp_path):
    rng = np.random.default_rng(2)
    genome = "".join(rng.choice(list("ACGT"), size=3000))
    write_fasta(tmp_path / "ref.fa", [("g", genome)])
    assert dmap_cmd("index", tmp_path / "ref.fa", "-o", tmp_path / "idx").returncode == 0
    read = genome[500:540] + genome[541:600]  # one deletion
    write_fastq(tmp_path / "r.fq", [read, "".join(rng.choice(list("ACGT"), size=40))])
    for seed_edits in ("auto", "0", "1", "2"):
        r = dmap_cmd("run", tmp_path / "idx", tmp_path / "r.fq", "-o", tmp_path / "o.sam", "-e", "2", "--all",
                     "--seed-edits", seed_edits)
        assert r.returncode == 0, r.stderr
        recs = [line.split("\t") for line in (tmp_path / "o.sam").read_text().splitlines()
                if not line.startswith("@")]
        assert recs[0][3:5] == ["501", "60"] and re.fullmatch(r"\d+M1D\d+M", recs[0][5]) and "NM:i:1" in recs[0]
        assert recs[1][1] == "4"


def test_text_reads_with_a_tab_are_rejected(tmp_path):
    write_fasta(tmp_path / "ref.fa", [("t", "some plain text, and more text")])
    assert dmap_cmd("index", tmp_path / "ref.fa", "-o", tmp_path / "idx", "--alphabet", "text").returncode == 0
    (tmp_path / "r.fa").write_text(">q\nplain\ttext\n")
    r = dmap_cmd("run", tmp_path / "idx", tmp_path / "r.fa", "-o", tmp_path / "o.sam", "--strict")
    assert_clean_failure(r, tmp_path / "o.sam", "alphabet")
    r = dmap_cmd("run", tmp_path / "idx", tmp_path / "r.fa", "-o", tmp_path / "o.sam")
    assert r.returncode == 0 and [f[1] for f in sam_body((tmp_path / "o.sam").read_text())] == ["4"]


def test_neighborhood_index_and_phash_run(tmp_path):
    rng = np.random.default_rng(3)
    genome = "".join(rng.choice(list("ACGT"), size=4000))
    write_fasta(tmp_path / "ref.fa", [("g", genome)])
    r = dmap_cmd("index", tmp_path / "ref.fa", "-o", tmp_path / "idx", "--neighborhood", "--seed-length", "8",
                 "--neighborhood-length", "7", "--spaced-seed", "######-##", "--max-errors-in-neighborhood", "1")
    assert r.returncode == 0, r.stderr
    info = dmap_cmd("index", "info", tmp_path / "idx").stdout
    assert "neighborhood   seed ######-##, neighborhood length 7, 1 substitution(s)" in info
    read = genome[700:740] + "A" + genome[741:800]  # one substitution (or none)
    write_fastq(tmp_path / "r.fq", [read, "".join(rng.choice(list("ACGT"), size=60))])
    r = dmap_cmd("run", tmp_path / "idx", tmp_path / "r.fq", "-o", tmp_path / "o.sam", "-e", "2", "--engine", "phash",
                 "--delta", "2")
    assert r.returncode == 0, r.stderr
    assert re.search(r"; \d+\.\d\d candidate regions per read", r.stderr), r.stderr
    recs = [line.split("\t") for line in (tmp_path / "o.sam").read_text().splitlines() if not line.startswith("@")]
    assert recs[0][3] == "701" and recs[1][1] == "4"


@pytest.mark.parametrize("args, words", [
    (["--neighborhood", "--seed-length", "8", "--spaced-seed", "#####-##"], ["--spaced-seed", "--seed-length"]),
    (["--neighborhood", "--neighborhood-length", "40"], ["--neighborhood-length"]),
    (["--neighborhood", "--max-errors-in-neighborhood", "5"], ["--max-errors-in-neighborhood"]),
])
def test_bad_neighborhood_options(tmp_path, args, words):
    write_fasta(tmp_path / "ref.fa", REF)
    out = tmp_path / "idx"
    assert_clean_failure(dmap_cmd("index", tmp_path / "ref.fa", "-o", out, *args), out, *words)


@pytest.mark.parametrize("args, words", [
    (["--error-rate", "0.05", "-e", "2"], ["either --max-errors or --error-rate"]),
    (["--error-rate", "five"], ["--error-rate takes a fraction", "'five'"]),
    (["--error-rate", "120%"], ["--error-rate must be above 0 and below 1"]),
    (["--error-rate", "0"], ["--error-rate must be above 0"]),
])
def test_a_bad_error_rate_is_one_line(index, tmp_path, args, words):
    write_fastq(tmp_path / "r.fq", ["ACGTTGCATGCAAGTCCG"])
    assert_clean_failure(dmap_cmd("run", index, tmp_path / "r.fq", "-o", tmp_path / "o.sam", *args),
                         tmp_path / "o.sam", *words)


def test_phash_needs_a_neighborhood_index(index, tmp_path):
    write_fastq(tmp_path / "r.fq", ["ACGTTGCATGCAAGTCCG"])
    r = dmap_cmd("run", index, tmp_path / "r.fq", "-o", tmp_path / "o.sam", "-e", "1", "--engine", "phash")
    assert_clean_failure(r, tmp_path / "o.sam", "no neighborhood index", "--neighborhood")


def test_seed_edits_need_the_fm_engine_and_a_format_4_index(index, tmp_path):
    write_fastq(tmp_path / "r.fq", ["ACGTTGCATGCAAGTCCG"])
    r = dmap_cmd("run", index, tmp_path / "r.fq", "-o", tmp_path / "o.sam", "-e", "1", "--engine", "phash",
                 "--seed-edits", "1")
    assert_clean_failure(r, tmp_path / "o.sam", "--seed-edits applies only to --engine fm")
    import shutil

    import zarr

    old = tmp_path / "v3"
    shutil.copytree(index, old)
    group = zarr.open_group(str(old), mode="r+")
    group.attrs["dmap"] = {**group.attrs["dmap"], "format_version": 3, "reverse_index": False}
    r = dmap_cmd("run", old, tmp_path / "r.fq", "-o", tmp_path / "o.sam", "-e", "1", "--seed-edits", "1")
    assert_clean_failure(r, tmp_path / "o.sam", "format version 3", "rebuild", "--seed-edits 0")
    r = dmap_cmd("run", old, tmp_path / "r.fq", "-o", tmp_path / "o.sam", "-e", "1")  # auto: exact pieces
    assert r.returncode == 0, r.stderr


def test_verbose_shows_dmap_debug_messages_once(capsys):
    """``dmap run -v`` puts dmap's debug log (e.g. OpenCL compiler output) on stderr, one line per message
    even when run() is called again in the same process."""
    import logging

    from dmap.cli import _show_dmap_logs

    log = logging.getLogger("dmap")
    before = (log.level, list(log.handlers))
    try:
        _show_dmap_logs()
        _show_dmap_logs()
        logging.getLogger("dmap.opencl.device").debug("compiler output for X: hello")
        assert capsys.readouterr().err.count("dmap.opencl.device: compiler output for X: hello") == 1
    finally:
        log.setLevel(before[0])
        log.handlers[:] = before[1]


@pytest.mark.parametrize("command", ["index info", "run"])
def test_garbage_collection_resumes_once_a_command_has_started(index, tmp_path, command):
    """``dmap`` (dmap/__main__.py) pauses collection for the start; every command turns it back on."""
    import gc

    from click.testing import CliRunner

    from dmap import cli

    write_fastq(tmp_path / "r.fq", ["GCATGCAAG"])
    args = ["index", "info", str(index)] if command == "index info" else [
        "run", str(index), str(tmp_path / "r.fq"), "-o", str(tmp_path / "o.sam")]
    gc.disable()
    cli._gc_paused = True
    try:
        result = CliRunner().invoke(cli.main, args)
        assert result.exit_code == 0, result.output
        assert gc.isenabled() and not cli._gc_paused
    finally:
        cli._gc_paused = False
        gc.unfreeze()
        gc.enable()


def test_the_installed_command_and_python_m_dmap(tmp_path):
    script = os.path.join(os.path.dirname(sys.executable), "dmap")
    for cmd in ([script], [sys.executable, "-m", "dmap"]):
        if cmd[0] == script and not os.path.exists(script):
            continue  # not installed with its scripts
        r = subprocess.run([*cmd, "--version"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and "dmap" in r.stdout, r.stderr


# --- Safe in a pipeline: outputs that are not regular files, what is never replaced, signals ---


def test_file_names_that_are_not_utf8(index, tmp_path):
    """A file name is bytes, not always UTF-8 (Python's argv holds such bytes as lone
    surrogates): the run reads and writes such files, and the @PG line shows those bytes as
    \\xNN escapes, so that the header stays UTF-8 text."""
    write_fastq(tmp_path / "r.fq", ["GCATGCAAG"])
    reads, out = tmp_path / os.fsdecode(b"r\xff\xfe.fq"), tmp_path / os.fsdecode(b"o\xff.sam")
    os.rename(tmp_path / "r.fq", reads)
    r = subprocess.run([sys.executable, "-m", "dmap", "run", os.fsencode(index), os.fsencode(reads), b"-o",
                        os.fsencode(out)], capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    with pysam.AlignmentFile(os.fsencode(out)) as sam:
        assert f"'{tmp_path}/r\\xff\\xfe.fq' -o '{tmp_path}/o\\xff.sam'" in sam.header.to_dict()["PG"][0]["CL"]
        assert [a.reference_start for a in sam] == [5]


@pytest.mark.parametrize("closed, args, line", [
    (">&-", [], "cannot write 'standard output': it is closed; give an output file with -o"),
    ("<&-", ["-", "-o", "o.sam"], "standard input ('-') is closed; give the reads file's name instead"),
])
def test_a_closed_standard_stream_asked_for_is_one_line(index, tmp_path, closed, args, line):
    """``dmap run ... >&-``: no standard output at all (Python's sys.stdout is None), or no
    standard input for reads given as '-'."""
    write_fastq(tmp_path / "r.fq", ["GCATGCAAG"])
    cmd = f"{sys.executable} -m dmap run {index} {' '.join(args) or tmp_path / 'r.fq'} {closed}"
    r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert (r.returncode, r.stderr) == (1, f"dmap: error: {line}\n")
    assert sorted(os.listdir(tmp_path)) == ["r.fq"]


def test_a_closed_standard_error_takes_no_file_of_the_run(index, tmp_path):
    """``dmap run ... 2>&-``: a descriptor that is closed is the number the next file opened
    gets, and what a library writes to standard error would go into that file (an internal
    pipe of the run, here, or the output).  dmap holds the null device there for the whole
    run, and the run writes what it writes with standard error open."""
    write_fastq(tmp_path / "r.fq", ["GCATGCAAG"] * 200_000)
    fifo = tmp_path / "r.fifo"
    os.mkfifo(fifo)
    p = subprocess.Popen([sys.executable, "-m", "dmap", "run", index, fifo, "-o", tmp_path / "o.sam"],
                         preexec_fn=lambda: os.close(2))
    with open(fifo, "wb") as reads:
        data = (tmp_path / "r.fq").read_bytes()
        reads.write(data[: len(data) // 2])
        reads.flush()
        deadline = time.monotonic() + 60
        while not any(".partial-" in name for name in os.listdir(tmp_path)):  # in the middle of the run
            assert time.monotonic() < deadline and p.poll() is None
            time.sleep(0.05)
        assert os.readlink(f"/proc/{p.pid}/fd/2") == os.devnull
        reads.write(data[len(data) // 2 :])
    assert p.wait(timeout=120) == 0
    plain = dmap_cmd("run", index, tmp_path / "r.fq")
    assert without_pg((tmp_path / "o.sam").read_bytes()) == without_pg(plain.stdout.encode())


def test_sam_goes_to_standard_output_without_o(index, tmp_path):
    write_fastq(tmp_path / "r.fq", ["GCATGCAAG", "GGGGCCCC"])
    for extra in ([], ["-o", "-"]):
        r = dmap_cmd("run", index, tmp_path / "r.fq", *extra, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("@HD\t") and len(sam_body(r.stdout)) == 3
        assert "@HD" not in r.stderr and "-> standard output" in r.stderr  # messages only on stderr
        assert sorted(os.listdir(tmp_path)) == ["r.fq"]


def test_standard_output_into_samtools(index, tmp_path):
    write_fastq(tmp_path / "r.fq", ["GCATGCAAG", "GGGGCCCC"])
    cmd = f"{sys.executable} -m dmap run {index} {tmp_path / 'r.fq'} | samtools view -c -"
    r = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "3", r.stderr


def test_a_reader_that_closes_the_pipe_ends_the_run_quietly(index, tmp_path):
    write_fastq(tmp_path / "r.fq", ["GCATGCAAG"] * 20000)
    cmd = f"{sys.executable} -m dmap run {index} {tmp_path / 'r.fq'} | head -c 10 >/dev/null"
    r = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True, timeout=120)
    assert r.returncode == 141 and "Traceback" not in r.stderr and "error" not in r.stderr, r.stderr


def test_process_substitution_and_dev_stdout(index, tmp_path):
    write_fastq(tmp_path / "r.fq", ["GCATGCAAG", "GGGGCCCC"])
    cmd = (f"{sys.executable} -m dmap run {index} {tmp_path / 'r.fq'} -o >(samtools view -c - > {tmp_path}/count);"
           f" wait $!; {sys.executable} -m dmap run {index} {tmp_path / 'r.fq'} -o /dev/stdout > {tmp_path}/o.sam")
    r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "count").read_text().strip() == "3"
    assert len(sam_body((tmp_path / "o.sam").read_text())) == 3
    assert os.path.islink("/dev/stdout") or not os.path.exists("/dev/stdout")  # still the system's link


def test_fifo_output_is_written_in_place(index, tmp_path):
    write_fastq(tmp_path / "r.fq", ["GCATGCAAG", "GGGGCCCC"])
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE, text=True)
    r = dmap_cmd("run", index, tmp_path / "r.fq", "-o", fifo)
    text, _ = reader.communicate(timeout=60)
    assert r.returncode == 0, r.stderr
    assert len(sam_body(text)) == 3 and fifo.is_fifo()
    assert sorted(os.listdir(tmp_path)) == ["out.fifo", "r.fq"]


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")
def test_character_device_output_is_written_in_place(index, tmp_path):
    write_fastq(tmp_path / "r.fq", ["GCATGCAAG", "GGGGCCCC"])
    null = tmp_path / "mynull"
    try:
        os.mknod(null, 0o666 | __import__("stat").S_IFCHR, os.makedev(1, 3))
    except PermissionError:  # a container may refuse device nodes even to root
        pytest.skip("this machine refuses mknod")
    r = dmap_cmd("run", index, tmp_path / "r.fq", "-o", null)
    assert r.returncode == 0, r.stderr
    assert null.is_char_device() and sorted(os.listdir(tmp_path)) == ["mynull", "r.fq"]


def test_symlinked_output_keeps_the_link(index, tmp_path):
    write_fastq(tmp_path / "r.fq", ["GCATGCAAG"])
    (tmp_path / "results").mkdir()
    (tmp_path / "o.sam").symlink_to(tmp_path / "results" / "o.sam")  # a dangling link: the target is made
    r = dmap_cmd("run", index, tmp_path / "r.fq", "-o", tmp_path / "o.sam")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "o.sam").is_symlink() and len(sam_body((tmp_path / "results" / "o.sam").read_text())) == 1


@pytest.mark.parametrize("target", ["reads", "index", "foreign"])
def test_outputs_that_would_destroy_data_are_refused(index, tmp_path, target):
    write_fastq(tmp_path / "r.fq", ["GCATGCAAG"])
    before = (tmp_path / "r.fq").read_bytes()
    out = {"reads": tmp_path / "r.fq", "index": index / "zarr.json", "foreign": tmp_path / "notes.txt"}[target]
    if target == "foreign":
        out.write_text("a week of notes\n")
    saved = out.read_bytes()
    r = dmap_cmd("run", index, tmp_path / "r.fq", "-o", out)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith("dmap: error: output") and len(r.stderr.splitlines()) == 1
    assert out.read_bytes() == saved and (tmp_path / "r.fq").read_bytes() == before
    assert not [p for p in os.listdir(out.parent) if ".partial-" in p]


def test_a_second_run_replaces_dmaps_own_output(index, tmp_path):
    write_fastq(tmp_path / "r.fq", ["GCATGCAAG"])
    for _ in range(2):
        r = dmap_cmd("run", index, tmp_path / "r.fq", "-o", tmp_path / "o.sam")
        assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("where", ["directory", "cwd"])
def test_index_overwrite_replaces_only_an_index(tmp_path, where):
    write_fasta(tmp_path / "ref.fa", REF)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("x")
    target, cwd = (victim, None) if where == "directory" else (".", victim)
    r = dmap_cmd("index", tmp_path / "ref.fa", "-o", target, "--overwrite", cwd=cwd)
    assert r.returncode == 1 and "is not a dmap index" in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
    assert sorted(os.listdir(victim)) == ["precious.txt"]


def test_index_overwrite_replaces_an_index(tmp_path):
    write_fasta(tmp_path / "ref.fa", REF)
    for extra in ([], ["--overwrite"]):
        r = dmap_cmd("index", tmp_path / "ref.fa", "-o", tmp_path / "idx", *extra)
        assert r.returncode == 0, r.stderr
    r = dmap_cmd("index", tmp_path / "ref.fa", "-o", tmp_path / "idx")
    assert r.returncode == 1 and "--overwrite" in r.stderr
    assert sorted(os.listdir(tmp_path)) == ["idx", "ref.fa"]


def test_a_full_disk_while_indexing_is_one_line(tmp_path):
    """RLIMIT_FSIZE makes the index's writes fail (EFBIG) as a full disk would (ENOSPC)."""
    import resource
    import signal

    rng = np.random.default_rng(5)
    write_fasta(tmp_path / "ref.fa", [("g", "".join(rng.choice(list("ACGT"), size=200_000)))])

    def small_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (50_000, 50_000))

    r = subprocess.run([sys.executable, "-m", "dmap", "index", str(tmp_path / "ref.fa"), "-o", str(tmp_path / "idx")],
                       capture_output=True, text=True, timeout=120, preexec_fn=small_files)
    assert_clean_failure(r, tmp_path / "idx", "cannot write the index")
    assert sorted(os.listdir(tmp_path)) == ["ref.fa"]


def signal_mid_run(index, tmp_path, sig: str, preexec_fn=None) -> tuple[subprocess.Popen, str]:
    """Send ``sig`` to a run that maps reads from a pipe which stays open, so the run is in its
    middle when the signal comes (more than one 4 MB piece is sent, so that the first chunks are
    mapped and written); then send the rest of the reads and close the pipe.  Returns the ended
    process and its standard error."""
    import signal

    write_fastq(tmp_path / "r.fq", ["GCATGCAAG"] * 200_000)
    text = (tmp_path / "r.fq").read_text()
    # start_new_session: SIGINT is not ignored, as it is for a shell's background job
    p = subprocess.Popen([sys.executable, "-m", "dmap", "run", str(index), "-", "-o", str(tmp_path / "o.sam")],
                         stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                         preexec_fn=preexec_fn)
    p.stdin.write(text[: len(text) // 2])
    p.stdin.flush()
    deadline = time.monotonic() + 60
    while not any(".partial-" in name for name in os.listdir(tmp_path)):  # the run has started writing
        assert time.monotonic() < deadline and p.poll() is None
        time.sleep(0.05)
    p.send_signal(getattr(signal, sig))
    with contextlib.suppress(BrokenPipeError):  # a run that stopped has closed its end
        p.stdin.write(text[len(text) // 2 :])
    err = p.communicate(timeout=60)[1]
    return p, err


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP", "SIGINT", "SIGUSR1", "SIGUSR2", "SIGXCPU"])
def test_termination_signals_leave_nothing_partial(index, tmp_path, sig):
    """The signals that schedulers, terminals and limits send to end a job or to warn it of its
    end (SIGUSR1 and SIGUSR2: SLURM's --signal, SGE's -notify; SIGXCPU: a CPU-time limit) stop a
    run as Ctrl-C does, SIGUSR1 and SIGXCPU too, which PoCL's LLVM would take for itself."""
    import signal

    p, err = signal_mid_run(index, tmp_path, sig)
    assert p.returncode == 128 + getattr(signal, sig), err
    assert err.strip() == f"dmap: stopped by {sig}; no partial output file was left"
    assert sorted(os.listdir(tmp_path)) == ["r.fq"]


def test_a_run_under_nohup_goes_on_after_sighup(index, tmp_path):
    """``nohup`` starts a command with SIGHUP ignored, so that it outlives its terminal: the run
    keeps it ignored, and maps all its reads."""
    import signal

    p, err = signal_mid_run(index, tmp_path, "SIGHUP", preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    assert p.returncode == 0, err
    plain = dmap_cmd("run", index, tmp_path / "r.fq")
    assert plain.returncode == 0, plain.stderr
    assert without_pg((tmp_path / "o.sam").read_bytes()) == without_pg(plain.stdout.encode())


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux's /proc")
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_signal_taken_by_another_thread_stops_a_run_that_waits_for_input(index, tmp_path, sig):
    """A signal sent to a process goes to any of its threads.  Here it is sent to one of
    dmap's other threads (``tgkill``) while the main thread waits to read a FIFO whose
    writer has sent all it has: the run must stop as it does when the main thread takes it."""
    import ctypes
    import signal
    import time

    write_fastq(tmp_path / "r.fq", ["GCATGCAAG"] * 200_000)
    fifo, out = tmp_path / "r.fifo", tmp_path / "o.sam"
    os.mkfifo(fifo)
    p = subprocess.Popen([sys.executable, "-m", "dmap", "run", str(index), str(fifo), "-o", str(out)],
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    with open(fifo, "wb") as reads:
        reads.write((tmp_path / "r.fq").read_bytes())
        reads.flush()
        main = Path(f"/proc/{p.pid}/task/{p.pid}/wchan")
        deadline = time.monotonic() + 60
        while "pipe_read" not in main.read_text() or not any(".partial-" in n for n in os.listdir(tmp_path)):
            assert time.monotonic() < deadline and p.poll() is None  # all is read and the first chunks written
            time.sleep(0.05)
        other = next(int(t) for t in os.listdir(f"/proc/{p.pid}/task") if int(t) != p.pid)
        assert ctypes.CDLL(None, use_errno=True).tgkill(p.pid, other, getattr(signal, sig)) == 0
        try:
            err = p.communicate(timeout=60)[1]
        except subprocess.TimeoutExpired:
            p.kill()
            pytest.fail(f"{sig} taken by thread {other} did not stop the run")
    assert p.returncode == 128 + getattr(signal, sig), err
    assert err.strip() == f"dmap: stopped by {sig}; no partial output file was left"
    assert sorted(os.listdir(tmp_path)) == ["r.fifo", "r.fq"]


def test_the_next_run_removes_what_a_killed_run_left(index, tmp_path):
    """SIGKILL (the OOM killer, ``srun`` passing on a job's cancellation) leaves a run no time to
    remove its temporary file; the next run to the same output removes it and says so."""
    import signal
    import time

    write_fastq(tmp_path / "r.fq", ["GCATGCAAG"] * 200_000)
    fifo, out = tmp_path / "r.fifo", tmp_path / "o.sam"
    os.mkfifo(fifo)
    p = subprocess.Popen([sys.executable, "-m", "dmap", "run", str(index), str(fifo), "-o", str(out)],
                         stderr=subprocess.DEVNULL, start_new_session=True)
    with open(fifo, "wb") as reads:
        reads.write((tmp_path / "r.fq").read_bytes())
        reads.flush()
        deadline = time.monotonic() + 60
        while not (left := [n for n in os.listdir(tmp_path) if ".partial-" in n]):
            assert time.monotonic() < deadline and p.poll() is None
            time.sleep(0.05)
        p.send_signal(signal.SIGKILL)
        p.wait()
    assert left == [f"o.sam.partial-{p.pid}"]
    partial = tmp_path / left[0]
    then = partial.stat().st_mtime - 60  # as if it had been left a minute ago
    os.utime(partial, (then, then))
    r = dmap_cmd("run", index, tmp_path / "r.fq", "-o", out)
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines()[0] == (f"dmap: warning: removed {partial}, the temporary file of a run to the "
                                        "same output that was killed")
    assert sorted(os.listdir(tmp_path)) == ["o.sam", "r.fifo", "r.fq"]
    assert len(sam_body(out.read_text())) == 200_000


def test_the_next_build_removes_what_a_killed_build_left(tmp_path):
    """An index build killed outright (the OOM killer) leaves its temporary folder, which may be
    as large as the index; the next build of the same index removes it and says so."""
    import signal
    import time

    write_fasta(tmp_path / "ref.fa", REF)
    p = subprocess.Popen([sys.executable, "-m", "dmap", "index", "-", "-o", str(tmp_path / "idx")],
                         stdin=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    p.stdin.write(b">g\nACGT\n")  # the reference goes on: the build waits for the rest of it
    p.stdin.flush()
    lock = tmp_path / f"idx.partial-{p.pid}" / ".dmap-lock"
    deadline = time.monotonic() + 60
    while not lock.exists():
        assert time.monotonic() < deadline and p.poll() is None
        time.sleep(0.05)
    p.send_signal(signal.SIGKILL)
    p.wait()
    p.stdin.close()
    then = lock.stat().st_mtime - 60  # as if it had been left a minute ago
    os.utime(lock, (then, then))
    r = dmap_cmd("index", tmp_path / "ref.fa", "-o", tmp_path / "idx")
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines()[0] == (f"dmap: warning: removed {lock.parent}, the temporary folder of a build "
                                        "of the same index that was killed")
    assert sorted(os.listdir(tmp_path)) == ["idx", "ref.fa"]
    assert not (tmp_path / "idx" / ".dmap-lock").exists()


# --- FASTQ comments appended to the records (-C) ---


def _commented_case(tmp_path, rng, n=60):
    """A genome, its index, and ``n`` reads from it, each a header comment of its own: none, one
    SAM tag after a space, two after a tab, an integer, a character."""
    genome = "".join(rng.choice(list("ACGT"), size=4000))
    write_fasta(tmp_path / "ref.fa", [("g", genome)])
    index = dmap.build_index(tmp_path / "ref.fa", tmp_path / "idx")
    kinds = ["", " BC:Z:ACGT", "\tRX:Z:AAC-GGT\tQX:Z:II#II", " XI:i:-5", "\tXA:A:q", " BC:Z:ACGT"]
    comments = [kinds[i % len(kinds)] for i in range(n)]
    starts = rng.integers(0, len(genome) - 60, n)
    return index, genome, comments, [genome[s:s + 50 + s % 11] for s in starts]


def _with_comments(text: str, comments: dict[str, str]) -> list[str]:
    """The records of SAM ``text`` each with its read's comment appended as -C appends it."""
    return [line + (comments[line.split("\t")[0]].replace(" ", "\t", 1) if comments[line.split("\t")[0]] else "")
            for line in text.splitlines() if not line.startswith("@")]


@pytest.mark.parametrize("fmt", ["sam", "bam"])
def test_append_comment_ends_each_record_with_its_reads_comment(tmp_path, client, fmt):
    """-C: every record of a read (secondary and unmapped ones too) ends with its FASTQ comment, after
    its read group; the records are otherwise those of a run without it, whatever the chunks,
    single or paired, and samtools and pysam read them."""
    index, genome, comments, reads = _commented_case(tmp_path, np.random.default_rng(11))
    reads[3] = "ACGTNNNNNNACGT" * 3  # unmapped
    reads[4] = genome[100:150]
    reads[5] = genome[100:150]  # a second read of the same locus
    names = [f"r{i}{c}" for i, c in enumerate(comments)]
    write_fastq(tmp_path / "r.fq", reads, names)
    by_name = {f"r{i}": c for i, c in enumerate(comments)}
    text = lambda path: pysam.view("-h", str(path))  # noqa: E731
    dmap.map_reads(index, tmp_path / "r.fq", sam_path=tmp_path / "plain.sam", client=client, max_errors=1,
                   report_all=True, read_group="@RG\tID:L1")
    want = _with_comments(text(tmp_path / "plain.sam"), by_name)
    for chunk_size in (7, 1000):
        out = tmp_path / f"c.{fmt}"
        dmap.map_reads(index, tmp_path / "r.fq", sam_path=out, client=client, max_errors=1, report_all=True,
                       read_group="@RG\tID:L1", append_comment=True, chunk_size=chunk_size)
        got = [line for line in text(out).splitlines() if not line.startswith("@")]
        assert got == [_moved_rg(line) for line in want]
        with pysam.AlignmentFile(str(out)) as f:
            assert {r.query_name: r.get_tag("BC") for r in f if r.has_tag("BC")} == {
                f"r{i}": "ACGT" for i, c in enumerate(comments) if "BC:Z:ACGT" in c}
    # Pairs: each mate its own comment.
    firsts, seconds = reads[::2], [read[::-1].translate(str.maketrans("ACGTN", "TGCAN")) for read in reads[1::2]]
    write_fastq(tmp_path / "r1.fq", firsts, [f"p{i}{c}" for i, c in enumerate(comments[::2])])
    write_fastq(tmp_path / "r2.fq", seconds, [f"p{i}{c}" for i, c in enumerate(comments[1::2])])
    dmap.map_reads(index, tmp_path / "r1.fq", tmp_path / "r2.fq", sam_path=tmp_path / "p.sam", client=client)
    out = tmp_path / f"pc.{fmt}"
    dmap.map_reads(index, tmp_path / "r1.fq", tmp_path / "r2.fq", sam_path=out, client=client, append_comment=True,
                   chunk_size=9)
    mates = {(f"p{i}", k): c for k, side in ((64, comments[::2]), (128, comments[1::2])) for i, c in enumerate(side)}
    plain = [line for line in text(tmp_path / "p.sam").splitlines() if not line.startswith("@")]
    expect = []
    for line in plain:
        fields = line.split("\t")
        c = mates[(fields[0], int(fields[1]) & 192)]
        expect.append(line + c.replace(" ", "\t", 1) if c else line)
    assert [line for line in text(out).splitlines() if not line.startswith("@")] == expect
    # FASTA whose sequences span lines, which dnaio parses: its comments too.
    with open(tmp_path / "r.fa", "w") as f:
        f.write("".join(f">r{i}{c}\n{read[:20]}\n{read[20:]}\n" for i, (c, read) in enumerate(zip(comments, reads))))
    dmap.map_reads(index, tmp_path / "r.fa", sam_path=tmp_path / "fa.sam", client=client)
    dmap.map_reads(index, tmp_path / "r.fa", sam_path=out, client=client, append_comment=True)
    assert [line for line in text(out).splitlines() if not line.startswith("@")] == _with_comments(
        text(tmp_path / "fa.sam"), by_name)


def _moved_rg(line: str) -> str:
    """A record of a run with -R and -C as dmap writes it: the comment before the read group."""
    head, rg, comment = line.partition("\tRG:Z:L1")
    return head + comment + rg


def test_append_comment_refuses_comments_that_are_not_sam_tags(tmp_path, client):
    """Casava's '1:N:0:ACGT' is not a SAM tag: one line naming the read, no output; a float tag is
    SAM's, written in SAM and in BAM."""
    index, genome, _, _ = _commented_case(tmp_path, np.random.default_rng(12), 0)
    write_fastq(tmp_path / "casava.fq", [genome[:50], genome[60:110]], ["a 1:N:0:ACGT", "b 1:N:0:ACGT"])
    write_fastq(tmp_path / "float.fq", [genome[:50]], ["a XF:f:1.5"])
    with pytest.raises(dmap.DmapError, match="read 'a' has the comment '1:N:0:ACGT', which is not SAM tags"):
        dmap.map_reads(index, tmp_path / "casava.fq", sam_path=tmp_path / "o.sam", client=client, append_comment=True)
    assert not (tmp_path / "o.sam").exists()
    dmap.map_reads(index, tmp_path / "float.fq", sam_path=tmp_path / "f.sam", client=client, append_comment=True)
    assert pysam.view(str(tmp_path / "f.sam")).rstrip("\n").endswith("\tXF:f:1.5")
    dmap.map_reads(index, tmp_path / "float.fq", sam_path=tmp_path / "f.bam", client=client, append_comment=True)
    assert pysam.view(str(tmp_path / "f.bam")).rstrip("\n").endswith("\tXF:f:1.5")
    r = dmap_cmd("run", tmp_path / "idx", tmp_path / "casava.fq", "-C", "-o", tmp_path / "cli.sam")
    assert r.returncode != 0 and r.stderr.count("\n") == 1 and "is not SAM tags" in r.stderr, r.stderr
    assert not (tmp_path / "cli.sam").exists()


# --- Reads that map nowhere left out (--no-unmapped) ---


@pytest.mark.parametrize("fmt", ["sam", "bam"])
def test_no_unmapped_leaves_out_the_records_of_reads_that_map_nowhere(tmp_path, client, fmt):
    """--no-unmapped: the records of a full run but those of reads that map nowhere, exact, with -e
    and in pairs (where a pair with one mate mapped keeps both records, as bowtie2 --no-unal);
    the counts are the full run's, and a chunk of unmapped reads alone writes nothing."""
    index, genome, _, reads = _commented_case(tmp_path, np.random.default_rng(13), 40)
    nowhere = ["T" * 45, "ACGTTGCA" * 6, "G" * 30]
    reads = reads[:10] + nowhere + reads[10:] + nowhere * 5  # the last chunk of 7: unmapped reads alone
    write_fastq(tmp_path / "r.fq", reads)
    records = lambda path: [line for line in pysam.view(str(path)).splitlines()]  # noqa: E731
    for options in ({}, {"max_errors": 2, "report_all": True}):
        full = dmap.map_reads(index, tmp_path / "r.fq", sam_path=tmp_path / f"full.{fmt}", client=client,
                              chunk_size=7, **options)
        some = dmap.map_reads(index, tmp_path / "r.fq", sam_path=tmp_path / f"some.{fmt}", client=client,
                              chunk_size=7, unmapped=False, **options)
        want = [line for line in records(tmp_path / f"full.{fmt}") if not int(line.split("\t")[1]) & 4]
        assert records(tmp_path / f"some.{fmt}") == want and len(want) < len(records(tmp_path / f"full.{fmt}"))
        assert (some.n_reads, some.n_mapped, some.n_hits) == (full.n_reads, full.n_mapped, full.n_hits)
    # Pairs: mates 2i and 2i + 1; pair 5 has one mate that maps nowhere, pair 6 two.
    comp = str.maketrans("ACGT", "TGCA")
    firsts = [genome[100 * i:100 * i + 50] for i in range(10)]
    seconds = [genome[100 * i + 200:100 * i + 250].translate(comp)[::-1] for i in range(10)]
    seconds[5], firsts[6], seconds[6] = nowhere[0], nowhere[1], nowhere[2]
    write_fastq(tmp_path / "r1.fq", firsts, [f"p{i}" for i in range(10)])
    write_fastq(tmp_path / "r2.fq", seconds, [f"p{i}" for i in range(10)])
    for unmapped in (True, False):
        dmap.map_reads(index, tmp_path / "r1.fq", tmp_path / "r2.fq", sam_path=tmp_path / f"p{unmapped}.{fmt}",
                       client=client, unmapped=unmapped)
    full = records(tmp_path / f"pTrue.{fmt}")
    want = [line for line in full if int(line.split("\t")[1]) & 12 != 12]
    assert records(tmp_path / f"pFalse.{fmt}") == want
    assert [line.split("\t")[0] for line in full if line not in want] == ["p6", "p6"]
    assert sum(line.startswith("p5\t") for line in want) == 2
    if fmt == "sam":  # the command line's flag
        r = dmap_cmd("run", tmp_path / "idx", tmp_path / "r1.fq", tmp_path / "r2.fq", "--no-unmapped", "-o",
                     tmp_path / "cli.sam")
        assert r.returncode == 0, r.stderr
        assert records(tmp_path / "cli.sam") == want


# --- Read groups, SAM that every tool reads, honest MAPQ and primaries, clear errors ---


READ_GROUP = "@RG\\tID:lane1\\tSM:sample1\\tPL:ILLUMINA"


@pytest.mark.parametrize("fmt", ["sam", "bam"])
@pytest.mark.parametrize("errors", ["0", "2"])
def test_read_group_and_picard_validation(tmp_path, errors, fmt):
    """Exact and approximate output, SAM and BAM, with a read group, odd reads and multi-mapping reads:
    Picard finds no error."""
    rng = np.random.default_rng(7)
    genome = "".join(rng.choice(list("ACGT"), size=3000))
    repeat = genome[100:160]
    genome = genome[:1000] + repeat + genome[1060:2000] + repeat + genome[2060:]
    write_fasta(tmp_path / "ref.fa", [("g", genome), ("h", genome[::-1])])
    assert dmap_cmd("index", tmp_path / "ref.fa", "-o", tmp_path / "idx", "-L", "80").returncode == 0
    reads = [genome[i:i + 50] for i in range(0, 2900, 97)] + [repeat[:50], "", "AC7T", "A" * 90]
    write_fastq(tmp_path / "r.fq", reads)
    out = tmp_path / f"o.{fmt}"
    r = dmap_cmd("run", tmp_path / "idx", tmp_path / "r.fq", "-o", out, "-e", errors, "-R", READ_GROUP)
    assert r.returncode == 0, r.stderr
    text = subprocess.run(["samtools", "view", "-h", str(out)], capture_output=True, text=True, check=True).stdout
    assert "@RG\tID:lane1\tSM:sample1\tPL:ILLUMINA\n" in text
    body = sam_body(text)
    assert len({f[0] for f in body}) == len(reads) and all(f[-1] == "RG:Z:lane1" for f in body)
    assert subprocess.run(["samtools", "quickcheck", str(out)]).returncode == 0
    if not have("PicardCommandLine"):
        pytest.skip("Picard (Debian picard-tools) is not installed")
    v = subprocess.run(["PicardCommandLine", "ValidateSamFile", "-I", str(out), "-MODE", "VERBOSE",
                        "-IGNORE_WARNINGS", "true"], capture_output=True, text=True, timeout=300)
    assert v.returncode == 0 and "No errors found" in v.stdout + v.stderr, v.stdout + v.stderr


@pytest.mark.parametrize("paired", [False, True], ids=["single", "pairs"])
def test_a_read_group_per_reads_file(tmp_path, paired):
    """-R once per reads file (per pair of files), in order: each file's records carry its own read
    group (three files of 40 reads in chunks of 100: files of several read groups share a chunk),
    in SAM and in BAM; the header has each @RG line once, and Picard finds no error."""
    rng = np.random.default_rng(3)
    genome = "".join(rng.choice(list("ACGT"), size=4000))
    write_fasta(tmp_path / "ref.fa", [("g", genome)])
    assert dmap_cmd("index", tmp_path / "ref.fa", "-o", tmp_path / "idx", "-L", "80").returncode == 0
    files = []
    for k in range(3):
        starts = rng.integers(0, 3500, 40)
        first = [genome[a:a + 50] for a in starts]
        if paired:
            second = [genome[a + 250:a + 300].translate(str.maketrans("ACGT", "TGCA"))[::-1] for a in starts]
            for m, mates in ((1, first), (2, second)):
                (tmp_path / f"l{k}_{m}.fq").write_text("".join(f"@f{k}r{i}/{m}\n{s}\n+\n{'I' * len(s)}\n"
                                                               for i, s in enumerate(mates)))
            files.append((tmp_path / f"l{k}_1.fq", tmp_path / f"l{k}_2.fq"))
        else:
            (tmp_path / f"l{k}.fq").write_text("".join(f"@f{k}r{i}\n{s}\n+\n{'I' * len(s)}\n"
                                                       for i, s in enumerate(first)))
            files.append((tmp_path / f"l{k}.fq",))
    lists = [",".join(str(f[m]) for f in files) for m in range(len(files[0]))]
    groups = ["@RG\\tID:L1\\tSM:s\\tPL:ILLUMINA", "@RG\\tID:L2\\tSM:s\\tPL:ILLUMINA",
              "@RG\\tID:L1\\tSM:s\\tPL:ILLUMINA"]  # the third file is the first's read group again
    out = tmp_path / "o.sam"
    r = dmap_cmd("run", tmp_path / "idx", *lists, "--chunk-size", "100", "-o", out,
                 *[a for g in groups for a in ("-R", g)])
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert [line for line in text.splitlines() if line.startswith("@RG")] == [
        "@RG\tID:L1\tSM:s\tPL:ILLUMINA", "@RG\tID:L2\tSM:s\tPL:ILLUMINA"]
    body = sam_body(text)
    assert len({f[0] for f in body}) == 120
    assert all(f[-1] == f"RG:Z:{'L2' if f[0].startswith('f1') else 'L1'}" for f in body)
    bam = tmp_path / "o.bam"
    r = dmap_cmd("run", tmp_path / "idx", *lists, "--chunk-size", "100", "-o", bam,
                 *[a for g in groups for a in ("-R", g)])
    assert r.returncode == 0, r.stderr
    with pysam.AlignmentFile(str(bam), "rb") as f:
        tags = [(rec.query_name, rec.get_tag("RG")) for rec in f]
    assert tags == [(f[0], f[-1][5:]) for f in body]
    if have("PicardCommandLine"):
        v = subprocess.run(["PicardCommandLine", "ValidateSamFile", "-I", str(out), "-MODE", "VERBOSE",
                            "-IGNORE_WARNINGS", "true"], capture_output=True, text=True, timeout=300)
        assert v.returncode == 0 and "No errors found" in v.stdout + v.stderr, v.stdout + v.stderr


@pytest.mark.parametrize("paired", [False, True])
def test_a_manifest_maps_as_lists_and_one_read_group_per_file(index, tmp_path, paired):
    """--manifest lanes.tsv gives the SAM of comma-separated lists with one -R per file (but @PG),
    read through a pipe too; one mixed with READS or -R is one error line."""
    lanes = []
    for k in range(3):
        seqs = ["GCATGCAAG", "GGGGCCCC", "ACGTTGCAT"][k:] + ["TTTTGGGG"]
        write_fastq(tmp_path / f"l{k}_1.fq", seqs, names=[f"l{k}r{i}" for i in range(len(seqs))])
        if paired:
            write_fastq(tmp_path / f"l{k}_2.fq", seqs[::-1], names=[f"l{k}r{i}" for i in range(len(seqs))])
        lanes.append([tmp_path / f"l{k}_1.fq", tmp_path / f"l{k}_2.fq" if paired else "-"])
    groups = [["ID:L1", "SM:s", "PL:ILLUMINA"], ["L2"], ["@RG", "ID:L1", "SM:s", "PL:ILLUMINA"]]
    manifest = tmp_path / "lanes.tsv"
    manifest.write_text("# first\tsecond\tread group\n" + "".join(
        "\t".join(map(str, [*files, *group])) + "\n" for files, group in zip(lanes, groups)))
    lists = [",".join(str(files[m]) for files in lanes) for m in range(2 if paired else 1)]
    options = ["-R", "@RG\\tID:L1\\tSM:s\\tPL:ILLUMINA", "-R", "@RG\\tID:L2", "-R", "@RG\\tID:L1\\tSM:s\\tPL:ILLUMINA"]
    pairs = ["--min-insert", "1", "--max-insert", "100"] if paired else []
    r = dmap_cmd("run", index, *lists, *options, *pairs, "-o", tmp_path / "lists.sam")
    assert r.returncode == 0, r.stderr
    r = dmap_cmd("run", index, "--manifest", manifest, *pairs, "-o", tmp_path / "manifest.sam")
    assert r.returncode == 0, r.stderr
    expected = [line for line in (tmp_path / "lists.sam").read_text().splitlines() if not line.startswith("@PG")]
    got = [line for line in (tmp_path / "manifest.sam").read_text().splitlines() if not line.startswith("@PG")]
    assert got == expected
    assert [line for line in got if line.startswith("@RG")] == ["@RG\tID:L1\tSM:s\tPL:ILLUMINA", "@RG\tID:L2"]
    assert {f[-1] for f in sam_body("\n".join(got))} == {"RG:Z:L1", "RG:Z:L2"}
    piped = subprocess.run(f"{sys.executable} -m dmap run {index} --manifest <(cat {manifest}) {' '.join(pairs)} "
                           f"-o {tmp_path / 'piped.sam'}", shell=True, executable="/bin/bash", capture_output=True,
                           text=True, timeout=120)
    assert piped.returncode == 0, piped.stderr
    assert [line for line in (tmp_path / "piped.sam").read_text().splitlines() if not line.startswith("@PG")] == got
    for extra, words in (([lists[0]], ["not both"]), (["-R", "@RG\\tID:x"], ["not both"])):
        assert_clean_failure(dmap_cmd("run", index, "--manifest", manifest, *extra, "-o", tmp_path / "o.sam"),
                             tmp_path / "o.sam", *words)


def test_no_reads_and_no_manifest_is_one_clear_line(index, tmp_path):
    assert_clean_failure(dmap_cmd("run", index, "-o", tmp_path / "o.sam"), tmp_path / "o.sam", "no reads",
                         "--manifest")


@pytest.mark.parametrize("groups, words", [
    (["@RG\\tID:a", "@RG\\tID:b"], ["2 read groups for 3 reads files"]),
    (["@RG\\tID:a\\tSM:x", "@RG\\tID:a\\tSM:y", "@RG\\tID:b"], ["read group ID 'a' is given with two different"]),
])
def test_read_groups_that_do_not_fit_the_files_are_refused(index, tmp_path, groups, words):
    for k in range(3):
        write_fastq(tmp_path / f"r{k}.fq", ["GCATGCAAG"])
    reads = ",".join(str(tmp_path / f"r{k}.fq") for k in range(3))
    options = [a for g in groups for a in ("-R", g)]
    assert_clean_failure(dmap_cmd("run", index, reads, "-o", tmp_path / "o.sam", *options), tmp_path / "o.sam", *words)


@pytest.mark.parametrize("line, words", [
    ("@RG\\tSM:x", ["no ID"]), ("ID:x", ["must start with '@RG"]), ("@RG\\tID:x\\nSM:y", ["line break"]),
    ("@RG\\tID:x\\tID:y", ["twice"]), ("@RG\\tIDx", ["TAG:VALUE"]),
    (os.fsdecode(b"@RG\\tID:\xff\\tSM:x"), ["'@RG\\tID:\\xff\\tSM:x' is not UTF-8 text"]),  # a shell's $'\xff'
])
def test_a_malformed_read_group_is_refused(index, tmp_path, line, words):
    write_fastq(tmp_path / "r.fq", ["GCATGCAAG"])
    assert_clean_failure(dmap_cmd("run", index, tmp_path / "r.fq", "-o", tmp_path / "o.sam", "-R", line),
                         tmp_path / "o.sam", *words)


def test_pg_command_line_escapes_tabs_and_newlines(index, tmp_path):
    reads = tmp_path / "odd\tname\n.fq"
    write_fastq(reads, ["GCATGCAAG"])
    r = dmap_cmd("run", index, reads)
    assert r.returncode == 0, r.stderr
    pg = [line for line in r.stdout.split("\n") if line.startswith("@PG")]
    assert len(pg) == 1 and "odd\\tname\\n.fq" in pg[0] and pg[0].count("\t") == 4


def test_mapq_does_not_depend_on_k(tmp_path):
    """One locus at 1 edit and another at 2: MAPQ 20 whatever K finds both, 60 when K finds only the first."""
    rng = np.random.default_rng(11)
    a, b = ("".join(rng.choice(list("ACGT"), size=300)) for _ in range(2))
    read = a[100:150]
    copy = read[:10] + ("A" if read[10] != "A" else "C") + read[11:30] + ("G" if read[30] != "G" else "T") + read[31:]
    one_edit = read[:25] + ("T" if read[25] != "T" else "A") + read[26:]
    write_fasta(tmp_path / "ref.fa", [("a", a[:100] + one_edit + a[150:]), ("b", b[:100] + copy + b[150:])])
    assert dmap_cmd("index", tmp_path / "ref.fa", "-o", tmp_path / "idx").returncode == 0
    write_fastq(tmp_path / "r.fq", [read])
    got = {}
    for k in ("1", "2", "3", "6"):
        r = dmap_cmd("run", tmp_path / "idx", tmp_path / "r.fq", "-e", k, "--all")
        assert r.returncode == 0, r.stderr
        primary = next(f for f in sam_body(r.stdout) if not int(f[1]) & 256)
        got[k] = (primary[2], int(primary[4]), [t for t in primary if t.startswith(("X0", "X1"))])
    assert got["1"] == ("a", 60, ["X0:i:1", "X1:i:0"])
    assert got["2"] == got["3"] == got["6"] == ("a", 20, ["X0:i:1", "X1:i:1"])


@pytest.mark.parametrize("errors", ["0", "1"])
def test_primaries_of_a_repeat_spread_over_its_copies(tmp_path, errors):
    rng = np.random.default_rng(12)
    unit = "".join(rng.choice(list("ACGT"), size=60))
    filler = lambda: "".join(rng.choice(list("ACGT"), size=200))  # noqa: E731
    write_fasta(tmp_path / "ref.fa", [("g", filler() + unit + filler() + unit + filler() + unit + filler())])
    assert dmap_cmd("index", tmp_path / "ref.fa", "-o", tmp_path / "idx").returncode == 0
    write_fastq(tmp_path / "r.fq", [unit[5:45]] * 300, [f"frag{i}" for i in range(300)])
    runs = []
    for _ in range(2):
        r = dmap_cmd("run", tmp_path / "idx", tmp_path / "r.fq", "-e", errors)
        assert r.returncode == 0, r.stderr
        runs.append(sam_body(r.stdout))
    assert runs[0] == runs[1]  # reproducible
    primaries = [int(f[3]) for f in runs[0] if not int(f[1]) & 256]
    counts = np.unique(primaries, return_counts=True)[1]
    assert len(primaries) == 300 and counts.size == 3 and counts.min() >= 60, counts
    assert {int(f[4]) for f in runs[0]} == {0}


def test_all_and_eqx_need_max_errors(index, tmp_path):
    write_fastq(tmp_path / "r.fq", ["GCATGCAAG"])
    for flag in ("--all", "--eqx"):
        assert_clean_failure(dmap_cmd("run", index, tmp_path / "r.fq", "-o", tmp_path / "o.sam", flag),
                             tmp_path / "o.sam", "--max-errors")


def test_a_fasta_given_as_the_index(tmp_path):
    write_fasta(tmp_path / "ref.fa", REF)
    write_fastq(tmp_path / "r.fq", ["GCATGCAAG"])
    r = dmap_cmd("run", tmp_path / "ref.fa", tmp_path / "r.fq", "-o", tmp_path / "o.sam")
    assert_clean_failure(r, tmp_path / "o.sam", "is a file, not a dmap index", "dmap index")


@pytest.mark.parametrize("folder", ["empty", "other zarr", "damaged"])
def test_a_folder_that_is_not_an_index(index, tmp_path, folder):
    import shutil

    import zarr

    given = tmp_path / "given"
    if folder == "empty":
        given.mkdir()
    elif folder == "other zarr":
        zarr.open_group(given, mode="w").attrs["x"] = 1
    else:
        shutil.copytree(index, given)
        (given / "zarr.json").write_text("{ not json")
    write_fastq(tmp_path / "r.fq", ["GCATGCAAG"])
    r = dmap_cmd("run", given, tmp_path / "r.fq", "-o", tmp_path / "o.sam")
    assert_clean_failure(r, tmp_path / "o.sam", f"index '{given}' is not a dmap index", "'dmap index REFERENCE")


@pytest.mark.parametrize("address, words", [
    ("banana", ["not a scheduler address"]), ("tcp://localhost", ["not a scheduler address", "port"]),
    ("tcp://127.0.0.1:1", ["cannot reach", "refused"]),
])
def test_bad_scheduler_addresses_fail_at_once(index, tmp_path, address, words):
    import time

    write_fastq(tmp_path / "r.fq", ["GCATGCAAG"])
    started = time.monotonic()
    r = dmap_cmd("run", index, tmp_path / "r.fq", "-o", tmp_path / "o.sam", "--scheduler", address)
    assert_clean_failure(r, tmp_path / "o.sam", *words)
    assert time.monotonic() - started < 9  # Dask alone retried a refused connection for 10 s


def test_quiet_prints_nothing_and_threads_map_the_same(index, tmp_path):
    write_fastq(tmp_path / "r.fq", ["GCATGCAAG", "GGGGCCCC", ""])
    plain = dmap_cmd("run", index, tmp_path / "r.fq")
    quiet = dmap_cmd("run", index, tmp_path / "r.fq", "-q", "-t", "1")
    assert plain.returncode == quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    assert sam_body(plain.stdout) == sam_body(quiet.stdout)
    r = dmap_cmd("run", index, tmp_path / "r.fq", "-t", "1", "--scheduler", "tcp://127.0.0.1:1")
    assert r.returncode == 1 and "--threads applies only to the embedded cluster" in r.stderr
    r = dmap_cmd("run", index, tmp_path / "r.fq", "--dashboard", "--scheduler", "tcp://127.0.0.1:1")
    assert r.returncode == 1 and "--dashboard applies only to the embedded cluster" in r.stderr


def test_progress_lines_in_a_log(tmp_path):
    """Into a file, 'dmap index' reports each block as a plain line."""
    write_fasta(tmp_path / "ref.fa", REF)
    r = dmap_cmd("index", tmp_path / "ref.fa", "-o", tmp_path / "idx", "-B", "20", "-L", "10")
    lines = r.stderr.splitlines()
    assert r.returncode == 0 and "\r" not in r.stderr
    assert [line.split(" symbols")[0] for line in lines[:-1]] == ["dmap: 20", "dmap: 40", "dmap: 60", "dmap: 68"]
    assert lines[2].endswith("s left") and "88% of the reference" in lines[2]
    q = dmap_cmd("index", tmp_path / "ref.fa", "-o", tmp_path / "idx", "--overwrite", "-q")
    assert q.returncode == 0 and q.stderr == ""


@pytest.mark.parametrize("limit, workers", [(1 << 20, []), (1_000_003, []), (1 << 20, ["--processes"])])
def test_a_full_disk_while_mapping_is_one_line_and_leaves_nothing(index, tmp_path, limit, workers):
    """RLIMIT_FSIZE makes the SAM file's writes fail (EFBIG) as a full disk would (ENOSPC): with
    direct appends, at a block's edge or inside a block, and through the page cache after them;
    and by a worker process writing its chunks in place, whose failure the run may learn only
    once every chunk was handed out."""
    import resource
    import signal

    write_fastq(tmp_path / "r.fq", ["GCATGCAAG"] * 30_000)  # about 2 MB of SAM

    def small_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    r = subprocess.run([sys.executable, "-m", "dmap", "run", str(index), str(tmp_path / "r.fq"), "-o",
                        str(tmp_path / "o.sam"), *workers], capture_output=True, text=True, timeout=120,
                       preexec_fn=small_files)
    assert_clean_failure(r, tmp_path / "o.sam", "cannot write", "File too large; no output was written")


def test_a_device_that_refuses_writes_is_one_line_saying_what_is_left(index, tmp_path):
    """/dev/full is written in place (a device) and fails every write with ENOSPC."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    write_fastq(tmp_path / "r.fq", ["GCATGCAAG"])
    r = dmap_cmd("run", index, tmp_path / "r.fq", "-o", "/dev/full")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip() == ("dmap: error: cannot write '/dev/full': No space left on device; "
                                "the records written so far are incomplete")


@pytest.fixture(scope="module")
def forms_case(tmp_path_factory):
    """A 3-contig genome's index in several blocks, 240 reads with up to 3 edits (some lowercase,
    some odd) and 120 pairs, as plain FASTQ: what the random runs below read in every form."""
    from cases import planted
    from readfiles import write_pairs

    from dmap.alphabet import reverse_complement

    d = tmp_path_factory.mktemp("forms")
    rng = np.random.default_rng(11)
    contigs = [(f"c{i}", random_contig(rng, "dna", n)) for i, n in enumerate((9000, 5000, 3000))]
    write_fasta(d / "ref.fa", contigs)
    r = dmap_cmd("index", d / "ref.fa", "-o", d / "idx", "--max-query-length", "130", "--block-length", "6000")
    assert r.returncode == 0, r.stderr

    def piece(length):
        seq = contigs[int(rng.integers(3))][1]
        at = int(rng.integers(0, len(seq) - length))
        return seq[at:at + length]

    reads = [planted(rng, piece(int(rng.integers(40, 110))), int(rng.integers(0, 4)), "ACGT") for _ in range(240)]
    reads = [reverse_complement(s) if i % 2 else s for i, s in enumerate(reads)]
    reads[7], reads[20], reads[33] = reads[7].lower(), "", "N" * 50
    write_fastq(d / "se.fq", reads)
    firsts, seconds = [], []
    for i in range(120):
        fragment = piece(int(rng.integers(150, 260)))
        a, b = fragment[:70], reverse_complement(fragment[-70:])
        a, b = planted(rng, a, int(rng.integers(0, 3)), "ACGT"), planted(rng, b, int(rng.integers(0, 3)), "ACGT")
        firsts.append(b if i % 2 else a)
        seconds.append(random_contig(rng, "dna", 70, repeats=False) if i % 11 == 3 else (a if i % 2 else b))
    write_pairs(d, firsts, seconds)
    return d


def _records(path, fmt):
    """A SAM, BAM or BGZF-compressed SAM file's lines but @PG (samtools' text for BAM)."""
    if fmt == "bam":
        return without_pg(pysam.view("-h", "--no-PG", str(path)).encode())
    return without_pg(gzip.decompress(path.read_bytes()) if fmt == "sam.gz" else path.read_bytes())


@settings(max_examples=examples(4), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_runs_write_the_records_of_a_plain_run(forms_case, tmp_path_factory, data):
    """Any input form (files cut into a list, gzip, bgzip, file:// URLs, @FILE, a manifest, standard
    input, an interleaved file), output form (SAM, BAM, BGZF SAM; a file, one dmap wrote before,
    standard output, a FIFO) and chunk size give the records of the reads as plain files into
    SAM, for any mapping options, single-end and paired."""
    from readfiles import bgzf_blocks

    draw = data.draw
    d, work = forms_case, tmp_path_factory.mktemp("run")
    paired = draw(st.booleans(), "paired")
    k = draw(st.integers(0, 2), "K")
    options = ["-e", str(k)] + (["--all"] if k and draw(st.booleans(), "all") else [])
    options += draw(st.sampled_from([[], ["--max-hits", "1"], ["--max-hits", "3"]]), "max hits")
    if paired:
        options += draw(st.sampled_from([[], ["--min-insert", "100", "--max-insert", "300"]]), "insert")
    # The reads cut into 1-3 files, each with its read group or none.
    n = 120 if paired else 240
    cuts = draw(st.lists(st.integers(1, n - 1), max_size=2, unique=True), "cuts")
    bounds = [0, *sorted(cuts), n]
    mates = ["r1.fq", "r2.fq"] if paired else ["se.fq"]
    files = []
    for name in mates:
        lines = (d / name).read_text().splitlines(keepends=True)
        files.append([work / f"{name}.{j}" for j in range(len(bounds) - 1)])
        for path, a, b in zip(files[-1], bounds, bounds[1:]):
            path.write_text("".join(lines[4 * a:4 * b]))
    groups = [f"@RG\\tID:lane{j}\\tSM:s" for j in range(len(bounds) - 1)] if draw(st.booleans(), "RG") else []
    plain = [",".join(map(str, each)) for each in files]
    ref = work / "ref.sam"
    r = dmap_cmd("run", d / "idx", *plain, *options, *[a for g in groups for a in ("-R", g)], "-o", ref)
    assert r.returncode == 0, r.stderr

    forms = ["plain", "gzip", "bgzip", "url", "list file"] + (["manifest"] if groups else [])
    if len(bounds) == 2 and not groups:
        forms.append("interleaved" if paired else "stdin")
    form = draw(st.sampled_from(forms), "input form")
    stdin, read_groups = None, [a for g in groups for a in ("-R", g)]
    if form in ("gzip", "bgzip"):
        for each in files:
            for path in each:
                text = path.read_bytes()
                path.with_name(path.name + ".gz").write_bytes(gzip.compress(text, 1) if form == "gzip" else
                                                              bgzf_blocks(text, range(0, len(text), 4000)))
        inputs = [",".join(f"{p}.gz" for p in each) for each in files]
    elif form == "url":
        inputs = [",".join(f"file://{p}" for p in each) for each in files]
    elif form == "list file":
        inputs = []
        for i, each in enumerate(files):
            (work / f"list{i}").write_text("".join(f"{p}\n" for p in each))
            inputs.append(f"@{work / f'list{i}'}")
    elif form == "manifest":
        rows = zip(*files) if paired else ((p, "-") for p in files[0])
        (work / "m.tsv").write_text("".join(f"{a}\t{b}\tID:lane{j}\tSM:s\n" for j, (a, b) in enumerate(rows)))
        inputs, read_groups = ["--manifest", work / "m.tsv"], []
    elif form == "interleaved":
        one, two = (p.read_text().splitlines(keepends=True) for p in (files[0][0], files[1][0]))
        (work / "il.fq").write_text("".join("".join(one[i:i + 4] + two[i:i + 4]) for i in range(0, len(one), 4)))
        inputs = [work / "il.fq", "--interleaved"]
    elif form == "stdin":
        inputs, stdin = ["-"], files[0][0].read_bytes()
    else:
        inputs = plain
    fmt = draw(st.sampled_from(["sam", "bam", "sam.gz"]), "format")
    chunk = draw(st.sampled_from([[], ["--chunk-size", "1"], ["--chunk-size", "7"], ["--chunk-size", "50"]]), "chunk")
    where = draw(st.sampled_from(["file", "its own file", "stdout", "fifo"]), "output")
    out = work / f"out.{fmt}"
    command = [sys.executable, "-m", "dmap", "run", d / "idx", *inputs, *options, *read_groups, *chunk, "-O", fmt]
    if where == "its own file":  # a file dmap wrote is replaced
        assert subprocess.run([*command, "-o", out], capture_output=True, input=stdin).returncode == 0
    if where == "fifo":
        os.mkfifo(work / "fifo")
        reader = subprocess.Popen(["cat", work / "fifo"], stdout=open(out, "wb"))
        r = subprocess.run([*command, "-o", work / "fifo"], capture_output=True, input=stdin, timeout=120)
        reader.wait(timeout=60)
    elif where == "stdout":
        r = subprocess.run(command, capture_output=True, input=stdin, timeout=120)
        out.write_bytes(r.stdout)
    else:
        r = subprocess.run([*command, "-o", out], capture_output=True, input=stdin, timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    assert _records(out, fmt) == (_records(ref, "bam") if fmt == "bam" else _records(ref, "sam"))
