"""BAM output: the encoder against htslib, the kernel against the encoder, BGZF blocks, and
``dmap run -o out.bam`` (and ``-o out.sam.gz``, SAM text in BGZF blocks) read back by samtools
and pysam."""

import gzip
import os
import struct
import subprocess
import sys

import numpy as np
import pytest
from helpers import bam_parts, have, htslib_bam, without_pg, write_fasta, write_fastq

from dmap.errors import DmapError
from dmap.format import bam, bgzf

pytestmark = pytest.mark.skipif(not have("samtools"), reason="samtools is the oracle of BAM encoding")

REFS = [("chr1", 5_000_000), ("c2", 300), ("scaffold_3|x", 100_000_000)]


def sam_header(refs=REFS) -> str:
    return "@HD\tVN:1.6\tSO:unsorted\n" + "".join(f"@SQ\tSN:{n}\tLN:{length}\n" for n, length in refs)


# Float values as their text may stand in a SAM record: printf's %g, repr's 17 digits, more digits
# than a double holds, exponents, signs, no digits before or after the point, the edges of a float's
# range (past it: infinity; under half its least subnormal: zero), infinities and NaNs of either sign.
FLOAT_TEXTS = ["1.5", "-0", "0", "+2.5", ".5", "5.", "1E5", "-7e-3", "3.4028235e38", "3.5e38", "1e39", "1.4e-45",
               "7e-46", "7.1e-46", "1e-50", "inf", "-inf", "nan", "-nan", "0.1000000000000000055511151231257827",
               "123456.5", "16777217", "1.00000005960464477539"]


def float_text(rng: np.random.Generator) -> str:
    """A float's text: one of FLOAT_TEXTS, or a random float32 or double written by %g or repr."""
    if rng.random() < .3:
        return str(rng.choice(FLOAT_TEXTS))
    with np.errstate(over="ignore"):  # past a float's range: inf, a text as good as any
        single = float(np.float32(rng.standard_normal() * 10.0 ** rng.integers(-40, 39)))
    value = single if rng.random() < .5 else float(rng.standard_normal() * 10.0 ** rng.integers(-46, 40))
    return f"{value:g}" if rng.random() < .5 else repr(value)


def random_records(seed: int, n: int) -> str:
    """SAM records with what BAM encodes in more than one way: empty and odd-length SEQ, IUPAC,
    lower case and '=' bases, no QUAL, CIGARs of every operation, RNEXT '=', negative TLEN,
    integer tags across the c/C/s/S/i/I ranges, and float tags and arrays (FLOAT_TEXTS)."""
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(n):
        length = int(rng.integers(0, 40))
        name = f"r{i}" + "x" * int(rng.integers(0, 30))
        seq = "".join(rng.choice(list("ACGTNacgtRYKM=."), length)) if length else "*"
        qual = "".join(chr(33 + int(q)) for q in rng.integers(0, 60, length)) if length and rng.random() < .8 else "*"
        if rng.random() < .2:
            lines.append(f"{name}\t4\t*\t0\t0\t*\t*\t0\t0\t{seq}\t{qual}\tRG:Z:grp")
            continue
        contig, contig_len = REFS[int(rng.integers(0, len(REFS)))]
        if length:
            cuts = sorted({0, length, *rng.integers(1, max(length, 2), 2).tolist()} & set(range(length + 1)))
            cigar = ""
            for a, b in zip(cuts, cuts[1:]):
                cigar += f"{b - a}{rng.choice(list('MIS=X'))}"
                if rng.random() < .3:
                    cigar += f"{int(rng.integers(1, 2000))}{rng.choice(list('DN'))}"
            cigar = ("7H" if rng.random() < .2 else "") + cigar
        else:
            cigar = "".join(f"{int(rng.integers(1, 300))}{rng.choice(list('MIDNSHP=X'))}"
                            for _ in range(int(rng.integers(1, 5))))
        rnext = str(rng.choice(["*", "=", "c2"]))
        pnext = 0 if rnext == "*" else int(rng.integers(1, 200))
        tags = (f"NM:i:{int(rng.integers(0, 5))}\tAS:i:{-int(rng.integers(0, 70_000))}"
                f"\tXX:i:{int(rng.choice([0, 127, 128, 255, 256, 65535, 65536, 3_000_000_000]))}"
                f"\tXN:i:{int(rng.choice([-1, -128, -129, -32768, -32769, -2_000_000_000]))}"
                f"\tMD:Z:{int(rng.integers(0, 100))}A3\tXA:A:q")
        if rng.random() < .5:  # a hex string and integer arrays of every type, some empty
            sub = str(rng.choice(list("cCsSiI")))
            lo, hi = {"c": (-128, 127), "C": (0, 255), "s": (-32768, 32767), "S": (0, 65535), "i": (-2**31, 2**31 - 1),
                      "I": (0, 2**32 - 1)}[sub]
            values = [str(int(rng.choice([lo, hi, 0, rng.integers(lo, hi)]))) for _ in range(int(rng.integers(0, 6)))]
            tags += f"\tXH:H:{'1AE3' * int(rng.integers(0, 4))}\tXB:B:{','.join([sub, *values])}"
        if rng.random() < .5:  # a float, and an array of them (some empty)
            floats = [float_text(rng) for _ in range(int(rng.integers(0, 5)))]
            tags += f"\tXF:f:{float_text(rng)}\tXG:B:{','.join(['f', *floats])}"
        lines.append(f"{name}\t{int(rng.choice([0, 16, 256, 272, 2048]))}\t{contig}\t{int(rng.integers(1, contig_len))}"
                     f"\t{int(rng.integers(0, 256))}\t{cigar}\t{rnext}\t{pnext}\t{int(rng.integers(-500, 500))}"
                     f"\t{seq}\t{qual}\t{tags}")
    return "\n".join(lines) + "\n"


