#!/usr/bin/env bash
# Install dmap and what it needs on a fresh Debian/Ubuntu machine.
#   scripts/install.sh          dmap + an OpenCL CPU driver (PoCL)
#   scripts/install.sh test     also the test extras and the tools tests compare with
set -euo pipefail
cd "$(dirname "$0")/.."

apt_pkgs=()
# Debian's PoCL measured about 2x faster than the pocl-binary-distribution wheel; prefer it.
if ! ls /etc/OpenCL/vendors/*.icd >/dev/null 2>&1; then apt_pkgs+=(pocl-opencl-icd ocl-icd-libopencl1); fi
if [[ "${1:-}" == test ]]; then
  for tool in samtools bowtie; do command -v "$tool" >/dev/null || apt_pkgs+=("$tool"); done
  [[ -f /usr/share/doc/bowtie/examples/genomes/NC_008253.fna.gz ]] || apt_pkgs+=(bowtie-examples)
  command -v chromium >/dev/null || apt_pkgs+=(chromium)  # the dashboard test's headless browser
  command -v fincore >/dev/null || apt_pkgs+=(util-linux-extra)  # page-cache residency in tests/format/test_sam.py
  command -v PicardCommandLine >/dev/null || apt_pkgs+=(picard-tools)  # ValidateSamFile in tests/test_cli.py
fi
sudo=""; [[ $(id -u) == 0 ]] || sudo="sudo -n"
if ((${#apt_pkgs[@]})); then
  if command -v apt-get >/dev/null && { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${apt_pkgs[@]}" >/dev/null; }; then
    echo "installed: ${apt_pkgs[*]}"
  else
    echo "could not apt-get install ${apt_pkgs[*]}; falling back to the PoCL wheel for OpenCL" >&2
    python3 -m pip install -q "pocl-binary-distribution>=3.0"
  fi
fi
# An ssh server, for the test of workers started on another host (tests/cluster/test_two_hosts.py),
# which is skipped without it: on its own, so that its failing changes nothing else.
if [[ "${1:-}" == test && ! -x /usr/sbin/sshd ]] && command -v apt-get >/dev/null; then
  { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq openssh-server >/dev/null; } \
    2>/dev/null && echo "installed: openssh-server" || echo "could not apt-get install openssh-server" >&2
fi
# A one-node SLURM, for the tests of batch jobs and dask-jobqueue workers (tests/cluster/test_slurm.py),
# which are skipped without it: on its own, as the ssh server.
if [[ "${1:-}" == test && ! -x /usr/sbin/slurmd ]] && command -v apt-get >/dev/null; then
  { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq slurmctld slurmd slurm-client \
      >/dev/null; } 2>/dev/null && echo "installed: slurmctld slurmd slurm-client" \
    || echo "could not apt-get install slurmctld slurmd slurm-client" >&2
fi
extras=""; [[ "${1:-}" == test ]] && extras="[test]"
python3 -m pip install -q --disable-pip-version-check -e ".${extras}"
