"""Reads from BAM (dmap.io.ubam): records found and decoded as pysam reads them, in byte ranges
cut anywhere, by the workers; mapped as the same reads in FASTQ are; bad BAM in one line."""

import array
import gzip
import os
import subprocess
import sys

import numpy as np
import pysam
import pytest
from helpers import examples, genome_case, without_pg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from readfiles import DNA, bgzf_blocks, piped, stream_plan

import dmap
from dmap.errors import DmapWarning, InputFormatError
from dmap.format import bgzf
from dmap.format.tags import DROPPED_TAGS
from dmap.io import fastx, pairs, splits, ubam
from dmap.reads import NO_GROUP
from dmap.testing.ubam import bam_reads as reference_reads
from dmap.testing.ubam import fields_agree as reference_fields_agree
from dmap.testing.ubam import read_group_tags as reference_read_groups
from dmap.testing.ubam import tag_texts as reference_tag_texts

IUPAC = "=ACMGRSVTWYHKDBN"
COMPLEMENT = str.maketrans("ACGTMKRYWSBVDHN=", "TGCAKMYRWSVBHDN=")  # the oracle's own table
NAME_SYMBOLS = "".join(chr(c) for c in range(33, 127) if c != ord("@"))  # SAM's QNAME: [!-?A-~]


def write_bam(path, records, references=(("chr1", 5000),), cuts=None, read_groups=()):
    """``records`` (dicts of name, seq, qual (0-93 each), flag, and optionally cigar, pos, tags) as BAM
    at ``path``, in htslib's BGZF blocks, or (``cuts``) in blocks that end at those offsets of the
    inflated bytes (as small as one byte, records straddling them); its header names ``read_groups``
    (IDs)."""
    header = {"HD": {"VN": "1.6"}, "SQ": [{"SN": n, "LN": length} for n, length in references]}
    if read_groups:
        header["RG"] = [{"ID": g, "SM": "s", "PL": "ILLUMINA"} for g in read_groups]
    with pysam.AlignmentFile(str(path), "wb", header=header) as out:
        for r in records:
            a = pysam.AlignedSegment(out.header)
            a.query_name = r["name"]
            a.flag = r["flag"]
            a.query_sequence = r["seq"] or None
            if r["seq"]:
                a.query_qualities = pysam.qualitystring_to_array("".join(chr(q + 33) for q in r["qual"]))
            mapped = not r["flag"] & 4
            a.reference_id = 0 if mapped else -1
            a.reference_start = r.get("pos", 10) if mapped else -1
            a.cigarstring = r.get("cigar") or (f"{len(r['seq'])}M" if mapped and r["seq"] else None)
            a.mapping_quality = 60 if mapped else 0
            for tag, value, *kind in r.get("tags", ()):  # (tag, value) or (tag, value, BAM type)
                if isinstance(value, tuple):  # (array typecode, values)
                    value = array.array(*value)
                a.set_tag(tag, array.array("i", value) if isinstance(value, list) else value,
                          value_type=kind[0] if kind else None)
            out.write(a)
    if cuts is not None:
        path.write_bytes(bgzf_blocks(gzip.decompress(path.read_bytes()), cuts))
    return path


def oracle(records):
    """What the reads are, from the records as written: secondary and supplementary records left
    out, reverse-strand ones turned back."""
    out = []
    for r in records:
        if r["flag"] & 0x900:
            continue
        seq, qual = r["seq"], "".join(chr(q + 33) for q in r["qual"])
        if r["flag"] & 16:
            seq, qual = seq.translate(COMPLEMENT)[::-1], qual[::-1]
        out.append((r["name"], seq, qual if r["seq"] else ""))
    return out


def bam_splits(path, cuts, read_groups=(), tags=False):
    """The splits of BAM ``path`` between compressed offsets ``cuts``, as the client plans them
    (its records' RG tags looked up among ``read_groups``; with ``tags``, the others as text)."""
    size = os.path.getsize(path)
    with splits.open_reads(str(path)) as f:
        sniffed = splits.sniff(f, str(path))
    bounds = [0] + sorted(c for c in set(cuts) if 0 < c < size) + [size]
    return [splits.FileSplit(k, str(path), lo, hi, True, sniffed.origin, size, True, bam=True,
                             extras=ubam.BamExtras(read_groups, tags))
            for k, (lo, hi) in enumerate(zip(bounds, bounds[1:]))]


def split_reads(path, cuts):
    out = []
    for split in bam_splits(path, cuts):
        f = fastx.source_fields(split)
        text = f.data.tobytes().decode()
        out += [(text[f.name_off[i]:f.name_off[i] + f.name_len[i]], text[f.seq_off[i]:f.seq_off[i] + f.seq_len[i]],
                 text[f.qual_off[i]:f.qual_off[i] + f.seq_len[i]]) for i in range(len(f))]
        assert pairs.count_records(split) == len(f)
        assert f.group is None  # no read group looked up
    return out


def split_groups(path, cuts, read_groups):
    """Each read's group (ReadFields.group) from the splits between ``cuts``."""
    return [g for split in bam_splits(path, cuts, read_groups) for g in fastx.source_fields(split).group.tolist()]


def split_tags(path, cuts):
    """Each read's comment (-C: its record's tags but RG, as text) from the splits between ``cuts``."""
    out = []
    for split in bam_splits(path, cuts, tags=True):
        f = fastx.source_fields(split)
        out += [f.data[o:o + n].tobytes().decode() for o, n in zip(f.comment_off.tolist(), f.comment_len.tolist())]
    return out


def pysam_tags(path):
    """The oracle: each read's tags but its read group and its old alignment's (DROPPED_TAGS), as
    samtools view writes them (pysam's to_string)."""
    with pysam.AlignmentFile(str(path), check_sq=False) as f:
        return ["\t".join(t for t in r.to_string().split("\t")[11:] if t[:2] not in DROPPED_TAGS)
                for r in f.fetch(until_eof=True) if not r.flag & 0x900]


# Read group IDs that are prefixes of each other: an RG tag is matched whole.
GROUP_IDS = ("lane1", "lane10", "lane")


