"""Write a small example: a 3-contig random genome with repeats and N runs,
and 20,000 100-bp reads from it (half reverse-complemented, some random)."""

import sys
from pathlib import Path

import numpy as np

out = Path(sys.argv[1] if len(sys.argv) > 1 else "demo")
out.mkdir(parents=True, exist_ok=True)
rng = np.random.default_rng(7)
bases = np.frombuffer(b"ACGT", np.uint8)
contigs = {}
for name, n in (("chr1", 300_000), ("chr2", 150_000), ("plasmid", 20_000)):
    seq = bases[rng.integers(0, 4, n)].copy()
    seq[1000:1300] = np.frombuffer(b"AC" * 150, np.uint8)  # a tandem repeat
    seq[5000:5500] = ord("N")  # an assembly gap
    contigs[name] = seq.tobytes().decode()
# A segmental duplication: 2 kbp of chr1 copied into chr2.
contigs["chr2"] = contigs["chr2"][:9000] + contigs["chr1"][20000:22000] + contigs["chr2"][11000:]
with open(out / "genome.fa", "w") as f:
    for name, seq in contigs.items():
        f.write(f">{name}\n" + "\n".join(seq[i : i + 70] for i in range(0, len(seq), 70)) + "\n")
comp = str.maketrans("ACGT", "TGCA")
with open(out / "reads.fq", "w") as f:
    names = list(contigs)
    for i in range(20_000):
        seq = contigs[names[i % 3]]
        at = int(rng.integers(0, len(seq) - 100))
        read = seq[at : at + 100]
        if "N" in read or i % 10 == 9:
            read = "".join(bases[rng.integers(0, 4, 100)].tobytes().decode())  # maps nowhere
        if i % 2:
            read = read.translate(comp)[::-1]
        f.write(f"@read{i}\n{read}\n+\n{'I' * 100}\n")
print(f"wrote {out}/genome.fa ({sum(map(len, contigs.values()))} bp) and {out}/reads.fq (20000 reads)")
