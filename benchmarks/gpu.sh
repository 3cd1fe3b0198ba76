#!/bin/bash
# dmap's benchmarks on a machine with an NVIDIA GPU, through its OpenCL driver
# (docs/performance.md, "GPU"), with the other mappers on every CPU core.
#
#   bash benchmarks/gpu.sh [SECTION...]     # exact kernels exact1m myers neighborhood approx allmap pairs writes buffers
#                                           # timeline heap ab start threads switch spawn outputs bam gzip
#                                           # bytecode (bytecode: for the sections after it)
#
# Needs: dmap installed; bowtie, bowtie2, bwa, minimap2, yara_mapper, yara_indexer, razers3 and
# mason_simulator on PATH (or in /usr/lib/seqan/bin); E. coli as
# /tmp/dmap-bench/ecoli.fa (or Debian's bowtie-examples); ../shared/bench/.
# Or, on a machine that cannot reach a package registry, all of it from a folder made by
# benchmarks/device_bundle.sh:  DMAP_BUNDLE=DIR bash benchmarks/gpu.sh
#
# Only the NVIDIA driver is used: OCL_ICD_VENDORS names a folder holding one
# ICD file for libnvidia-opencl.so.1 (a container often has the driver's
# library but no ICD file naming it, or PoCL's beside it).
set -u
cd "$(dirname "$0")/.."
# On a machine without a package registry: what benchmarks/device_bundle.sh gathered.
if [ -n "${DMAP_BUNDLE:-}" ]; then
  bundle=$(cd "$DMAP_BUNDLE" && pwd)
  python3 -m pip install -q --upgrade --no-index --no-deps --target /tmp/dmap-site "$bundle"/whl/*.whl || exit 1
  # The checkout first: the bundle's dmap is the one of the day it was made.
  export PYTHONPATH=$PWD:/tmp/dmap-site${PYTHONPATH:+:$PYTHONPATH} PATH=/tmp/dmap-site/bin:$bundle/bin:$PATH
  export DMAP_ECOLI=$bundle/ecoli.fna.gz
  mkdir -p ../shared/bench && cp "$bundle"/shared-bench/*.py ../shared/bench/
fi
lib=$(ldconfig -p | awk '/libnvidia-opencl.so.1/{print $NF; exit}')
[ -z "$lib" ] && lib=$(find / -xdev \( -path /proc -o -path /sys \) -prune -o -name libnvidia-opencl.so.1 -print \
  2>/dev/null | head -1)
[ -z "$lib" ] && { echo "no libnvidia-opencl.so.1: is the NVIDIA driver installed?" >&2; exit 1; }
icd=$(mktemp -d) && echo "$lib" > "$icd/nvidia.icd" && export OCL_ICD_VENDORS=$icd
threads=$(nproc)
W=/tmp/dmap-bench
mkdir -p $W
dmap devices || exit 1
# Sections, in the order given (default: all, "bytecode" first, about 20 minutes; a lent
# machine's call runs at most 10: e.g. `gpu.sh bytecode start exact`, 5 minutes).
# "exact": 10M reads against bowtie -p N, 8 standing workers of 2 and 3 threads, with
# default and 100,000-read chunks, and `dmap run --workers-per-device 8` (the embedded
# cluster's 8 spawned workers, their start included; about 3.5 minutes, 40 s of it making
# the reads). "writes": 8 processes writing 2.9 GB into one file; "buffers": the same in 19 MB
# chunks (a 10M-read run's), direct writes through buffers of 8, 32 and 64 MiB.
# "timeline": where the time of 8 workers' runs goes (benchmarks/timeline.py), to a file
# and to /dev/null, of 16 one-thread workers (no interpreter lock shared) to a file, and of
# the embedded cluster's first round (what a plain `dmap run` gets).
# "heap": 8 workers' runs (timeline.py) with the Nanny's heap kept (its trim threshold given
# another value than Dask's, which dmap.cluster.worker.restore_chunk_heap leaves alone), then with
# glibc's own policy, as dmap sets it (docs/performance.md, "Worker processes and glibc's heap").
# "start": where the client's start goes on this machine (0.5-0.9 s on the H200 and H100 hosts, 0.23-0.26 s on
# the 2-core VM): the bare interpreter, the 25 slowest imports of `dmap run`, and `dmap run -v`'s
# own account of a 10M-read run's start, mapping and end, three times each.
# "bytecode": whether this Python finds compiled bytecode for what dmap imports (a container's
# Python often runs with PYTHONDONTWRITEBYTECODE and packages installed without it, so every start
# compiles numpy, Dask and dmap again); then, for the sections after it, bytecode written once
# under /tmp/dmap-pycache (PYTHONPYCACHEPREFIX), as an installed environment has it beside its sources.
# "outputs": a digest of each search path's records on fixed inputs (benchmarks/same_outputs.sh),
# to compare with PoCL's on a CPU. "pairs": 500,000 mason pairs of E. coli, `-e 3`, against
# Yara, bwa mem and bowtie2 on every core (benchmarks/pairs_vs_peers.py, two rounds).
# "ab": versions of dmap in turn on 10M reads (benchmarks/ab_packages.py), for each of
# DMAP_AB="OLD=DIR NEW=DIR --workers 8 --pairs 4;OLD=DIR NEW=DIR --pairs 3", on the reads of each
# form DMAP_AB_READS names (default fq; bgzf: in bgzip's blocks; bam: as unaligned BAM).
# "spawn": what the spawned workers of `dmap run --workers-per-device 8` cost to start (about
# 3.7 s on an H100 host): an OpenCL context made in 1 and in 8 processes at once (whether the
# driver takes them in turn), then `dmap run -v` on 20,000 and 1M reads with 8 and 4 spawned
# workers, with one spawned worker (--processes) and with the in-process one (about a minute).
# "bam": the 10M reads as unaligned BAM (reads_10m_bam below) against the same reads as FASTQ,
# read by the workers, with 8 standing workers of 3 threads and with the embedded cluster
# (benchmarks/timeline.py: wall time, CPU per process, time per stage); whether decoding BAM on
# the workers keeps up where they have 16 cores.
# "gzip": "exact" on the 10M reads compressed by `gzip -1` (dmap's client inflates them alone:
# how far one process's inflating caps a run on 16 cores) and into bgzip's blocks (the workers cut
# and inflate them), bowtie -p N reading the same files (about 3 minutes, half a minute of it gzip -1).
# "threads": the embedded cluster (a plain `dmap run`: one worker, in dmap's own process)
# with a GPU's task threads (each running a device task) capped at 8, as dmap has them
# (GPU_WORKER_THREADS in dmap/cluster/client.py; half of 16 cores), against 4 and 16,
# alternating on 10M reads.
# "switch": dmap's process with the interpreter's switch interval at Python's 5 ms and at 0.2 ms
# (sys.setswitchinterval in dmap/__main__.py), alternating on 10M reads: the embedded cluster on
# FASTQ to a file and to BAM and on bgzip's blocks, and the client of 8 standing workers on
# `gzip -1`, which it inflates (about 5 minutes). A thread back from a call that let go of the
# interpreter's lock (a BGZF block compressed, an OpenCL wait, a megabyte inflated by xopen's
# thread) waits for it up to the interval behind threads running Python: 600 BGZF blocks
# compressed beside one such thread took 4.4 s at 5 ms and 0.29 s at 0.2 ms on the VM, and
# 213 MB inflated by xopen 1.45 s against 0.37 s alone (docs/performance.md, "GPU").

# 10M exact reads and the index, made once.
reads_10m() {
  python3 -c "import sys; sys.path.insert(0, 'benchmarks'); from pathlib import Path
from exact_vs_bowtie import ecoli_reference, simulated_reads
simulated_reads(Path('$W'), ecoli_reference(Path('$W')), 10_000_000, 100)"
  [ -d $W/ecoli.dmap ] || dmap index $W/ecoli.fa -o $W/ecoli.dmap
}
# 1M exact reads and the index, made once (without the 10M: "spawn" then takes a minute).
reads_1m() {
  python3 -c "import sys; sys.path.insert(0, 'benchmarks'); from pathlib import Path
from exact_vs_bowtie import ecoli_reference, simulated_reads
simulated_reads(Path('$W'), ecoli_reference(Path('$W')), 1000000, 100)"
  [ -d $W/ecoli.dmap ] || dmap index $W/ecoli.fa -o $W/ecoli.dmap
}
# The 10M reads compressed HOW (gzip: by gzip -1; bgzf: in bgzip's blocks), made once; prints the path.
reads_10m_compressed() {
  python3 -c "import sys; sys.path.insert(0, 'benchmarks'); from pathlib import Path
from exact_vs_bowtie import compressed; print(compressed(Path('$W/exact_10000000_100.fq'), '$1'))"
}
# The 10M reads as unaligned BAM ("bam"): dmap's own BAM of them against a 2-kb random
# reference, where none maps, so every record is unmapped with its sequence and qualities, as
# `samtools import` writes them (this machine may have no samtools).
reads_10m_bam() {
  python3 -c "import random; random.seed(3); print('>random'); print(''.join(random.choices('ACGT', k=2000)))" \
    > $W/random2k.fa
  [ -d $W/random2k.dmap ] || dmap index $W/random2k.fa -o $W/random2k.dmap
  [ -f $W/exact_10000000_100.bam ] || dmap run $W/random2k.dmap $W/exact_10000000_100.fq -o $W/exact_10000000_100.bam
}
# What `dmap run` imports before it maps (the "start" and "bytecode" sections time it).
client_imports="import dmap.cli; from dmap.mapping.pipeline import map_reads"
sections=${*:-bytecode exact kernels exact1m myers neighborhood approx allmap writes buffers timeline}
set -x
for section in $sections; do
  case $section in
    exact) python3 benchmarks/exact_vs_bowtie.py --reads 10000000 --threads "$threads" --repeat 2 --skip-kernel \
             --workers 8 --worker-threads 2 3 --chunk-sizes 100000 --workers-per-device 8 ;;
    kernels) python3 -c "import sys; sys.path.insert(0, 'benchmarks'); from pathlib import Path
from exact_vs_bowtie import ecoli_reference; ecoli_reference(Path('$W'))"
             rm -rf $W/ecoli.dmap && dmap index $W/ecoli.fa -o $W/ecoli.dmap
             python3 ../shared/bench/make_reads.py $W/ecoli.fa -n 1000000 -l 35 --seed 1 -o $W/exact_1000000_35.fq \
               --truth $W/exact_1000000_35.tsv
             python3 benchmarks/kernel_speed.py $W/ecoli.dmap $W/exact_1000000_35.fq --batch 1 4 16 --repeat 5
             python3 benchmarks/transfers.py --mib 64 --repeat 10 --processes 1 8 ;;
    timeline) reads_10m
             python3 benchmarks/timeline.py $W/ecoli.dmap $W/exact_10000000_100.fq --workers 8 --threads 2
             python3 benchmarks/timeline.py $W/ecoli.dmap $W/exact_10000000_100.fq --workers 8 --threads 2 \
               --output /dev/null
             python3 benchmarks/timeline.py $W/ecoli.dmap $W/exact_10000000_100.fq --workers 16 --threads 1
             python3 benchmarks/timeline.py $W/ecoli.dmap $W/exact_10000000_100.fq --embedded --cold --repeat 1 ;;
    heap) reads_10m
          DASK_DISTRIBUTED__NANNY__PRE_SPAWN_ENVIRON='{"MALLOC_TRIM_THRESHOLD_": 65537}' \
            python3 benchmarks/timeline.py $W/ecoli.dmap $W/exact_10000000_100.fq --workers 8 --threads 2
          python3 benchmarks/timeline.py $W/ecoli.dmap $W/exact_10000000_100.fq --workers 8 --threads 2 ;;
    ab) reads_10m
        [ -n "${DMAP_AB:-}" ] || { echo "ab: set DMAP_AB" >&2; exit 2; }
        IFS=';' read -ra pairs <<< "$DMAP_AB"
        for form in ${DMAP_AB_READS:-fq}; do
          reads=$W/exact_10000000_100.fq
          case $form in
            bam) reads_10m_bam && reads=$W/exact_10000000_100.bam ;;
            bgzf) reads=$(reads_10m_compressed bgzf) ;;
          esac
          for pair in "${pairs[@]}"; do
            # shellcheck disable=SC2086
            python3 benchmarks/ab_packages.py $reads $pair
          done
        done ;;
    bam) reads_10m
         reads_10m_bam
         for reads in fq bam; do
           python3 benchmarks/timeline.py $W/ecoli.dmap $W/exact_10000000_100.$reads --workers 8 --threads 3
         done
         for reads in fq bam; do
           python3 benchmarks/timeline.py $W/ecoli.dmap $W/exact_10000000_100.$reads --embedded
         done ;;
    threads) reads_10m
             variants=$(mktemp -d)
             for n in 4 8 16; do
               mkdir -p "$variants/t$n" && cp -r dmap kernels "$variants/t$n/"
               sed -i "s/^GPU_WORKER_THREADS = 8$/GPU_WORKER_THREADS = $n/" "$variants/t$n/dmap/cluster/client.py"
               grep -q "^GPU_WORKER_THREADS = $n$" "$variants/t$n/dmap/cluster/client.py" || exit 1
             done
             for n in 4 16; do
               python3 benchmarks/ab_packages.py $W/exact_10000000_100.fq t8="$variants/t8" t$n="$variants/t$n" --pairs 3
             done ;;
    switch) reads_10m
            variants=$(mktemp -d)
            for us in 5000 200; do
              mkdir -p "$variants/s$us" && cp -r dmap kernels "$variants/s$us/"
            done
            sed -i 's/^    gc.disable()$/&\n    __import__("sys").setswitchinterval(2e-4)/' "$variants/s200/dmap/__main__.py"
            grep -q 'setswitchinterval(2e-4)' "$variants/s200/dmap/__main__.py" || exit 1
            for run in "$W/exact_10000000_100.fq" "$W/exact_10000000_100.fq --output $W/switch.bam" \
                "$(reads_10m_compressed bgzf)" "$(reads_10m_compressed gzip) --workers 8 --threads 3"; do
              # shellcheck disable=SC2086
              python3 benchmarks/ab_packages.py $run s5000="$variants/s5000" s200="$variants/s200" --pairs 3
            done ;;
    spawn) reads_1m
           context="import time; t = time.perf_counter(); from dmap.opencl.device import Device; i = time.perf_counter()
Device('0:0'); print(f'imports {i - t:.2f} s, context {time.perf_counter() - i:.2f} s')"
           python3 -c "$context"
           for _ in 1 2 3 4 5 6 7 8; do python3 -c "$context" & done; wait
           for n in 20000 1000000; do
             [ -f $W/exact_${n}_100.fq ] || head -n $((4 * n)) $W/exact_1000000_100.fq > $W/exact_${n}_100.fq
             for opts in "--workers-per-device 8" "--workers-per-device 4" --processes ""; do
               # shellcheck disable=SC2086
               for _ in 1 2; do dmap run -v $W/ecoli.dmap $W/exact_${n}_100.fq -o /dev/null $opts 2>&1 | tail -1; done
             done
           done ;;
    start) reads_10m
           TIMEFORMAT='python3 -c pass: %R s'
           for _ in 1 2 3; do time python3 -c pass; done
           python3 -X importtime -c "$client_imports" 2>&1 \
             | sort -t'|' -k2 -n -r | head -25
           for _ in 1 2 3; do dmap run -v $W/ecoli.dmap $W/exact_10000000_100.fq -o /dev/null 2>&1 | tail -1; done ;;
    bytecode) env | grep -E '^(PYTHON|PIP)'
              python3 -c "
import importlib.util, os, sys
print('dont_write_bytecode', sys.flags.dont_write_bytecode, 'pycache_prefix', sys.pycache_prefix)
for name in ('numpy', 'distributed', 'pynvml', 'pyopencl', 'zarr', 'dmap'):
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.origin:
        print(name, 'not found')
        continue
    print(name, spec.origin, 'bytecode:', os.path.exists(importlib.util.cache_from_source(spec.origin)),
          'writable:', os.access(os.path.dirname(spec.origin), os.W_OK))"
              TIMEFORMAT='imports as found: %R s'
              for _ in 1 2; do time python3 -c "$client_imports"; done
              unset PYTHONDONTWRITEBYTECODE
              export PYTHONPYCACHEPREFIX=/tmp/dmap-pycache
              python3 -c "import dmap.cli, dmap.mapping.pipeline, dmap.cluster.worker, pyopencl, distributed.cli.dask_worker"
              TIMEFORMAT='imports with bytecode: %R s'
              for _ in 1 2 3; do time python3 -c "$client_imports"; done ;;
    outputs) bash benchmarks/same_outputs.sh $W/outputs ;;
    pairs) python3 benchmarks/pairs_vs_peers.py --threads "$threads" --refs ecoli --pairs 500000 --repeat 2 ;;
    writes) python3 benchmarks/parallel_writes.py --processes 8 --dir $W --repeat 2 ;;
    buffers) python3 benchmarks/parallel_writes.py --processes 8 --dir $W --repeat 2 --chunk-mib 19 \
               --modes pwrite write_at "write_at, preallocated" --buffer-mib 8 32 64 ;;
    exact1m) python3 benchmarks/exact_vs_bowtie.py --reads 1000000 --threads "$threads" --repeat 5 ;;
    gzip) for how in gzip bgzf; do
            python3 benchmarks/exact_vs_bowtie.py --reads 10000000 --threads "$threads" --repeat 2 --skip-kernel \
              --workers 8 --worker-threads 3 --chunk-sizes 100000 --compress $how
          done ;;
    myers) for m in 100 250 500; do
             python3 benchmarks/myers_gcups.py --pairs 1000000 --length $m --window $((m + 6)) --no-edlib
           done ;;
    neighborhood) python3 benchmarks/neighborhood_lookup.py --queries 1000000 ;;
    approx) python3 benchmarks/approx_vs_tools.py --threads "$threads" --reads 200000 --repeat 2 ;;
    allmap) python3 benchmarks/allmap_vs_peers.py --threads "$threads" --workers 8 --refs ecoli
            python3 benchmarks/allmap_vs_peers.py --threads "$threads" --workers 8 --refs synth --reads 500000 \
              --rows 100:3 ;;
    *) echo "unknown section $section" >&2; exit 2 ;;
  esac
done