@st.composite
def bam_records(draw):
    """Records as sequencers and mappers write them: unaligned (uBAM) or aligned on either strand,
    secondary and supplementary ones, names of any length, every IUPAC code, odd and even lengths,
    tags whose bytes (integer and float arrays) may look like anything."""
    is_aligned = draw(st.booleans())
    out = []
    for i in range(draw(st.integers(1, 30))):
        seq = draw(st.text(IUPAC if draw(st.integers(0, 4)) == 0 else "ACGTN", min_size=1, max_size=160))
        flag = draw(st.sampled_from([0, 16, 256, 272, 2048, 2064])) if is_aligned else 4
        tags = []
        if draw(st.booleans()):
            tags.append(("RG", draw(st.sampled_from(GROUP_IDS + ("other", "lane100")))))
        if draw(st.booleans()):
            tags.append(("XB", draw(st.lists(st.integers(-2**31, 2**31 - 1), min_size=1, max_size=40))))
        if draw(st.booleans()):
            tags.append(("XZ", draw(st.text(NAME_SYMBOLS, max_size=20))))
        if draw(st.booleans()):
            tags.append(("XI", draw(st.integers(-2**31, 2**31 - 1))))
        if draw(st.booleans()):  # an array of each of BAM's integer types
            code, (lo, hi) = draw(st.sampled_from([("b", (-128, 127)), ("B", (0, 255)), ("h", (-2**15, 2**15 - 1)),
                                                   ("H", (0, 2**16 - 1)), ("I", (0, 2**32 - 1))]))
            tags.append(("XY", (code, draw(st.lists(st.integers(lo, hi), max_size=5)))))
        if draw(st.booleans()):
            tags.append(("XC", draw(st.characters(min_codepoint=33, max_codepoint=126)), "A"))
        if draw(st.booleans()):  # floats, alone and in arrays: any float32, NaNs and infinities too
            tags.append(("XF", draw(st.floats(width=32)), "f"))
        if draw(st.booleans()):
            tags.append(("XG", ("f", draw(st.lists(st.floats(width=32), max_size=5)))))
        if draw(st.booleans()):  # what an alignment wrote, which -C leaves out: a float among them
            tags += [("NM", draw(st.integers(0, 9))), ("AS", 1.5, "f"), ("SA", "chr1,5,+,5M,60,0;")]
        tags = draw(st.permutations(tags))
        out.append({"name": draw(st.text(NAME_SYMBOLS, min_size=1, max_size=30)) + str(i), "seq": seq, "flag": flag,
                    "qual": draw(st.lists(st.integers(0, 93), min_size=len(seq), max_size=len(seq))), "tags": tags,
                    "cigar": f"{len(seq)}M" if is_aligned else None})
    return out


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=bam_records(), data=st.data())
def test_bam_split_anywhere_reads_every_read_once(tmp_path, records, data):
    path = tmp_path / "r.bam"
    raw_size = len(gzip.decompress(write_bam(path, records).read_bytes()))
    blocks = data.draw(st.lists(st.integers(0, raw_size), max_size=12), label="block ends")
    write_bam(path, records, cuts=blocks)
    size = os.path.getsize(path)
    cuts = data.draw(st.lists(st.integers(1, size), max_size=8), label="cuts")
    assert split_reads(path, cuts) == oracle(records)
    # The Python reference that the kernel is held to reads them so too.
    raw = np.frombuffer(gzip.decompress(path.read_bytes()), np.uint8)[bam_splits(path, [])[0].origin:]
    starts = ubam.records_of(raw, "r.bam", "test", splits.MAX_RECORD_BYTES)
    assert reference_reads(raw, starts) == oracle(records)
    # Their read groups: each record's RG tag, wherever it lies among the other tags.
    tags = [dict(t[:2] for t in r["tags"]).get("RG") for r in records if not r["flag"] & 0x900]
    assert reference_read_groups(raw, starts) == tags
    assert split_groups(path, cuts, GROUP_IDS) == [GROUP_IDS.index(t) if t in GROUP_IDS else NO_GROUP for t in tags]
    # -C: their other tags as SAM text, as samtools view writes them.
    assert split_tags(path, cuts) == reference_tag_texts(raw, starts) == pysam_tags(path)


