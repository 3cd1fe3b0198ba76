#!/usr/bin/env bash
# Install dmap, index a generated 3-contig genome and map 20,000 reads with the
# embedded local cluster; print the SAM header and first records.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
work=${DMAP_DEMO_DIR:-demo}
mkdir -p "$work"
python3 scripts/make_example.py "$work"
dmap index "$work/genome.fa" -o "$work/genome.dmap" --overwrite
dmap index info "$work/genome.dmap" | head -8
dmap run "$work/genome.dmap" "$work/reads.fq" -o "$work/reads.sam"
head -n 12 "$work/reads.sam"
