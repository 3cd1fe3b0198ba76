"""On the E. coli genome, dmap's exact hits equal ``bowtie -v 0 -a`` exactly."""

import gzip
import subprocess

import numpy as np
import pysam
import pytest
from helpers import have, samtools_quickcheck

import dmap
from dmap.alphabet import reverse_complement

ECOLI = "/usr/share/doc/bowtie/examples/genomes/NC_008253.fna.gz"

pytestmark = pytest.mark.skipif(
    not (have("bowtie") and have("bowtie-build") and __import__("os").path.exists(ECOLI)),
    reason="needs Debian's bowtie and bowtie-examples (scripts/install.sh test installs them)",
)


def sam_hits(path):
    hits = set()
    with pysam.AlignmentFile(str(path)) as sam:
        for r in sam:
            if not r.is_unmapped:
                hits.add((r.query_name, r.reference_name, r.reference_start, r.is_reverse))
    return hits


# The default index of E. coli keeps every SA value (no locate walks); with
# S = 16, hits are located by LF-walks (large references sample every 8 rows).
@pytest.mark.parametrize("sa_sample_rate", [None, 16])
def test_hits_equal_bowtie(tmp_path, sa_sample_rate):
    with gzip.open(ECOLI, "rt") as f:
        (tmp_path / "ecoli.fa").write_text(f.read())
    genome = "".join(line.strip() for line in open(tmp_path / "ecoli.fa") if not line.startswith(">"))
    rng = np.random.default_rng(11)
    reads = []
    for i in range(6000):
        length = int(rng.choice([20, 35, 50, 100, 150]))
        at = int(rng.integers(0, len(genome) - length))
        r = genome[at : at + length]
        if i % 2:
            r = reverse_complement(r)
        if i % 50 == 7:  # maps nowhere
            r = "".join(rng.choice(list("ACGT"), size=length))
        if i % 97 == 3:
            r = r[:5] + "N" + r[6:]
        reads.append(r)
    reads += ["ACGTACGTAC", "TTTTTTTTTTTTTT", "GCGCGCGCGCG"]  # short repeats with many hits
    with open(tmp_path / "reads.fq", "w") as f:
        for i, r in enumerate(reads):
            f.write(f"@r{i}\n{r}\n+\n{'I' * len(r)}\n")

    idx = dmap.build_index(tmp_path / "ecoli.fa", tmp_path / "ecoli.dmap", block_length=1_500_000,
                           max_query_length=150, sa_sample_rate=sa_sample_rate)
    assert idx.n_blocks == 4  # hits in block overlaps are deduplicated
    assert idx.meta.sa_sample_rate == (sa_sample_rate or 1)
    res = dmap.map_reads(idx, tmp_path / "reads.fq", sam_path=tmp_path / "dmap.sam", return_hits=False)
    samtools_quickcheck(tmp_path / "dmap.sam")

    subprocess.run(["bowtie-build", "-q", str(tmp_path / "ecoli.fa"), str(tmp_path / "bt")], check=True)
    subprocess.run(["bowtie", "-v", "0", "-a", "-p", "2", "--sam", "-q", str(tmp_path / "bt"),
                    str(tmp_path / "reads.fq"), str(tmp_path / "bowtie.sam")], check=True, capture_output=True)
    expected = sam_hits(tmp_path / "bowtie.sam")
    got = sam_hits(tmp_path / "dmap.sam")
    assert len(expected) > len(reads)
    assert got == expected
    assert res.n_hits == len(expected)