def test_float_tags_are_carried_as_printf_writes_them(tmp_path):
    """-C carries float tags (Ion Torrent's ZP:B:f phasing estimates on every read, ...) as C's
    printf("%g") writes them, as htslib does (pysam): six significant digits, exact halves to even.
    Checked on floats of every exponent, exact halves at every scale, the edges of %g's two
    notations, zeros, subnormals, the largest float, infinities and NaNs, alone and in arrays."""
    rng = np.random.default_rng(5)
    halves = (rng.integers(100_000, 1_000_000, 4000) + 0.5) * 10.0 ** rng.integers(-10, 8, 4000)
    edges = [0.0, -0.0, 1e-4, 9.99999e-05, 999999.0, 999999.5, 1e6, 9.9999995, 0.00999999, 123456.5, 4321.625,
             np.inf, -np.inf, np.nan, -np.nan]
    bits = np.concatenate([rng.integers(0, 2**32, 20_000, dtype=np.uint64).astype(np.uint32),
                           halves.astype(np.float32).view(np.uint32), np.array(edges, np.float32).view(np.uint32),
                           np.array([1, 0x80000001, 0x007FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF], np.uint32)])
    values = bits.view(np.float32).tolist()
    records = _records(len(values) // 1000 + 1)
    for k, r in enumerate(records):
        r["tags"] = [("ZP", ("f", values[1000 * k:1000 * (k + 1)])), ("XF", values[k * 37 % len(values)], "f")]
    write_bam(tmp_path / "f.bam", records)
    got = split_tags(tmp_path / "f.bam", [])
    assert got == pysam_tags(tmp_path / "f.bam")
    raw = np.frombuffer(gzip.decompress((tmp_path / "f.bam").read_bytes()), np.uint8)
    raw = raw[bam_splits(tmp_path / "f.bam", [])[0].origin:]
    assert got == reference_tag_texts(raw, ubam.records_of(raw, "f.bam", "test", splits.MAX_RECORD_BYTES))
    assert sum(text.count(",") for text in got) == len(values)


def test_every_cut_of_a_small_bam(tmp_path):
    """Blocks of 50 inflated bytes, so records straddle blocks; one cut at every compressed offset."""
    rng = np.random.default_rng(4)
    records = [{"name": f"r{i}", "seq": "".join(rng.choice(list("ACGTN"), size=int(rng.integers(1, 40)))),
                "flag": 4, "qual": list(rng.integers(0, 42, 40))} for i in range(12)]
    for r in records:
        r["qual"] = r["qual"][:len(r["seq"])]
    path = tmp_path / "r.bam"
    raw_size = len(gzip.decompress(write_bam(path, records).read_bytes()))
    write_bam(path, records, cuts=list(range(0, raw_size, 50)))
    expected = oracle(records)
    for cut in range(os.path.getsize(path) + 1):
        assert split_reads(path, [cut]) == expected, cut


def test_a_samtools_import_ubam_maps_as_its_fastq(tmp_path, client):
    """`samtools import` of FASTQ gives unaligned BAM: mapped as the FASTQ, the same SAM, whatever
    the chunk size; pairs interleaved in it (flags 0x40 and 0x80) map as the two files do."""
    index = genome_case(tmp_path, 3, 3000, 60, 200)
    fq = tmp_path / "r.fq"
    subprocess.run(["samtools", "import", "-0", str(fq), "-o", str(tmp_path / "r.bam")], check=True)
    want = dmap.map_reads(index, fq, sam_path=tmp_path / "fq.sam", client=client)
    for chunk_size in (7, 1000):
        got = dmap.map_reads(index, tmp_path / "r.bam", sam_path=tmp_path / "bam.sam", client=client,
                             chunk_size=chunk_size)
        assert got.n_reads == want.n_reads == 200
        assert without_pg((tmp_path / "bam.sam").read_bytes()) == without_pg((tmp_path / "fq.sam").read_bytes())
    # Pairs: the reads as first mates, their reverse complements as second.
    text = fq.read_text().split("\n")
    records = [text[i:i + 4] for i in range(0, len(text) - 1, 4)]
    firsts = "".join(f"{r[0]}/1\n{r[1]}\n+\n{r[3]}\n" for r in records)
    seconds = "".join(f"{r[0]}/2\n{r[1][::-1].translate(COMPLEMENT)}\n+\n{r[3][::-1]}\n" for r in records)
    (tmp_path / "r1.fq").write_text(firsts)
    (tmp_path / "r2.fq").write_text(seconds)
    subprocess.run(["samtools", "import", "-1", str(tmp_path / "r1.fq"), "-2", str(tmp_path / "r2.fq"), "-o",
                    str(tmp_path / "p.bam")], check=True)
    dmap.map_reads(index, tmp_path / "r1.fq", tmp_path / "r2.fq", sam_path=tmp_path / "pfq.sam", client=client)
    with pytest.warns(DmapWarning, match="holds pairs .flag 0x1., mapped here as single reads; --interleaved"):
        dmap.map_reads(index, tmp_path / "p.bam", sam_path=tmp_path / "single.sam", client=client)
    for chunk_size in (7, 1000):
        dmap.map_reads(index, tmp_path / "p.bam", interleaved=True, sam_path=tmp_path / "pbam.sam", client=client,
                       chunk_size=chunk_size)
        assert without_pg((tmp_path / "pbam.sam").read_bytes()) == without_pg((tmp_path / "pfq.sam").read_bytes())


def test_an_aligned_bam_gives_its_reads_back(tmp_path, client):
    """A BAM that a mapper wrote, sorted by position: each read once, as it was sequenced (its
    secondary records left out, its reverse-strand records turned back)."""
    index = genome_case(tmp_path, 3, 3000, 60, 150)
    lines = (tmp_path / "r.fq").read_text().split("\n")
    for i in range(0, len(lines) - 1, 8):  # every other read from the reverse strand
        lines[i + 1], lines[i + 3] = lines[i + 1][::-1].translate(COMPLEMENT), lines[i + 3][::-1]
    (tmp_path / "r.fq").write_text("\n".join(lines))
    dmap.map_reads(index, tmp_path / "r.fq", sam_path=tmp_path / "first.bam", client=client, max_errors=2,
                   report_all=True)
    pysam.sort("-o", str(tmp_path / "sorted.bam"), str(tmp_path / "first.bam"))
    dmap.map_reads(index, tmp_path / "sorted.bam", sam_path=tmp_path / "again.sam", client=client)
    dmap.map_reads(index, tmp_path / "r.fq", sam_path=tmp_path / "fq.sam", client=client)
    again = sorted(without_pg((tmp_path / "again.sam").read_bytes()))
    assert again == sorted(without_pg((tmp_path / "fq.sam").read_bytes()))
    # -C carries none of the old alignment's tags (NM, MD, AS, ... which dmap writes anew), nor X0,
    # X1 and NH: the same records.
    dmap.map_reads(index, tmp_path / "sorted.bam", sam_path=tmp_path / "c.sam", client=client, append_comment=True)
    assert sorted(without_pg((tmp_path / "c.sam").read_bytes())) == again


def _records(n=20, length=30):
    return [{"name": f"r{i}", "seq": "ACGT" * (length // 4), "flag": 4, "qual": [30] * (length // 4 * 4)}
            for i in range(n)]


@pytest.mark.parametrize("fmt", ["sam", "bam"])
def test_append_comment_carries_a_bams_tags_as_its_fastqs_comments(tmp_path, client, fmt):
    """-C with unaligned BAM: its records' tags but RG end the reads' records, as the comments of
    the FASTQ it was imported from (samtools import -T '*') do: the same output from both, with a
    read group from -R after them, and float tags too."""
    index = genome_case(tmp_path, 7, 3000, 50, 40)
    lines = (tmp_path / "r.fq").read_text().split("\n")
    kinds = ["", " BC:Z:ACGT", "\tRX:Z:AAC-GGT\tQX:Z:II#II", " XI:i:-5", "\tXA:A:q", " XS:i:70000"]
    for k in range(0, len(lines) - 1, 4):
        lines[k] += kinds[k // 4 % len(kinds)]
    (tmp_path / "c.fq").write_text("\n".join(lines))
    subprocess.run(["samtools", "import", "-T", "*", "-0", str(tmp_path / "c.fq"), "-o", str(tmp_path / "c.bam")],
                   check=True)
    for reads in ("c.fq", "c.bam"):
        dmap.map_reads(index, tmp_path / reads, sam_path=tmp_path / f"{reads}.{fmt}", client=client,
                       append_comment=True, read_group="@RG\tID:L1", chunk_size=9)
    got = [pysam.view(str(tmp_path / f"{reads}.{fmt}")) for reads in ("c.fq", "c.bam")]
    assert got[0] == got[1] and "\tRX:Z:AAC-GGT\tQX:Z:II#II\tRG:Z:L1\n" in got[0]
    records = _records(3)
    records[1]["tags"] = [("XF", 1.5, "f"), ("ZP", ("f", [0.0123, 1e-5, -2.5]))]
    write_bam(tmp_path / "f.bam", records)
    dmap.map_reads(index, tmp_path / "f.bam", sam_path=tmp_path / f"floats.{fmt}", client=client,
                   append_comment=True)
    assert "\tXF:f:1.5\tZP:B:f,0.0123,1e-05,-2.5\n" in pysam.view(str(tmp_path / f"floats.{fmt}"))


def test_dmaps_own_bam_maps_again_to_the_same_records(tmp_path, client):
    """Reads with a tag in each comment, mapped with -C and a read group into BAM (secondary records,
    the reverse strand, pairs), then mapped again from that BAM with -C: the same records, the
    read group taken from the records and the tag carried, dmap's old tags left out."""
    rng = np.random.default_rng(8)
    genome = "".join(rng.choice(list("ACGT"), 2000))
    genome += genome[500:1000]  # a repeat: reads there have two loci
    (tmp_path / "rep.fa").write_text(f">g\n{genome}\n")
    index = dmap.build_index(tmp_path / "rep.fa", tmp_path / "rep")
    comp = str.maketrans("ACGT", "TGCA")
    starts = rng.integers(0, len(genome) - 300, 30)
    firsts = [genome[s:s + 50] for s in starts]
    seconds = [genome[s + 200:s + 250].translate(comp)[::-1] for s in starts]
    for name, reads in (("a", firsts), ("b", seconds)):
        with open(tmp_path / f"{name}.fq", "w") as f:
            f.write("".join(f"@p{i} BC:Z:{'ACGT'[i % 4] * 3}\n{r}\n+\n{'I' * len(r)}\n" for i, r in enumerate(reads)))
    group = "@RG\tID:lane1\tSM:s"
    for paired, args in ((False, [tmp_path / "a.fq"]), (True, [tmp_path / "a.fq", tmp_path / "b.fq"])):
        options = dict(client=client, append_comment=True, max_errors=1, report_all=True)
        first = dmap.map_reads(index, *args, sam_path=tmp_path / "first.bam", read_group=group, **options)
        again = dmap.map_reads(index, tmp_path / "first.bam", sam_path=tmp_path / "again.bam", interleaved=paired,
                               chunk_size=7, **options)
        assert (again.n_reads, again.n_hits) == (first.n_reads, first.n_hits) and first.n_hits > first.n_reads
        assert pysam.view(str(tmp_path / "again.bam")) == pysam.view(str(tmp_path / "first.bam"))
        assert "\tBC:Z:CCC\tRG:Z:lane1\n" in pysam.view(str(tmp_path / "again.bam"))


def test_bad_bam_is_one_clear_error(tmp_path):
    path = write_bam(tmp_path / "r.bam", _records())
    raw = gzip.decompress(path.read_bytes())
    cut = tmp_path / "cut.bam"  # ends inside a record
    cut.write_bytes(bgzf_blocks(raw[:-10], [100]))
    with pytest.raises(InputFormatError, match="is not whole BAM"):
        split_reads(cut, [])
    header = tmp_path / "header.bam"  # ends inside its header
    header.write_bytes(bgzf_blocks(raw[:20], []))
    with pytest.raises(InputFormatError, match="ends inside its header"):
        list(splits.plan_input([str(header)], lambda *_: 100))
    no_quality = write_bam(tmp_path / "noq.bam", _records())
    raw = bytearray(gzip.decompress(no_quality.read_bytes()))
    at = raw.index(bytes([30] * 28))  # the first record's qualities: "not stored" is 0xFF
    raw[at:at + 28] = b"\xff" * 28
    no_quality.write_bytes(bgzf_blocks(bytes(raw), []))
    with pytest.raises(InputFormatError, match="read 'r0' without qualities"):
        split_reads(no_quality, [])


@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=bam_records(), chunk=st.integers(1, 12), tags=st.booleans())
def test_a_bam_stream_is_cut_into_blocks_of_whole_reads(tmp_path, records, chunk, tags):
    """BAM read as a stream (here gzip that is not BGZF; a pipe, standard input) is cut by the
    client into blocks of ``chunk`` reads, each read's secondary and supplementary records after it
    in its block, and the workers decode the blocks into every read once, in order."""
    bgzf_bam = write_bam(tmp_path / "r.bam", records)
    path = tmp_path / "gz.bam"
    path.write_bytes(gzip.compress(gzip.decompress(bgzf_bam.read_bytes())))
    plan = list(splits.plan_input([str(path)], lambda *_: chunk, ubam.BamExtras(GROUP_IDS, tags)))
    assert all(isinstance(b, splits.RawBlock) and b.bam and not b.fastq_text for b in plan)
    fields = [fastx.source_fields(b) for b in plan]
    sizes = [len(f) for f in fields]
    assert all(n == chunk for n in sizes[:-1]) and (not sizes or sizes[-1] <= chunk)
    # Each block after the first begins with a read's own record (not 0x900), after its last read's others.
    assert all(int.from_bytes(b.data[18:20].tobytes(), "little") & 0x900 == 0 for b in plan[1:])
    assert_decoded(fields, records, bgzf_bam, tags)


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=bam_records(), data=st.data())
def test_a_bgzf_bam_stream_is_cut_at_its_blocks(tmp_path, records, data):
    """`samtools view -b ... | dmap run INDEX -`: the client cuts a BGZF stream between its blocks
    without inflating them (blocks that end inside a record, a record over several blocks, empty
    blocks), and the workers decode every read once, in order, with its read group and tags."""
    path = tmp_path / "r.bam"
    raw_size = len(gzip.decompress(write_bam(path, records).read_bytes()))
    write_bam(path, records, cuts=data.draw(st.lists(st.integers(0, raw_size), max_size=12), label="block ends"))
    plan = stream_plan(path.read_bytes(), data.draw(st.integers(1, 12), label="reads per chunk"),
                       ubam.BamExtras(GROUP_IDS, True))
    assert all(isinstance(b, splits.StreamBlocks) and b.bam and not b.fastq_text for b in plan)
    assert_decoded([fastx.source_fields(b) for b in plan], records, path, True)


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_an_interleaved_bam_stream_is_cut_at_its_blocks_between_pairs(tmp_path, data):
    """`samtools collate -uO in.bam | dmap run INDEX - --interleaved`: after the first pairs (which
    the client counts), the stream is cut between BGZF blocks, each cut moved on to a pair's
    first read, so that every pair's mates share a chunk, whatever the blocks, the secondary and
    supplementary records among them (left out, wherever they fall), the mates' order and
    flags, and their /1 and /2 suffixes."""
    records = []
    flags = data.draw(st.sampled_from([(0x41, 0x81), (0x81, 0x41), (0, 0)]), label="the mates' flags, in order")
    suffixes = data.draw(st.sampled_from([("", ""), ("/1", "/2")]), label="name suffixes")
    for i in range(data.draw(st.integers(1, 40), label="pairs")):
        group = []
        for flag, suffix in zip(flags, suffixes):
            seq = data.draw(st.text("ACGT", min_size=1, max_size=40), label="sequence")
            group.append({"name": f"p{i}{suffix}", "seq": seq, "qual": [30] * len(seq), "flag": flag | 0x4})
        extra = data.draw(st.sampled_from([0, 0x100, 0x800]), label="another record of the pair")
        if extra:  # an alignment of either mate, anywhere among the pair's records
            group.insert(data.draw(st.integers(0, 2), label="at"),
                         {"name": f"p{i}", "seq": "ACGTA", "qual": [20] * 5,
                          "flag": extra | data.draw(st.sampled_from([0x41, 0x81]), label="mate")})
        records += group
    path = tmp_path / "r.bam"
    raw_size = len(gzip.decompress(write_bam(path, records).read_bytes()))
    write_bam(path, records, cuts=data.draw(st.lists(st.integers(0, raw_size), max_size=12), label="block ends"))
    first = data.draw(st.integers(0, 3), label="first pairs")
    with piped(path.read_bytes()) as stream:
        plan = list(pairs.plan_pair_files([stream], None, lambda *_: data.draw(st.integers(2, 12)), first_pairs=first))
    chunks = [pairs.read_pair_chunk(c, DNA) for c in plan]
    assert [r for c in chunks for r in zip(c.names, c.seqs)] == [(name.split("/")[0], seq)
                                                                 for name, seq, _ in oracle(records)]
    if first == 0:  # no pairs to count first: every chunk is blocks of the stream
        assert all(isinstance(c.first, splits.StreamBlocks) for c in plan if isinstance(c, pairs.PairBlock))


def assert_decoded(fields, records, bam, tags):
    """That the chunks' ``fields`` hold the reads of ``records`` (written to ``bam``) in order, each
    with its read group and (``tags``) its other tags as SAM text."""
    got = []
    for f in fields:
        text = f.data.tobytes().decode()
        got += [(text[f.name_off[i]:f.name_off[i] + f.name_len[i]], text[f.seq_off[i]:f.seq_off[i] + f.seq_len[i]],
                 text[f.qual_off[i]:f.qual_off[i] + f.seq_len[i]]) for i in range(len(f))]
    assert got == oracle(records)
    if tags:
        texts = [f.data[o:o + n].tobytes().decode() for f in fields
                 for o, n in zip(f.comment_off.tolist(), f.comment_len.tolist())]
        assert texts == pysam_tags(bam)
    want = [dict(t[:2] for t in r["tags"]).get("RG") for r in records if not r["flag"] & 0x900]
    assert [g for f in fields for g in f.group.tolist()] == [GROUP_IDS.index(t) if t in GROUP_IDS else NO_GROUP
                                                             for t in want]


@pytest.mark.parametrize("paired", [False, True])
def test_bam_from_standard_input_or_a_pipe_maps_as_its_file(tmp_path, paired):
    """`samtools view -u ... | dmap run INDEX -`, a named pipe, and BAM compressed as plain gzip:
    the client reads the stream (BGZF: cut at its blocks), the same records as the file's (its
    header's read group and, with -C, its tags), single or as pairs (interleaved, or two files
    from two pipes); a stream cut inside a record, or inside a BGZF block, is one line."""
    genome_case(tmp_path, 7, 3000, 50, 0)
    index = tmp_path / "idx"
    text = (tmp_path / "ref.fa").read_text().split("\n", 1)[1].replace("\n", "")
    rng = np.random.default_rng(7)
    records = []
    for i in range(400):
        start = int(rng.integers(0, len(text) - 60))
        seq = text[start:start + int(rng.integers(30, 60))]
        flag = 4 | ((0x41 if i % 2 == 0 else 0x81) if paired else 0)
        records.append({"name": f"p{i // 2}" if paired else f"r{i}", "seq": seq, "qual": [30] * len(seq),
                        "flag": flag, "tags": [("BC", "ACGT"), ("XI", i)]})
    bam = write_bam(tmp_path / "r.bam", records, read_groups=("lane1",))
    options = ["-C", "--chunk-size", "37", "-e", "1"] + (["--interleaved"] if paired else [])

    def run(reads, **kwargs):
        out = tmp_path / "out.sam"
        r = subprocess.run([sys.executable, "-m", "dmap", "run", str(index), str(reads), "-o", str(out), *options],
                           capture_output=True, text=True, timeout=300, **kwargs)
        assert r.returncode == 0, r.stderr
        return without_pg(out.read_bytes())

    want = run(bam)
    assert b"\tBC:Z:ACGT\tXI:i:7\tRG:Z:lane1\n" in b"\n".join(want) + b"\n"
    with open(bam, "rb") as f:
        assert run("-", stdin=f) == want
    plain_gzip = tmp_path / "gz.bam"
    plain_gzip.write_bytes(gzip.compress(gzip.decompress(bam.read_bytes())))
    assert run(plain_gzip) == want
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    feeder = subprocess.Popen(["sh", "-c", f"cat '{bam}' > '{fifo}'"])
    assert run(fifo) == want
    feeder.wait(timeout=60)
    if paired:  # the mates in two files, each from a pipe of its own
        mates = [write_bam(tmp_path / f"r{m}.bam", records[m - 1::2], read_groups=("lane1",)) for m in (1, 2)]
        fifos = [tmp_path / f"fifo{m}" for m in (1, 2)]
        feeders = []
        for f, m in zip(fifos, mates):
            os.mkfifo(f)
            feeders.append(subprocess.Popen(["sh", "-c", f"cat '{m}' > '{f}'"]))
        out = tmp_path / "out.sam"
        r = subprocess.run([sys.executable, "-m", "dmap", "run", str(index), *map(str, fifos), "-o", str(out),
                            *(o for o in options if o != "--interleaved")], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0 and without_pg(out.read_bytes()) == want, r.stderr
        for feeder in feeders:
            feeder.wait(timeout=60)
    cut = tmp_path / "cut.bam"  # whole gzip, but its inflated bytes end inside a record
    cut.write_bytes(bgzf_blocks(gzip.decompress(bam.read_bytes())[:-10], [100]))
    with open(cut, "rb") as f:
        r = subprocess.run([sys.executable, "-m", "dmap", "run", str(index), "-", "-o", str(tmp_path / "cut.sam"),
                            *options], stdin=f, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and r.stdout == "" and r.stderr.count("\n") == 1 and not (tmp_path / "cut.sam").exists()
    assert "is not whole BAM" in r.stderr and "ends inside a record" in r.stderr, r.stderr
    cut.write_bytes(bam.read_bytes()[:-40])  # a BGZF stream that ends inside a block
    with open(cut, "rb") as f:
        r = subprocess.run([sys.executable, "-m", "dmap", "run", str(index), "-", "-o", str(tmp_path / "cut.sam"),
                            *options], stdin=f, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and r.stdout == "" and r.stderr.count("\n") == 1 and not (tmp_path / "cut.sam").exists()
    assert "is not whole BGZF" in r.stderr and "ends inside the block" in r.stderr, r.stderr


def test_cram_is_still_refused(tmp_path):
    path = tmp_path / "r.cram"
    path.write_bytes(b"CRAM\x03\x00" + bytes(100))
    with pytest.raises(InputFormatError, match="is CRAM"):
        list(splits.plan_input([str(path)], lambda *_: 100))


def test_the_chain_walk_drops_offsets_that_look_like_records(tmp_path):
    """A record whose tag holds bytes that check out as a record (a length that ends where the
    real record does, refID and pos -1, an empty name): the walk from the first record passes
    them by.  The rule for a cut's first record cannot tell them from a record, as Hadoop-BAM's
    cannot: a cut just before them stops the run with an error, never a read lost or made up."""
    fake = np.zeros(40, np.uint8)
    fake[0:4] = np.frombuffer(np.int32(36).tobytes(), np.uint8)
    fake[4:12] = 255
    fake[12] = 1
    records = _records(6)
    records[2]["tags"] = [("XB", np.frombuffer(fake.tobytes(), np.int32).tolist())]
    path = write_bam(tmp_path / "r.bam", records)
    raw = gzip.decompress(path.read_bytes())
    origin = bam_splits(path, [])[0].origin
    data = np.frombuffer(raw, np.uint8)[origin:]
    at, _ = ubam._candidates(data, 0, data.size, splits.MAX_RECORD_BYTES)
    starts = ubam.records_of(data, "r.bam", "test", splits.MAX_RECORD_BYTES)
    assert starts.size == 6 and at.size > 6  # the fake among the candidates, not among the records
    assert [name for name, _, _ in split_reads(path, [])] == [f"r{i}" for i in range(6)]
    fake_at = int(np.setdiff1d(at, starts)[0])
    assert ubam.first_record(data, fake_at, True, splits.MAX_RECORD_BYTES) == fake_at
    write_bam(path, records, cuts=[origin + fake_at - 2])  # a block begins 2 bytes before the fake
    with pytest.raises(InputFormatError, match="is not whole BAM"):
        split_reads(path, [bgzf.block_size(path.read_bytes())])  # the cut at the second block


def inflated_records(path):
    """A BAM file's records as one worker's chunk holds them: inflated, from the first record on."""
    return np.frombuffer(gzip.decompress(path.read_bytes()), np.uint8)[bam_splits(path, [])[0].origin:]


def chain_outcome(data, lane_bytes):
    """What :func:`ubam.record_starts` makes of a whole chunk ``data`` in lanes of ``lane_bytes``
    (None: every offset checked): its records, or the error's message."""
    try:
        return ubam.record_starts(data, 0, data.size, "r.bam", "test", splits.MAX_RECORD_BYTES,
                                  lane_bytes=lane_bytes or 1 << 60).tolist()
    except InputFormatError as e:
        return str(e)


# Lanes from one record's bytes to several records' (bam_records' records are 40-600 bytes).
LANES = st.sampled_from([37, 64, 100, 257, 1000])


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=bam_records(), lane_bytes=LANES)
def test_records_walked_in_lanes_are_those_every_offset_checked_finds(tmp_path, records, lane_bytes):
    """The lanes' walk (each lane from the first record near its cut, which tags holding any bytes
    may fake) finds the records that checking every offset finds, and walks most of them itself."""
    data = inflated_records(write_bam(tmp_path / "r.bam", records))
    expected = chain_outcome(data, None)
    assert chain_outcome(data, lane_bytes) == expected == ubam.records_of(
        data, "r.bam", "test", splits.MAX_RECORD_BYTES).tolist()
    walked = ubam._walk_lanes(data, 0, data.size, splits.MAX_RECORD_BYTES, lane_bytes)
    assert walked is None or walked.tolist() == expected


def test_lanes_walk_whole_chunks_and_pass_fake_records_by(tmp_path):
    """A chunk of thousands of records, some with a tag that checks out as a record (as in
    test_the_chain_walk_drops_offsets_that_look_like_records), walked in lanes of every size
    from under a record to a quarter of the chunk: the same records as every offset checked,
    found by the lanes (not by the fallback) at the default lane size."""
    fake = np.zeros(40, np.uint8)
    fake[0:4] = np.frombuffer(np.int32(36).tobytes(), np.uint8)
    fake[4:12] = 255
    fake[12] = 1
    records = _records(3000, 100)
    for r in records[::7]:
        r["tags"] = [("XB", np.frombuffer(fake.tobytes(), np.int32).tolist())]
    data = inflated_records(write_bam(tmp_path / "r.bam", records))
    assert data.size >= ubam.LANES_FROM * ubam.LANE_BYTES  # records_of walks it in lanes
    expected = chain_outcome(data, None)
    assert len(expected) == 3000
    assert ubam._walk_lanes(data, 0, data.size, splits.MAX_RECORD_BYTES, ubam.LANE_BYTES).tolist() == expected
    for lane_bytes in (50, 211, 4096, ubam.LANE_BYTES, data.size // 4):
        assert chain_outcome(data, lane_bytes) == expected, lane_bytes


def test_long_reads_with_zero_filled_tags_walk_in_lanes(tmp_path):
    """Long reads (3-9 kb) whose tags hold kilobytes of zeros, as PacBio's kinetics do: most
    lanes' windows hold no record start and many offsets look like one; the same records as
    every offset checked, at the default lane size and at lanes shorter than a record."""
    rng = np.random.default_rng(8)
    records = []
    for i in range(150):
        n = int(rng.integers(3000, 9000))
        records.append({"name": f"m64011/{i}/ccs", "seq": "".join(rng.choice(list("ACGT"), n)), "flag": 4,
                        "qual": rng.integers(0, 94, n).tolist(),
                        "tags": [("fi", ("B", [0] * int(rng.integers(500, 4000)))), ("np", int(rng.integers(1, 30)))]})
    data = inflated_records(write_bam(tmp_path / "r.bam", records))
    assert data.size >= ubam.LANES_FROM * ubam.LANE_BYTES
    expected = chain_outcome(data, None)
    assert len(expected) == 150
    for lane_bytes in (ubam.LANE_BYTES, 5000, 1 << 20):
        assert chain_outcome(data, lane_bytes) == expected, lane_bytes


def first_record_offset_by_offset(data, pos, at_end):
    """:func:`ubam.first_record` one offset at a time: the first from ``pos`` on whose fields agree
    and from which the chain of records checks out (None where ``data`` is too short to tell)."""
    at = np.arange(pos, data.size - ubam.FIXED)
    for k in at[ubam._fields_agree(data, at, splits.MAX_RECORD_BYTES)[0]].tolist():
        verdict = ubam._chain_from(data, k, at_end, splits.MAX_RECORD_BYTES)
        if verdict is None or verdict:
            return None if verdict is None else k
    return data.size if at_end else None


def test_the_first_record_after_any_offset_of_long_and_short_records(tmp_path):
    """From offsets inside short records and inside long ones (3-9 kb, tags of zeros), a record
    starting where a window of offsets ends among them, in bytes that end with the file or do
    not: the record found a window at a time is the one found offset by offset; and the
    smallest record, ending the file, found from where a window ends."""
    rng = np.random.default_rng(9)
    short = inflated_records(write_bam(tmp_path / "short.bam", _records(40)))
    records = [{"name": f"m64011/{i}/ccs", "seq": "".join(rng.choice(list("ACGT"), n)), "flag": 4,
                "qual": rng.integers(0, 94, n).tolist(), "tags": [("fi", ("B", [0] * int(rng.integers(500, 4000))))]}
               for i, n in enumerate(rng.integers(3000, 9000, 6).tolist())]
    long = inflated_records(write_bam(tmp_path / "long.bam", records))
    starts = ubam.records_of(long, "long.bam", "test", splits.MAX_RECORD_BYTES).tolist()
    seams = {s - w for s in starts for w in (ubam.FIRST_WINDOW, 5 * ubam.FIRST_WINDOW) if s >= w}  # a window ends there
    for data in (short, long, long[:long.size // 2]):
        for pos in sorted(set(rng.integers(0, data.size - ubam.FIXED, 12).tolist()) | {0, 1} | seams):
            for at_end in (True, False):
                found = ubam.first_record(data, pos, at_end, splits.MAX_RECORD_BYTES)
                assert found == first_record_offset_by_offset(data, pos, at_end), (data.size, pos, at_end)
    # The smallest record (a name of its NUL alone, no bases: 37 bytes) ends the file and begins
    # where a window ends, the last offset whose fixed fields the bytes hold.
    data = np.frombuffer(bytes(5000) + record_at_limits(1, 0, 0, 0, []), np.uint8)
    pos = data.size - ubam.FIXED - 1 - ubam.FIRST_WINDOW
    assert ubam.first_record(data, pos, True, splits.MAX_RECORD_BYTES) == data.size - 37
    assert first_record_offset_by_offset(data, pos, True) == data.size - 37


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=bam_records(), lane_bytes=LANES, data=st.data())
def test_damaged_records_in_lanes_fail_as_every_offset_checked_does(tmp_path, records, lane_bytes, data):
    """Bytes overwritten anywhere (lengths, names, fields): the lanes give the records or the
    error that checking every offset gives, never records of their own."""
    raw = inflated_records(write_bam(tmp_path / "r.bam", records)).copy()
    for _ in range(data.draw(st.integers(1, 4), label="damages")):
        at = data.draw(st.integers(0, raw.size - 1), label="at")
        raw[at] = data.draw(st.sampled_from([0, 1, 32, 0x7F, 0xFF, int(raw[at]) ^ 1]), label="byte")
    assert chain_outcome(raw, lane_bytes) == chain_outcome(raw, None)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=bam_records(), data=st.data())
def test_fields_agree_as_the_spec_reads_them_field_by_field(tmp_path, records, data):
    """At every offset of records (damaged, cut short anywhere, with the record-length limit
    anywhere), the fields check out exactly where the field-by-field reading of the SAM spec
    says they do."""
    raw = inflated_records(write_bam(tmp_path / "r.bam", records)).copy()
    for _ in range(data.draw(st.integers(0, 4), label="damages")):
        at = data.draw(st.integers(0, raw.size - 1), label="at")
        raw[at] = data.draw(st.sampled_from([0, 1, 32, 0x7F, 0x80, 0xFF, int(raw[at]) ^ 1]), label="byte")
    raw = raw[:data.draw(st.integers(ubam.FIXED, raw.size), label="size")]
    max_record = data.draw(st.sampled_from([40, 200, 600, splits.MAX_RECORD_BYTES]), label="max_record")
    at = np.arange(raw.size - ubam.FIXED + 1)
    ok, size = ubam._fields_agree(raw, at, max_record)
    held = raw.tobytes()
    assert ok.tolist() == [reference_fields_agree(held, a, max_record) for a in at.tolist()]
    assert size.tolist() == [int.from_bytes(held[a:a + 4], "little", signed=True) for a in at.tolist()]


# Each field of a record's fixed fields and name at or past a limit of the checks: a length one or
# two short of its fields' or at 16 MiB, positions of -2, an empty or 255-byte name, a name
# without its NUL or with a space or DEL first, l_seq of -1 or at 16 MiB, a full CIGAR count.
PUSHES = ([("size", v) for v in (-1, 35, (1 << 24) - 1, 1 << 24, 2**31 - 1)] + [("short", 1), ("short", 2)]
          + [("position", (i, v)) for i in range(4) for v in (-2, -2**31, 2**31 - 1)]
          + [("name_len", 0), ("name_len", 255)] + [("first", v) for v in (0, 31, 32, 33, 126, 127, 128, 255)]
          + [("nul", v) for v in (1, 0x41, 0xFF)] + [("length", v) for v in (-1, -2**31, (1 << 24) - 1, 1 << 24)]
          + [("cigar_ops", 0xFFFF)])


def record_at_limits(name_len: int, cigar_ops: int, length: int, extra: int, pushes) -> bytes:
    """The fixed fields and name of a record whose fields check out (a name of ``name_len`` bytes
    with its NUL, ``extra`` bytes of tags) but for the ``pushes`` (of :data:`PUSHES`)."""
    f = dict(name_len=name_len, cigar_ops=cigar_ops, length=length, extra=extra, size=None, first=ord("r"), nul=0)
    positions = [-1, 0, 5, -1]  # refID, pos, next_refID, next_pos
    for what, value in pushes:
        if what == "position":
            positions[value[0]] = value[1]
        elif what == "short":
            f["extra"] = -value
        else:
            f[what] = value
    least = 32 + f["name_len"] + 4 * f["cigar_ops"] + (f["length"] + 1) // 2 + f["length"]
    size = max(min(least + f["extra"] if f["size"] is None else f["size"], 2**31 - 1), -2**31)
    name = bytes([f["first"]] * (f["name_len"] - 1) + [f["nul"]] * (f["name_len"] > 0))
    fields = [np.int32(size), np.int32(positions[0]), np.int32(positions[1]), np.uint8(f["name_len"]), np.uint8(0),
              np.uint16(0), np.uint16(f["cigar_ops"]), np.uint16(4), np.int32(f["length"]),
              np.int32(positions[2]), np.int32(positions[3]), np.int32(0)]
    return b"".join(field.tobytes() for field in fields) + name


def assert_fields_agree_as_the_reference(held: bytes, max_record: int) -> None:
    """:func:`ubam._fields_agree` at every offset of ``held`` equals the field-by-field reading;
    so it does for the offsets whose names ``held`` holds whole, checked alone (with no name
    cut short among them)."""
    data = np.frombuffer(held, np.uint8)
    at = np.arange(data.size - ubam.FIXED + 1)
    expected = np.array([reference_fields_agree(held, a, max_record) for a in at.tolist()], bool)
    assert ubam._fields_agree(data, at, max_record)[0].tolist() == expected.tolist()
    whole = at + ubam.FIXED + data[at + 12] <= data.size
    assert ubam._fields_agree(data, at[whole], max_record)[0].tolist() == expected[whole].tolist()


@pytest.mark.parametrize("max_record", [40, 300, splits.MAX_RECORD_BYTES, 2**31 - 1])
def test_fields_agree_at_every_limit(max_record):
    """Records with each field in turn at or past a limit of the checks, on records of names,
    CIGARs and sequences of several lengths, odd and even, back to back: every offset checked
    exactly as the field-by-field reading of the SAM spec says; and each record alone, its name
    ending where the bytes do."""
    records = [record_at_limits(name_len, cigar_ops, length, extra, pushes)
               for name_len in (1, 2, 17) for cigar_ops in (0, 3) for length in (0, 1, 2, 7)
               for extra in (0, 1) for pushes in [[]] + [[push] for push in PUSHES]]
    assert_fields_agree_as_the_reference(b"".join(records), max_record)
    for record in records:
        assert_fields_agree_as_the_reference(record, max_record)


@settings(max_examples=examples(60), deadline=None)
@given(data=st.data())
def test_fields_agree_with_several_fields_at_limits(data):
    """Records with several fields at limits at once, back to back and cut short anywhere."""
    records = data.draw(st.lists(st.builds(record_at_limits, st.sampled_from([1, 2, 17]), st.sampled_from([0, 3]),
                                           st.sampled_from([0, 1, 2, 7, 100]), st.sampled_from([0, 1, 9]),
                                           st.lists(st.sampled_from(PUSHES), max_size=3)),
                                 min_size=1, max_size=6), label="records")
    held = b"".join(records)
    held = held[:data.draw(st.integers(ubam.FIXED, len(held)), label="size")]
    assert_fields_agree_as_the_reference(held, data.draw(st.sampled_from([40, 300, 2**31 - 1]), label="max_record"))


def test_read_chunk_of_bam_checks_reads_as_fastq_does(tmp_path):
    """A read with a symbol outside the alphabet (BAM's '=', "the reference's base", which a read to
    map cannot hold), in BAM, is an error naming the read, as in FASTQ; IUPAC codes map as N."""
    records = _records(3)
    records[0]["seq"] = "ACGTM" + "A" * 23
    records[1]["seq"] = "ACGT=" + "A" * 23
    path = write_bam(tmp_path / "r.bam", records)
    (split,) = bam_splits(path, [])
    with pytest.raises(InputFormatError, match="r1"):
        fastx.read_chunk(split, DNA)


@pytest.mark.parametrize("protocol", ["file", "http"])
def test_a_bam_url_is_cut_and_read_as_its_file_is(tmp_path, protocol):
    """A BAM URL (fsspec's file://, or a local web server's http:// with byte ranges): planned from
    its size and first bytes, each split fetched by byte ranges, the same reads as the file."""
    import contextlib

    from helpers import http_server

    rng = np.random.default_rng(6)
    records = [{"name": f"r{i}", "seq": "".join(rng.choice(list("ACGT"), size=60)), "flag": 4, "qual": [20] * 60}
               for i in range(3000)]
    write_bam(tmp_path / "r.bam", records, cuts=list(range(0, 400_000, 20_000)))
    with contextlib.ExitStack() as stack:
        base = stack.enter_context(http_server(tmp_path)) if protocol == "http" else tmp_path.as_uri()
        url = f"{base}/r.bam"
        plan = list(splits.plan_input(splits.reads_paths(url), lambda *_: 400))
        assert len(plan) > 3 and all(s.path == url and s.bam and s.bgzf for s in plan)
        reads = []
        for split in plan:
            f = fastx.source_fields(split)
            reads += [f.data[f.name_off[i]:f.name_off[i] + f.name_len[i]].tobytes().decode() for i in range(len(f))]
    assert reads == [r["name"] for r in records]


def test_a_bam_headers_read_group_is_its_reads(tmp_path, client):
    """GATK's unaligned BAM holds one lane, its read group in the header: without -R, each file's
    reads get their file's; with -R, the user's; where some reads file names no read group, a
    warning, and the reads get none."""
    index = genome_case(tmp_path, 4, 2000, 40, 30)
    fq = tmp_path / "r.fq"
    for lane in ("a", "b"):
        subprocess.run(["samtools", "import", "-0", str(fq), "-r", f"ID:{lane}", "-r", "SM:s", "-o",
                        str(tmp_path / f"{lane}.bam")], check=True)
    header = pysam.view("-H", str(tmp_path / "a.bam")) + "@RG\tID:c\tSM:s\n"  # a second read group
    (tmp_path / "two.sam").write_text(header)
    with open(tmp_path / "two.bam", "wb") as out:
        subprocess.run(["samtools", "reheader", str(tmp_path / "two.sam"), str(tmp_path / "a.bam")], stdout=out,
                       check=True)

    def mapped(reads, **options):
        dmap.map_reads(index, reads, sam_path=tmp_path / "out.sam", client=client, **options)
        with pysam.AlignmentFile(str(tmp_path / "out.sam")) as sam:
            groups = [g["ID"] for g in sam.header.to_dict().get("RG", [])]
            return groups, [r.get_tag("RG") if r.has_tag("RG") else None for r in sam if not r.is_secondary]

    assert mapped([tmp_path / "a.bam", tmp_path / "b.bam"]) == (["a", "b"], ["a"] * 30 + ["b"] * 30)
    assert mapped(tmp_path / "a.bam", read_group="@RG\tID:mine\tSM:s") == (["mine"], ["mine"] * 30)
    assert mapped(tmp_path / "two.bam") == (["a", "c"], ["a"] * 30)  # its records' tags
    with pytest.warns(DmapWarning, match="only where every reads file is BAM naming read groups: give read groups"):
        assert mapped([tmp_path / "a.bam", fq]) == ([], [None] * 60)


@pytest.mark.parametrize("output", ["sam", "bam"])
def test_merged_lanes_keep_each_records_read_group(tmp_path, client, output):
    """A BAM of merged lanes names several read groups, and each record's RG tag says its own:
    each read keeps it, whatever the chunks (several groups in one chunk, a chunk across two
    files), single or paired; a read whose tag names none of the header's, or that has none,
    gets none.  With -R, the user's read group is every read's."""
    index = genome_case(tmp_path, 5, 3000, 50, 0)
    rng = np.random.default_rng(5)
    text = (tmp_path / "ref.fa").read_text().split("\n", 1)[1].replace("\n", "")
    lanes = ["L1", "L2", "L3", "zz", None]  # zz: not in the header
    records, tags = [], []
    for i in range(60):  # 30 pairs: mates i and i + 1 of one lane
        lane = lanes[(i // 2) % len(lanes)]
        start = int(rng.integers(0, len(text) - 50))
        seq = text[start:start + 50]
        flag = 4 | (0x41 if i % 2 == 0 else 0x81) | 1
        extra = [("XB", [7, -1, 2**30])] if i % 3 else []
        records.append({"name": f"p{i // 2}", "seq": seq, "qual": [30] * 50, "flag": flag,
                        "tags": extra + ([("RG", lane)] if lane else []) + [("XZ", "x")]})
        tags.append(lane if lane in ("L1", "L2", "L3") else None)
    write_bam(tmp_path / "m.bam", records[:40], read_groups=("L1", "L2", "L3"))
    write_bam(tmp_path / "n.bam", records[40:], read_groups=("L2", "L3", "L1"))
    out = tmp_path / f"out.{output}"

    def mapped(**options):
        dmap.map_reads(index, [tmp_path / "m.bam", tmp_path / "n.bam"], sam_path=out, client=client, **options)
        with pysam.AlignmentFile(str(out)) as sam:
            groups = [g["ID"] for g in sam.header.to_dict().get("RG", [])]
            got = {}
            for r in sam:  # both mates (or, as single reads, both reads) of a pair, of one lane
                got.setdefault(r.query_name, set()).add(r.get_tag("RG") if r.has_tag("RG") else None)
            return groups, [got[f"p{i}"] for i in range(30)]

    want = [{t} for t in tags[::2]]
    for chunk_size in (7, 1000):
        with pytest.warns(DmapWarning, match="holds pairs"):
            assert mapped(chunk_size=chunk_size) == (["L1", "L2", "L3"], want)
        assert mapped(chunk_size=chunk_size, interleaved=True) == (["L1", "L2", "L3"], want)
    with pytest.warns(DmapWarning, match="holds pairs"):
        assert mapped(read_group="@RG\tID:mine") == (["mine"], [{"mine"}] * 30)


def test_bam_read_groups_that_disagree_are_one_clear_error(tmp_path):
    """Two files naming one ID with two different @RG lines: one line, before any mapping."""
    index = genome_case(tmp_path, 6, 1000, 30, 0)
    write_bam(tmp_path / "a.bam", _records(2), read_groups=("L1",))
    path = write_bam(tmp_path / "b.bam", _records(2))
    header = pysam.view("-H", str(path)) + "@RG\tID:L1\tSM:other\n"
    (tmp_path / "b.sam").write_text(header)
    with open(tmp_path / "c.bam", "wb") as f:
        subprocess.run(["samtools", "reheader", str(tmp_path / "b.sam"), str(path)], stdout=f, check=True)
    with pytest.raises(dmap.DmapError, match="name read group 'L1' with two different @RG lines"):
        dmap.map_reads(index, [tmp_path / "a.bam", tmp_path / "c.bam"], sam_path=tmp_path / "o.sam")
    assert not (tmp_path / "o.sam").exists()
