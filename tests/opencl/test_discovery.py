"""dmap.opencl.discovery: which devices there are, and the share of the CPU that PoCL's takes."""

import os
import subprocess
import sys
import tempfile

from helpers import cpu_quota_group, dmap_cmd, pinnable, pinned_run, sam_body, write_fasta, write_fastq

from dmap.opencl import discovery

# A device made by hand, as a `dask worker --preload dmap.cluster.worker` makes its own.
UNITS = "from dmap.opencl.device import Device\nprint(Device().device.max_compute_units)"


@pinnable
def test_pocl_keeps_to_the_cores_this_process_may_run_on():
    """A worker started inside a SLURM job (or under taskset) runs PoCL's kernels on its cores,
    not one thread per core of the node; a thread count the user set is kept."""
    assert pinned_run(UNITS, "0") == "1"
    assert pinned_run(UNITS) == str(len(os.sched_getaffinity(0)))
    assert pinned_run(f"import os\nos.environ['POCL_MAX_PTHREAD_COUNT'] = '2'\n{UNITS}", "0") == "2"


def test_pocl_keeps_to_the_cpu_quota_of_the_process():
    """Kubernetes' CPU limits and ``docker --cpus`` give a quota of CPU time on every core of
    the node, not fewer cores: under a quota of 1 CPU, PoCL runs its kernels on one thread,
    not one per core, each throttled for most of every period."""
    with cpu_quota_group(1) as enter:
        env = {k: v for k, v in os.environ.items() if k not in ("POCL_MAX_PTHREAD_COUNT", "POCL_CPU_MAX_CU_NUM")}
        units = subprocess.run([sys.executable, "-c", UNITS], capture_output=True, text=True, env=env, check=True,
                               timeout=120, preexec_fn=enter).stdout.strip()
    assert units == "1"


def test_a_cache_folder_in_the_temporary_directory_where_home_has_none(tmp_path, monkeypatch):
    """Where the user's cache folder cannot be made (a home that compute nodes mount read-only;
    here HOME is a file), XDG_CACHE_HOME names one in the temporary directory; a usable one is
    kept as it is."""
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert discovery.usable_cache_home() is None and "XDG_CACHE_HOME" not in os.environ
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("HOME", str(tmp_path / "file"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    folder = str(tmp_path / "tmp" / f"dmap-cache-{os.getuid()}")
    assert discovery.usable_cache_home() == folder == os.environ["XDG_CACHE_HOME"]


def test_a_run_where_home_has_no_cache_folder(tmp_path):
    """PoCL lists no device when it cannot make its cache folder, and pyopencl fails the first
    kernel launch when it cannot make its own: `dmap devices` said "no OpenCL platform is
    installed", and `dmap run` lost its cluster to a FileNotFoundError. Both work, and map as
    with a usable home."""
    write_fasta(tmp_path / "ref.fa", [("c1", "ACGTTGCATGCAAGTCCGATGACTGACTAGCTAGC" * 5)])
    write_fastq(tmp_path / "r.fq", ["GCATGCAAG", "TTTTTTTT", "CTAGCTAGCACGTTG"])
    assert dmap_cmd("index", tmp_path / "ref.fa", "-o", tmp_path / "idx", "-q").returncode == 0
    usual = dmap_cmd("run", tmp_path / "idx", tmp_path / "r.fq")
    (tmp_path / "file").write_text("")
    (tmp_path / "tmp").mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", "POCL_CACHE_DIR")}
    env.update(HOME=str(tmp_path / "file"), TMPDIR=str(tmp_path / "tmp"))
    # dmap's kernel binaries from where the other tests keep them: no kernel is compiled again
    env["DMAP_KERNEL_CACHE"] = os.path.join(discovery.user_cache_home(), "dmap", "kernels")
    devices = subprocess.run([sys.executable, "-m", "dmap", "devices"], capture_output=True, text=True, env=env,
                             timeout=120)
    assert devices.returncode == 0 and devices.stdout.startswith("0:0\t"), devices.stderr
    run = subprocess.run([sys.executable, "-m", "dmap", "run", tmp_path / "idx", tmp_path / "r.fq"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    assert sam_body(run.stdout) == sam_body(usual.stdout)
    cache = tmp_path / "tmp" / f"dmap-cache-{os.getuid()}"
    assert {"pocl", "pytools"} <= set(os.listdir(cache))


def test_a_device_named_on_a_host_without_opencl_is_one_clear_error(tmp_path):
    """A worker given ``--dmap-device 0:0`` where no OpenCL platform is installed: the ICD
    loader's error becomes dmap's own, which says what to install (not pyopencl's LogicError)."""
    env = dict(os.environ, OCL_ICD_VENDORS=str(tmp_path / "no-vendors"), OCL_ICD_FILENAMES="")
    code = ("from dmap.errors import DeviceError\nfrom dmap.opencl.device import Device\n"
            "try:\n    Device('0:0')\nexcept DeviceError as e:\n    print(e, e.__context__)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0 and "no OpenCL device found" in run.stdout, run.stderr
    assert run.stdout.rstrip().endswith(" None")  # no pyopencl error as its context: it pickles
