#!/bin/bash
# A digest of dmap's output for each search path on fixed inputs, to compare
# devices: the records depend on the reads and the index alone, so a GPU's run
# must print the same lines as PoCL's on a CPU (`@PG`, which holds the command
# line, left out).
#
#   bash benchmarks/same_outputs.sh [DIR]      # default DIR: /tmp/dmap-bench/outputs
#
# Inputs: dmap's example genome (three contigs, Ns), its 2,000 exact reads and
# 10,000 pairs (dmap.write_example, dmap.write_example_pairs), and 20,000
# reads with 2 substitutions and an indel (../shared/bench/make_reads.py,
# seed 3). Each line: the run's arguments, its records, and their md5.
# BAM as reads comes from dmap itself (no samtools needed): the edited reads
# with tags in each comment (a barcode, a float and an array of floats),
# mapped with -C and a read group into BAM (floats read as strtod does), then
# mapped again from that BAM (decoded on the device, the read group taken from
# its records, the tags carried with -C, floats written as %g, the old
# alignment's tags left out), and once more from standard input (a BAM
# stream: the same records).
set -euo pipefail
cd "$(dirname "$0")/.."
d=${1:-/tmp/dmap-bench/outputs}
rm -rf "$d" && mkdir -p "$d"
python3 -c "import dmap; dmap.write_example('$d'); dmap.write_example_pairs('$d')" >/dev/null
python3 ../shared/bench/make_reads.py "$d/genome.fa" -n 20000 -l 100 --errors 2 --indels 1 --seed 3 \
  -o "$d/edits.fq" --truth "$d/edits.tsv" >/dev/null 2>&1
dmap index "$d/genome.fa" -o "$d/genome.dmap" -q
awk 'NR % 4 == 1 {print $0 " BC:Z:" substr("ACGTTGCA", 1 + NR % 5, 4) "\tXF:f:" NR / 7e5 "\tXG:B:f," NR "," (-1 / NR);
  next} {print}' "$d/edits.fq" > "$d/tags.fq"
dmap run -q "$d/genome.dmap" "$d/tags.fq" -C -R '@RG\tID:lane1\tSM:s' -e 3 --all -o "$d/tags.bam"
for args in "reads.fq" "edits.fq -e 3" "edits.fq -e 3 --all" "reads_1.fq reads_2.fq" \
    "reads_1.fq reads_2.fq -e 2" "edits.fq -e 4 --chunk-size 3000" "tags.bam -C -e 3" "tags.bam -C --chunk-size 3000"; do
  files=() opts=()
  for a in $args; do
    if [[ $a == *.fq || $a == *.bam ]]; then files+=("$d/$a"); else opts+=("$a"); fi
  done
  dmap run -q "$d/genome.dmap" "${files[@]}" "${opts[@]}" -o "$d/out.sam"
  echo "$args: $(grep -vc '^@' "$d/out.sam") records, md5 $(grep -v '^@PG' "$d/out.sam" | md5sum | cut -d' ' -f1)"
done
dmap run -q "$d/genome.dmap" - -C -e 3 -o "$d/out.sam" < "$d/tags.bam"
echo "stdin tags.bam -C -e 3: $(grep -vc '^@' "$d/out.sam") records, md5 $(grep -v '^@PG' "$d/out.sam" | md5sum | cut -d' ' -f1)"