def encoded(text: str, encoder=bam.encode_records) -> bytes:
    return encoder(np.frombuffer(text.encode(), np.uint8), bam.References.of([n for n, _ in REFS])).tobytes()


@pytest.mark.parametrize("seed", [1, 2])
def test_records_are_encoded_as_htslib_encodes_them(seed):
    text = random_records(seed, 3000)
    header, records = bam_parts(htslib_bam((sam_header() + text).encode()))
    assert header == sam_header()
    assert encoded(text) == records


def test_the_kernel_writes_the_bytes_of_the_numpy_encoder(device):
    for seed in (3, 4):
        text = random_records(seed, 2000)
        assert encoded(text, lambda t, r: bam.encode_records_device(device, t, r)) == encoded(text)
    assert bam.encode_records_device(device, np.zeros(0, np.uint8), bam.References.of(["c"])).size == 0


def test_header_is_htslibs():
    text = sam_header() + "@PG\tID:dmap\tPN:dmap\n"
    raw = gzip.decompress(htslib_bam(text.encode()))
    assert bam.header(text, [n for n, _ in REFS], [n for _, n in REFS]) == raw
    assert bam.sam_header_text(raw) == text and bam.sam_header_text(b"BAM\x01\xff") is None


def test_a_header_of_many_references_is_htslibs():
    """Names of every length, lengths up to 2^31 - 1."""
    rng = np.random.default_rng(7)
    names = [f"contig{i}_" + "x" * int(rng.integers(0, 40)) for i in range(3000)]
    lengths = rng.integers(1, 2**31, len(names)).tolist()
    text = "@HD\tVN:1.6\n" + "".join(f"@SQ\tSN:{n}\tLN:{k}\n" for n, k in zip(names, lengths))
    assert bam.header(text, names, lengths) == gzip.decompress(htslib_bam(text.encode()))


