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
    code = ("import sys, dmap.cli, dmap.mapping.pipeline, dmap.mapping.tasks, dmap.cluster.worker, dmap.opencl.device\n"
            "import dmap.index\n"
            f"idx = dmap.open_index({str(tmp_path / 'idx')!r})\n"
            "[(idx.load_block(b), idx.block_text(b), idx.block_nbytes(b)) for b in range(idx.n_blocks)]\n"
            "assert idx.n_blocks == 3 and idx.reference().size == 64\n"
            "assert not {'zarr', 'pydivsufsort', 'tqdm'} & set(sys.modules), sys.modules.keys()")
    subprocess.run([sys.executable, "-c", code], check=True)


def _relative_imports(path, module: str, modules: set[str], function_level: bool) -> set[str]:
    """The dmap modules ``module`` (at ``path``) imports, at module level or anywhere."""
    tree = ast.parse(path.read_text())
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = set()
    for node in (ast.walk(tree) if function_level else tree.body):
        if isinstance(node, ast.ImportFrom) and node.level:
            parts = package.split(".")
            target = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            for alias in node.names:
                found.add(f"{target}.{alias.name}" if f"{target}.{alias.name}" in modules else target)
    return {m for m in found if m in modules and m != module}


@pytest.mark.parametrize("function_level", [False, True])
def test_no_import_cycles(function_level):
    """Modules import downward only: no cycle among their imports, counting the
    imports inside functions (made late for start-up time) too; the package's
    lazy names and its TYPE_CHECKING block aside."""
    from pathlib import Path

    root = Path(dmap.__file__).parent
    paths = {".".join(("dmap", *p.relative_to(root).with_suffix("").parts)).removesuffix(".__init__"): p
             for p in root.rglob("*.py")}
    edges = {m: _relative_imports(p, m, set(paths), function_level) for m, p in paths.items() if m != "dmap"}
    state: dict[str, str] = {}

    def visit(m: str, trail: list[str]) -> None:
        state[m] = "open"
        for n in sorted(edges.get(m, ())):
            assert state.get(n) != "open", " -> ".join(trail + [m, n])
            if n not in state:
                visit(n, trail + [m])
        state[m] = "done"

    for m in sorted(edges):
        if m not in state:
            visit(m, [])


def test_code_identity_follows_the_code_not_its_path(tmp_path):
    """Two copies of dmap agree on their code identity wherever they are installed; a changed
    kernel or module changes it (what a client checks its workers against)."""
    import shutil

    from dmap._version import code_identity
    from dmap.opencl.device import kernel_dir

    package = tmp_path / "site" / "dmap"
    shutil.copytree(inspect.getfile(dmap).rsplit("/", 1)[0], package, ignore=shutil.ignore_patterns("__pycache__"))
    if not (package / "kernels").is_dir():
        shutil.copytree(kernel_dir(), package / "kernels")

    def identity():
        return subprocess.run([sys.executable, "-c", "from dmap._version import code_identity; print(code_identity())"],
                              env={"PYTHONPATH": str(tmp_path / "site")}, cwd=tmp_path, capture_output=True, text=True,
                              check=True).stdout.strip()

    assert identity() == code_identity()
    with open(package / "kernels" / "occ.cl", "a") as f:
        f.write("\n")
    changed = identity()
    assert changed != code_identity() and changed.split()[0] == code_identity().split()[0]
