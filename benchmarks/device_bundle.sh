#!/bin/bash
# A folder holding what benchmarks/gpu.sh needs on a machine that cannot reach a
# package registry (a lent GPU machine): wheels of dmap and of its dependencies
# for that machine's Python, at the versions installed here (the tested ones);
# the other mappers' Debian binaries; E. coli; the Python scripts of ../shared/bench.
#
#   bash benchmarks/device_bundle.sh [DIR] [PYTHON] [--exclude NAME...]
#                                   # default: .bundle, 3.12, --exclude numpy pillow
#   ...carry DIR to the machine (.bundle is ignored by git: a lent machine's call names it in
#   its carry), then there:
#   DMAP_BUNDLE=DIR bash benchmarks/gpu.sh
#
# About 55 MB, under the 64 MiB that travels with a lent machine's call. The
# excluded wheels are those the machine already has at a version that works
# (its image's numpy and pillow did). The binaries need only libc, libstdc++,
# zlib, libbz2, libgomp, Python 3 and Perl, which such a machine has.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-.bundle}
python=${2:-3.12}
shift $(( $# < 2 ? $# : 2 ))
exclude=(numpy pillow)
[ "${1:-}" = "--exclude" ] && shift && exclude=("$@")
rm -rf "$dir"
mkdir -p "$dir/whl" "$dir/deb" "$dir/root"
python3 -m pip wheel -q --no-deps -w "$dir/whl" .
# The versions installed here, so that the machine runs what the tests ran.
python3 -m pip list --format=freeze | grep -v '^dmap=' > "$dir/constraints.txt"
platforms=()
for tag in manylinux_2_28 manylinux_2_27 manylinux_2_24 manylinux_2_17 manylinux2014 manylinux_2_5 manylinux1; do
  platforms+=(--platform "${tag}_x86_64")
done
python3 -m pip download -q --only-binary=:all: --python-version "$python" --implementation cp "${platforms[@]}" \
  -c "$dir/constraints.txt" -d "$dir/whl" "$dir"/whl/dmap-*.whl
for name in "${exclude[@]}"; do
  rm -f "$dir"/whl/"$(echo "$name" | tr - _)"-*.whl "$dir"/whl/"$name"-*.whl
done
(cd "$dir/deb" && apt-get download -q bowtie bowtie-examples bowtie2 bwa minimap2 seqan-apps >/dev/null 2>&1)
for deb in "$dir"/deb/*.deb; do dpkg -x "$deb" "$dir/root"; done
# The tools the benchmarks run (the wrappers find their -s binaries beside them).
mkdir -p "$dir/bin"
for tool in bowtie bowtie-align-s bowtie-build bowtie-build-s bowtie2 bowtie2-align-s bowtie2-build bowtie2-build-s \
    bwa minimap2; do
  cp "$dir/root/usr/bin/$tool" "$dir/bin/"
done
for tool in yara_mapper yara_indexer razers3 mason_simulator; do cp "$dir/root/usr/lib/seqan/bin/$tool" "$dir/bin/"; done
cp "$dir/root/usr/share/doc/bowtie/examples/genomes/NC_008253.fna.gz" "$dir/ecoli.fna.gz"
rm -rf "$dir/deb" "$dir/root"
mkdir -p "$dir/shared-bench"
cp ../shared/bench/*.py "$dir/shared-bench/"
du -sh "$dir"