@pytest.mark.parametrize("bad, words", [
    ("r\t0\tnope\t1\t0\t1M\t*\t0\t0\tA\t*\n", "reference name 'nope'"),
    ("x" * 255 + "\t4\t*\t0\t0\t*\t*\t0\t0\t*\t*\n", "longer than 254"),
    ("r\t0\tc2\t1\t0\t1M\t*\t0\t0\tAC\tI\n", "QUAL"),
    ("r\t0\tc2\t1\n", "fewer than 11"),
    ("r\t0\tc2\t1\t0\t1M\t*\t0\t0\tA\t*\tXB:B:q,1\n", "types A, i, f, Z, H and B"),
    ("r\t0\tc2\t1\t0\t1M\t*\t0\t0\tA\t*\tXF:f:one\n", "float tag's value is not a decimal number"),
    ("r\t0\tc2\t1\t0\t1M\t*\t0\t0\tA\t*\tXF:f:\n", "float tag's value is not a decimal number"),
    ("r\t0\tc2\t1\t0\t1M\t*\t0\t0\tA\t*\tXF:f:1_0\n", "float tag's value is not a decimal number"),
    ("r\t0\tc2\t1\t0\t1M\t*\t0\t0\tA\t*\tXG:B:f,1.5,,2\n", "float tag's value is not a decimal number"),
    ("r\t0\tc2\t1\t0\t1M\t*\t0\t0\tA\t*\tXB:B:c,300\n", "do not fit its type"),
    ("r\t0\tc2\t1\t0\t1M\t*\t0\t0\tA\t*\tXB:B:c1\n", "do not fit its type"),
    ("r\t0\tc2\t1\t0\t1M\t*\t0\t0\tA\t*\tXB:B:c,1,\n", "not a decimal number"),
    ("r\t0\tc2\tone\t0\t1M\t*\t0\t0\tA\t*\n", "not a decimal number"),
])
def test_records_bam_cannot_hold_raise_one_clear_error(bad, words):
    with pytest.raises(DmapError, match=words):
        encoded(bad)


