"""The ``dmap`` package's public names, imported on first use."""

import ast
import inspect
import subprocess
import sys

import pytest

import dmap


def test_public_names_resolve():
    from dmap import map_reads  # a from-import goes through the module's __getattr__

    assert map_reads is dmap.map_reads
    assert set(dmap.__all__) <= set(dir(dmap))
    for name in dmap.__all__:
        assert getattr(dmap, name) is not None


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'no_such_thing'"):
        dmap.no_such_thing  # noqa: B018


def test_cli_and_index_commands_do_not_import_dask():
    # `dmap index`, `dmap index info` and `dmap --help` start without
    # distributed's 0.3-0.4 s of imports; mapping imports it on first use.
    code = ("import sys, dmap.cli, dmap.index; assert 'distributed' not in sys.modules; "
            "dmap.map_reads; assert 'distributed' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_type_checkers_see_the_same_names():
    # The `if TYPE_CHECKING:` imports and the lazy table must list the same names from the same modules.
    tree = ast.parse(inspect.getsource(dmap))
    block = next(node for node in tree.body
                 if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING")
    seen = {alias.name: "." * imp.level + imp.module for imp in block.body for alias in imp.names}
    assert seen == dmap._EXPORTS


def test_mapping_does_not_import_zarr_or_the_index_builder(tmp_path):
    # Mapping reads the index with dmap.index.zarr_direct: importing zarr
    # would add about 0.1 s to every run (docs/performance.md).
    (tmp_path / "ref.fa").write_text(">a\nACGTACGGTACCGATGCATGCAGTCAGTACGATCGATCAGCTAGC\n>b\nGGATCCATTAGCNNACGT\n")
    dmap.build_index(tmp_path / "ref.fa", tmp_path / "idx", max_query_length=10, block_length=30)
    code = ("import sys, dmap.cli, dmap.pipeline, dmap.tasks, dmap.worker, dmap.device, dmap.index\n"
            f"idx = dmap.open_index({str(tmp_path / 'idx')!r})\n"
            "[(idx.load_block(b), idx.block_text(b), idx.block_nbytes(b)) for b in range(idx.n_blocks)]\n"
            "assert idx.n_blocks == 3 and idx.reference().size == 64\n"
            "assert not {'zarr', 'pydivsufsort', 'tqdm'} & set(sys.modules), sys.modules.keys()")
    subprocess.run([sys.executable, "-c", code], check=True)