@pytest.mark.parametrize("size", [0, 1, bgzf.BLOCK_DATA, bgzf.BLOCK_DATA + 1, 200_000])
@pytest.mark.parametrize("kind", ["text", "random"])
def test_bgzf_blocks(size, kind, tmp_path):
    rng = np.random.default_rng(size)
    data = (rng.integers(0, 256, size) if kind == "random" else rng.choice(list(b"ACGT\t\n"), size)).astype(np.uint8)
    blocks = bgzf.compress(data)
    assert gzip.decompress(blocks + bgzf.EOF) == data.tobytes()
    at = n = 0
    while at < len(blocks):  # each block states its own size, and is at most 64 KiB
        assert bgzf.is_bgzf(blocks[at:at + 16])
        (bsize,) = struct.unpack_from("<H", blocks, at + 16)
        at, n = at + bsize + 1, n + 1
        assert bsize < 1 << 16
    assert at == len(blocks) and n == -(-size // bgzf.BLOCK_DATA)
    # Their sizes and inflated sizes, read from headers and trailers: of whole blocks only.
    sizes, inflated = bgzf.block_table(blocks + bgzf.EOF)
    assert sum(sizes) == len(blocks) + len(bgzf.EOF) and sum(inflated) == size and inflated[-1] == 0
    assert bgzf.block_table(blocks[:-1]) == (sizes[:-2], inflated[:-2])
    with pytest.raises(ValueError, match=f"no BGZF block begins at byte {len(blocks) + 7}"):
        bgzf.block_table(blocks + b"not BGZF data", base=7)


# --- dmap run -o out.bam ---------------------------------------------------------------------------------------------

def dmap(*args, **kw):
    return subprocess.run([sys.executable, "-m", "dmap", *map(str, args)], capture_output=True, timeout=300, **kw)


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    """An index of two contigs and reads on both strands, repeats, N, lower case, unmappable reads."""
    d = tmp_path_factory.mktemp("bam")
    rng = np.random.default_rng(7)
    contigs = [(f"chr{i}", "".join(rng.choice(list("ACGT"), n))) for i, n in enumerate([30_000, 5_000])]
    contigs[1] = ("chr1", contigs[1][1] + contigs[0][1][:2_000])  # a repeat across contigs
    write_fasta(d / "ref.fa", contigs)
    assert dmap("index", d / "ref.fa", "-o", d / "idx", "-L", "64", "-B", "8192").returncode == 0
    comp = str.maketrans("ACGT", "TGCA")
    reads = []
    for i in range(3_000):
        c = contigs[i % 2][1]
        p = int(rng.integers(0, len(c) - 60))
        r = c[p:p + int(rng.integers(20, 60))]
        if i % 3 == 0:
            r = r.translate(comp)[::-1]
        if i % 7 == 0:
            r = r[:5] + "N" + r[6:]
        if i % 11 == 0:
            r = r.lower()
        if i % 13 == 0:
            j = len(r) // 2
            r = r[:j] + ("A" if r[j] != "A" else "C") + r[j + 1:]
        reads.append(r)
    reads += ["", "A" * 100, "ACGTXACGT"]
    write_fastq(d / "r.fq", reads)
    return d


def read_back_sorted_and_indexed(path, sam: bytes, sorted_bam) -> None:
    """pysam reads the records of ``path`` in the order of the SAM output ``sam``, and samtools
    sorts them into ``sorted_bam`` and indexes it."""
    import pysam

    with pysam.AlignmentFile(str(path)) as f:
        names = [a.query_name for a in f]
    assert names == [line.split(b"\t")[0].decode() for line in sam.splitlines() if not line.startswith(b"@")]
    subprocess.run(["samtools", "sort", "-o", sorted_bam, path], check=True)
    subprocess.run(["samtools", "index", sorted_bam], check=True)


@pytest.mark.parametrize("options", [[], ["-e", "2", "-R", r"@RG\tID:g1\tSM:s1"], ["-e", "1", "--all", "--eqx"]])
def test_bam_output_holds_the_sam_records(case, tmp_path, options):
    """-o out.bam: samtools and pysam read the records of the SAM output (as htslib encodes them),
    and it sorts and indexes."""
    common = [case / "idx", case / "r.fq", "--chunk-size", "700", *options]
    assert dmap("run", *common, "-o", tmp_path / "o.sam").returncode == 0
    r = dmap("run", *common, "-o", tmp_path / "o.bam")
    assert r.returncode == 0, r.stderr
    subprocess.run(["samtools", "quickcheck", "-v", tmp_path / "o.bam"], check=True)
    sam = (tmp_path / "o.sam").read_bytes()
    header, records = bam_parts((tmp_path / "o.bam").read_bytes())
    no_pg = [line for line in sam.decode().splitlines(keepends=True) if line.startswith("@") and "@PG" not in line]
    assert [line for line in header.splitlines(keepends=True) if "@PG" not in line] == no_pg
    assert records == bam_parts(htslib_bam(sam))[1]

    pysam = pytest.importorskip("pysam")
    read_back_sorted_and_indexed(tmp_path / "o.bam", sam, tmp_path / "s.bam")
    with pysam.AlignmentFile(str(tmp_path / "s.bam"), "rb") as f:
        in_chr1 = sum(1 for _ in f.fetch("chr1", 0, 4_000))
    expected = sum(1 for line in sam.splitlines() if not line.startswith(b"@") and line.split(b"\t")[2] == b"chr1"
                   and int(line.split(b"\t")[3]) <= 4_000)
    assert in_chr1 >= expected > 0  # fetch also returns records that start before and overlap


def test_bam_to_standard_output_and_the_format_option(case, tmp_path):
    common = [case / "idx", case / "r.fq"]
    dmap("run", *common, "-o", tmp_path / "o.bam", check=True)
    piped = dmap("run", *common, "-O", "bam", check=True).stdout
    assert bam_parts(piped)[1] == bam_parts((tmp_path / "o.bam").read_bytes())[1]
    assert piped.endswith(bgzf.EOF)
    # -O sam wins over the name: SAM text in a file called .bam
    dmap("run", *common, "-O", "sam", "-o", tmp_path / "text.bam", check=True)
    assert (tmp_path / "text.bam").read_bytes().startswith(b"@HD")


def test_no_reads_give_a_bam_header_alone(case, tmp_path):
    (tmp_path / "empty.fq").write_text("")
    dmap("run", case / "idx", tmp_path / "empty.fq", "-o", tmp_path / "o.bam", check=True)
    subprocess.run(["samtools", "quickcheck", "-v", tmp_path / "o.bam"], check=True)
    header, records = bam_parts((tmp_path / "o.bam").read_bytes())
    assert header.startswith("@HD") and records == b""


def test_bam_replaces_only_dmaps_own_files(case, tmp_path):
    out = tmp_path / "o.bam"
    dmap("run", case / "idx", case / "r.fq", "-o", out, check=True)
    dmap("run", case / "idx", case / "r.fq", "-o", out, check=True)  # dmap's own BAM: replaced
    foreign = htslib_bam(sam_header().encode())
    out.write_bytes(foreign)
    r = dmap("run", case / "idx", case / "r.fq", "-o", out, text=True)
    assert r.returncode == 1 and "not a SAM or BAM file written by dmap" in r.stderr
    assert out.read_bytes() == foreign


def test_bam_of_protein_reads_is_refused(tmp_path):
    write_fasta(tmp_path / "p.fa", [("p1", "MKVLAAGIVGLLLAWQ")])
    assert dmap("index", tmp_path / "p.fa", "-o", tmp_path / "idx", "--alphabet", "protein",
                "-L", "8").returncode == 0
    write_fastq(tmp_path / "r.fq", ["MKVL"])
    r = dmap("run", tmp_path / "idx", tmp_path / "r.fq", "-o", tmp_path / "o.bam", text=True)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "cannot hold protein reads" in r.stderr
    assert not [p for p in os.listdir(tmp_path) if "o.bam" in p]


# --- dmap run -o out.sam.gz ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("options", [[], ["-e", "2", "-R", r"@RG\tID:g1\tSM:s1"]])
def test_compressed_sam_holds_the_sam_output(case, tmp_path, options):
    """-o out.sam.gz: the SAM output's bytes (but @PG) in BGZF blocks, which gzip, samtools and
    pysam read, and samtools sorts and indexes; -O sam.gz writes the same to a stream."""
    common = [case / "idx", case / "r.fq", "--chunk-size", "700", *options]
    dmap("run", *common, "-o", tmp_path / "o.sam", check=True)
    dmap("run", *common, "-o", tmp_path / "o.sam.gz", check=True)
    sam = (tmp_path / "o.sam").read_bytes()
    packed = (tmp_path / "o.sam.gz").read_bytes()
    assert bgzf.is_bgzf(packed[:16]) and packed.endswith(bgzf.EOF)
    assert without_pg(gzip.decompress(packed)) == without_pg(sam)
    subprocess.run(["samtools", "quickcheck", "-v", tmp_path / "o.sam.gz"], check=True)
    viewed = [subprocess.run(["samtools", "view", "--no-PG", "-h", tmp_path / name], capture_output=True,
                             check=True).stdout for name in ("o.sam.gz", "o.sam")]
    assert without_pg(viewed[0]) == without_pg(viewed[1])  # as htslib reads them (it upper-cases SEQ)
    piped = dmap("run", *common, "-O", "sam.gz", check=True).stdout
    assert without_pg(gzip.decompress(piped)) == without_pg(sam)

    pytest.importorskip("pysam")
    read_back_sorted_and_indexed(tmp_path / "o.sam.gz", sam, tmp_path / "s.bam")


def test_compressed_sam_holds_protein_reads_and_replaces_only_dmaps_own_files(tmp_path):
    """SAM text in BGZF blocks holds any alphabet (BAM holds DNA alone); like every output, an
    existing file is replaced only when dmap wrote it."""
    write_fasta(tmp_path / "p.fa", [("p1", "MKVLAAGIVGLLLAWQ")])
    dmap("index", tmp_path / "p.fa", "-o", tmp_path / "idx", "--alphabet", "protein", "-L", "8", check=True)
    write_fastq(tmp_path / "r.fq", ["MKVL", "GLLL"])
    out = tmp_path / "o.sam.gz"
    for _ in range(2):  # the second run replaces the first's file
        dmap("run", tmp_path / "idx", tmp_path / "r.fq", "-o", out, check=True)
    records = [line.split(b"\t")[:4] for line in gzip.decompress(out.read_bytes()).splitlines()
               if not line.startswith(b"@")]
    assert records == [[b"read0", b"0", b"p1", b"1"], [b"read1", b"0", b"p1", b"10"]]
    foreign = bgzf.compress(sam_header().encode()) + bgzf.EOF
    out.write_bytes(foreign)
    r = dmap("run", tmp_path / "idx", tmp_path / "r.fq", "-o", out, text=True)
    assert r.returncode == 1 and "not a SAM or BAM file written by dmap" in r.stderr
    assert out.read_bytes() == foreign


def test_cram_is_refused_by_name(case, tmp_path):
    """dmap writes no CRAM: an output named .cram is refused before anything is written, unless a
    format is chosen for it."""
    r = dmap("run", case / "idx", case / "r.fq", "-o", tmp_path / "o.cram", text=True)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "dmap does not write CRAM" in r.stderr
    assert "samtools view -C" in r.stderr and os.listdir(tmp_path) == []
    dmap("run", case / "idx", case / "r.fq", "-O", "sam", "-o", tmp_path / "o.cram", check=True)
    assert (tmp_path / "o.cram").read_bytes().startswith(b"@HD")
