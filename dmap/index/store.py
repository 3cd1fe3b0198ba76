"""The on-disk index: a Zarr group with one subgroup per reference block.

Layout (format version 5)::

    INDEX/                      zarr group, attribute "dmap" holds IndexMeta
      reference                 uint8 codes of all contigs joined by separators (uncompressed)
      contigs/names             uint8: the contigs' names, each followed by a newline (format 5;
      contigs/lengths           int64:   before, a list in the metadata)
      contigs/offsets           int64: each contig's first position in ``reference``
      blocks/<b>/occ            uint32 occurrence table (see index/occ.py)
      blocks/<b>/C              uint32[sigma+1]: first BWT row of each symbol
      blocks/<b>/sa_samples     uint32: SA value of every S-th BWT row
      blocks/<b>/boundary_rows  uint32: rows whose preceding text symbol is a
      blocks/<b>/boundary_pos   uint32:   separator/sentinel, with their SA value
      blocks/<b>/reverse/occ    uint32 occurrence table and C array of the
      blocks/<b>/reverse/C        reversed block text (format 4; seeds with edits)
      blocks/<b>/neighborhood/* optional (format 3, ``dmap index --neighborhood``):
                                MAROSE's neighborhood index (see neighborhood/build.py)

Every array's checksum is stored in the metadata and checked when it is read;
so is the checksum of each block's slice of ``reference`` ("blocks/<b>/text"),
which approximate mapping reads block by block.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING

import numpy as np

from ..alphabet import Alphabet
from ..errors import IndexFormatError
from ..format import bgzf
from ..io.splits import is_url
from . import zarr_direct
from .occ import OccShape

if TYPE_CHECKING:
    from ..neighborhood.params import NeighborhoodParams

FORMAT_NAME = "dmap-fm-index"
# 2: per-block text checksums; 3: optional neighborhood index; 4: reverse-text occ; 5: contigs as arrays
FORMAT_VERSION = 5
# Older versions are version 4 without the optional parts: no neighborhoods
# (2) and no reverse-text occ (2, 3), so no seeds with edits.
READABLE_VERSIONS = (2, 3, 4, 5)
BLOCK_ARRAYS = ("occ", "C", "sa_samples", "boundary_rows", "boundary_pos")
# L, the longest query an index takes: blocks overlap by L-1 symbols.
DEFAULT_MAX_QUERY_LENGTH = 512
MAX_QUERY_LENGTH = 65535


# CRC-32, as gzip and BAM use to detect damaged data, runs at 3.9 GB/s here
# with zlib (22 GB/s with ISA-L's, which it uses where installed) against
# blake2b's 0.74 GB/s: verifying a 3.1 Gbp index's 12.7 GB took 17 s of its
# load time with blake2b (docs/performance.md).  Older indexes hold blake2b
# checksums; the prefix says which to verify.
CHECKSUM = "crc32"
_DIGESTS = {
    "crc32": lambda data: f"{bgzf.crc32(data):08x}",
    "blake2b": lambda data: hashlib.blake2b(data, digest_size=16).hexdigest(),
}


def checksum(a: np.ndarray, algorithm: str = CHECKSUM) -> str:
    """Checksum of an array's bytes (dtype and shape are checked separately), as ``"<algorithm>:<hex>"``."""
    return f"{algorithm}:{_DIGESTS[algorithm](np.ascontiguousarray(a).data)}"


def checksum_matches(a: np.ndarray, expected: str) -> bool:
    """Whether ``a`` has the checksum ``expected``, in the algorithm that ``expected`` names."""
    algorithm = expected.partition(":")[0]
    return algorithm in _DIGESTS and checksum(a, algorithm) == expected


@dataclass
class Contig:
    name: str
    length: int
    offset: int  # first position in the joined reference


class Contigs:
    """The reference's contigs as columns: names, lengths and first positions in the joined
    reference, stored as the index's ``contigs/*`` arrays.

    A transcriptome or a draft assembly has hundreds of thousands of contigs, a
    metagenome's assembly millions: made one object each, 200,000 contigs took 0.32 s
    every time an index was opened, where bowtie maps 48,000 reads to them in 0.38 s, and
    a million listed in the metadata made it 108 MB of JSON, 0.47 s to parse.  Iterating
    gives :class:`Contig` objects, for the few places that want them one by one.
    """

    __slots__ = ("names", "lengths", "offsets")

    def __init__(self, names: list[str], lengths: Iterable[int], offsets: Iterable[int]):
        self.names = names
        self.lengths = np.asarray(lengths, dtype=np.int64)
        self.offsets = np.asarray(offsets, dtype=np.int64)
        # Shared by the client and the workers in its process (open_index): read only.
        self.lengths.flags.writeable = self.offsets.flags.writeable = False

    @classmethod
    def of(cls, contigs: list[Contig]) -> Contigs:
        """The columns of ``contigs``."""
        return cls([c.name for c in contigs], [c.length for c in contigs], [c.offset for c in contigs])

    @classmethod
    def from_json(cls, items: list[dict]) -> Contigs:
        """The columns of the metadata's list of ``{"name", "length", "offset"}`` objects."""
        n = len(items)
        return cls([c["name"] for c in items], np.fromiter((c["length"] for c in items), np.int64, n),
                   np.fromiter((c["offset"] for c in items), np.int64, n))

    @classmethod
    def from_arrays(cls, names: np.ndarray, lengths: np.ndarray, offsets: np.ndarray) -> Contigs:
        """The columns of the index's ``contigs/*`` arrays (:meth:`arrays`)."""
        return cls(names.tobytes().decode("utf-8", "surrogateescape").split("\n")[:-1], lengths, offsets)

    def arrays(self) -> dict[str, np.ndarray]:
        """The index's ``contigs/*`` arrays: names each followed by a newline (a name is a
        FASTA header's first word), lengths and offsets."""
        names = "".join(f"{name}\n" for name in self.names).encode("utf-8", "surrogateescape")
        return {"names": np.frombuffer(names, dtype=np.uint8), "lengths": self.lengths, "offsets": self.offsets}

    def __len__(self) -> int:
        return len(self.names)

    def __iter__(self) -> Iterator[Contig]:
        return map(Contig, self.names, self.lengths.tolist(), self.offsets.tolist())

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Contigs) and self.names == other.names
                and np.array_equal(self.lengths, other.lengths) and np.array_equal(self.offsets, other.offsets))


@dataclass
class Block:
    start: int  # first position in the joined reference
    length: int  # symbols in this block (own region + overlap)
    n_rows: int  # BWT rows = length + 1


@dataclass
class IndexMeta:
    """Everything a reader needs to interpret the arrays."""

    alphabet: dict
    contigs: Contigs
    text_length: int
    max_query_length: int
    block_length: int
    occ_layout: str
    occ_sample_rate: int
    sa_sample_rate: int
    blocks: list[Block]
    checksums: dict[str, str] = field(default_factory=dict)
    neighborhood: dict | None = None  # NeighborhoodParams, when the index has one
    reverse_index: bool = False  # blocks/<b>/reverse: occ and C of the reversed text
    format: str = FORMAT_NAME
    format_version: int = FORMAT_VERSION
    created_by: str = ""

    def to_json(self) -> dict:
        """The metadata as plain JSON values, as the index's ``zarr.json`` holds them: all but the
        contigs, which are arrays of their own (:meth:`Contigs.arrays`)."""
        d = asdict(dataclasses.replace(self, contigs=Contigs([], [], [])))
        del d["contigs"]
        return d

    @classmethod
    def from_json(cls, d: dict) -> IndexMeta:
        """The metadata from :meth:`to_json`'s values, with the contigs listed there by format
        versions up to 4; from version 5, no contigs until :class:`Index` reads their arrays."""
        d = dict(d)
        d["contigs"] = Contigs.from_json(d["contigs"]) if "contigs" in d else Contigs([], [], [])
        d["blocks"] = [Block(**b) for b in d["blocks"]]
        return cls(**d)


@dataclass
class BlockArrays:
    """One block's FM-index in host memory."""

    number: int
    start: int
    own_length: int  # hits starting at local positions < own_length belong here
    occ: np.ndarray
    C: np.ndarray
    sa_samples: np.ndarray
    boundary_rows: np.ndarray
    boundary_pos: np.ndarray
    shape: OccShape
    sa_sample_rate: int

    @property
    def nbytes(self) -> int:
        """Bytes of the block's arrays in host memory."""
        return sum(getattr(self, name).nbytes for name in BLOCK_ARRAYS)

    @classmethod
    def from_arrays(
        cls, arrays: dict, text_length: int, *, layout: str, sigma: int, rate: int, sa_sample_rate: int
    ) -> BlockArrays:
        """A single block straight from :func:`dmap.index.build.index_block` (no Zarr, no overlap)."""
        shape = OccShape(layout, sigma, rate, text_length + 1)
        return cls(0, 0, text_length, shape=shape, sa_sample_rate=sa_sample_rate, **arrays)


class Index:
    """A dmap index opened for reading.

    Parameters
    ----------
    path
        Directory written by :func:`dmap.build_index`, or its URL (``s3://...``: this host's copy,
        :mod:`dmap.index.fetch`).  :attr:`source` is what was given, :attr:`path` the directory.

    Raises
    ------
    IndexFormatError
        If the path is missing, not a dmap index, or of another format version.
    """

    def __init__(self, path: str | os.PathLike):
        path = os.fspath(path)
        self.source = path if is_url(path) else os.path.abspath(path)  # what the workers are given
        self.path = local_index_path(path)
        if os.path.isfile(self.path):
            raise IndexFormatError(f"index {self.path!r} is a file, not a dmap index (a directory); build an index "
                                   f"of a FASTA file with 'dmap index REFERENCE -o INDEX'")
        if not os.path.isdir(self.path):
            raise IndexFormatError(f"index {self.path!r} does not exist; build it with 'dmap index REFERENCE -o INDEX'")
        attributes = zarr_direct.group_attributes(self.path)
        try:
            raw = (attributes if attributes is not None else self._group.attrs).get("dmap")
        except Exception as e:  # zarr raises many kinds for a non-zarr folder
            raise IndexFormatError(f"index {self.path!r} is not a dmap index, or is damaged (Zarr: {e}); build an "
                                   f"index with 'dmap index REFERENCE -o INDEX'") from None
        if not isinstance(raw, dict) or raw.get("format") != FORMAT_NAME:
            raise IndexFormatError(f"index {self.path!r} is not a dmap index (a Zarr group without dmap's metadata); "
                                   f"build an index with 'dmap index REFERENCE -o INDEX'")
        if raw.get("format_version") not in READABLE_VERSIONS:
            raise IndexFormatError(
                f"index {self.path!r} has format version {raw.get('format_version')}, this dmap reads version "
                f"{FORMAT_VERSION}; rebuild the index with this dmap"
            )
        try:
            self.meta = IndexMeta.from_json(raw)
        except (TypeError, KeyError, ValueError) as e:
            raise IndexFormatError(f"index {self.path!r} has damaged metadata: {e}") from None
        if "contigs" not in raw:  # format 5: arrays of their own
            self.meta.contigs = Contigs.from_arrays(*(self.read_array(f"contigs/{name}")
                                                      for name in ("names", "lengths", "offsets")))
        self.alphabet = Alphabet.from_metadata(self.meta.alphabet)
        # Identifies this index's content for device-side caches: the digest of its metadata
        # file, which holds every array's checksum (re-encoding the metadata to hash it took
        # 0.1 s for 200,000 contigs).
        self.uid = (index_identity(self.path) if attributes is not None else
                    hashlib.blake2b(json.dumps(raw, sort_keys=True).encode(), digest_size=8).hexdigest())

    @cached_property
    def _group(self):
        """The index as a ``zarr.Group``, for what :mod:`.zarr_direct` does not read
        (mapping reads without it: importing zarr takes 0.1 s)."""
        import zarr

        return zarr.open_group(self.path, mode="r")

    @property
    def n_blocks(self) -> int:
        """Index blocks, each overlapping the next by L-1 symbols."""
        return len(self.meta.blocks)

    def own_length(self, number: int) -> int:
        """Block ``number``'s own positions ``[0, own_length)``: the rest of its text is the
        overlap of L-1 symbols with the next block, whose hits that block reports."""
        return self.meta.blocks[number].length if number == self.n_blocks - 1 else self.meta.block_length

    @property
    def neighborhood_params(self) -> NeighborhoodParams | None:
        """The :class:`dmap.neighborhood.params.NeighborhoodParams` of the index, or None."""
        from ..neighborhood.params import HASH_FUNCTION, NeighborhoodParams

        if self.meta.neighborhood is None:
            return None
        params = NeighborhoodParams.from_json(self.meta.neighborhood)
        if params.hash_function != HASH_FUNCTION:
            raise IndexFormatError(f"index {self.path!r} has a neighborhood index hashed with "
                                   f"{params.hash_function!r}, this dmap uses {HASH_FUNCTION!r}; rebuild the index")
        return params

    def load_neighborhood(self, number: int) -> dict[str, np.ndarray]:
        """Block ``number``'s neighborhood index arrays (checksums verified)."""
        from ..neighborhood.build import ARRAYS

        if self.meta.neighborhood is None:
            raise IndexFormatError(f"index {self.path!r} has no neighborhood index; rebuild it with "
                                   "'dmap index REFERENCE -o INDEX --neighborhood'")
        return {name: self.read_array(f"blocks/{number}/neighborhood/{name}") for name in ARRAYS}

    def load_reverse(self, number: int) -> dict[str, np.ndarray]:
        """Block ``number``'s reversed-text ``occ`` and ``C`` (checksums verified)."""
        if not self.meta.reverse_index:
            raise IndexFormatError(f"index {self.path!r} (format version {self.meta.format_version}) has no "
                                   "reverse-text index, which seeds with edits need; rebuild it with this dmap")
        return {name: self.read_array(f"blocks/{number}/reverse/{name}") for name in ("occ", "C")}

    def read_array(self, name: str, part: slice = slice(None), checksum_name: str | None = None) -> np.ndarray:
        """Read one array (or ``part`` of it) and verify its checksum (stored under ``checksum_name``)."""
        try:
            data = zarr_direct.read(os.path.join(self.path, name), part)
            if data is None:
                data = self._group[name][part]
        except Exception as e:
            raise IndexFormatError(
                f"index {self.path!r} is damaged: cannot read {name} ({type(e).__name__}: {e})"
            ) from None
        name = checksum_name or name
        expected = self.meta.checksums.get(name)
        if expected is None:
            raise IndexFormatError(f"index {self.path!r} has no checksum for {name}; rebuild it")
        if not checksum_matches(data, expected):
            raise IndexFormatError(f"index {self.path!r} is damaged: checksum of {name} does not match; rebuild it")
        return data

    def load_block(self, number: int) -> BlockArrays:
        """Read block ``number`` (checksums verified) into host memory."""
        b = self.meta.blocks[number]
        arrays = {name: self.read_array(f"blocks/{number}/{name}") for name in BLOCK_ARRAYS}
        shape = OccShape(self.meta.occ_layout, self.alphabet.sigma, self.meta.occ_sample_rate, b.n_rows)
        return BlockArrays(
            number=number,
            start=b.start,
            own_length=self.own_length(number),
            shape=shape,
            sa_sample_rate=self.meta.sa_sample_rate,
            **arrays,
        )

    def block_nbytes(self, number: int) -> int:
        """Bytes a block occupies on a device."""
        def nbytes(name: str) -> int:
            info = zarr_direct.array_info(os.path.join(self.path, name))
            return info.nbytes if info is not None else int(self._group[name].nbytes)

        return sum(nbytes(f"blocks/{number}/{name}") for name in BLOCK_ARRAYS)

    def reference(self) -> np.ndarray:
        """The joined reference as codes (checksum verified)."""
        return self.read_array("reference")

    def block_text(self, number: int) -> np.ndarray:
        """Block ``number``'s text (codes, overlap included; checksum verified)."""
        b = self.meta.blocks[number]
        return self.read_array("reference", slice(b.start, b.start + b.length), f"blocks/{number}/text")

    def describe(self) -> str:
        """Human-readable summary, as printed by ``dmap index info``."""
        m = self.meta
        lines = [
            f"index          {self.path}" + (f" (this host's copy of {self.source})" if self.source != self.path
                                                 else ""),
            f"format         {m.format} version {m.format_version} ({m.created_by})",
            f"alphabet       {m.alphabet['name']} ({self.alphabet.sigma} symbols: {m.alphabet['symbols']})",
            f"reference      {m.text_length} symbols in {len(m.contigs)} contigs",
            f"max query len  {m.max_query_length} (blocks overlap by {m.max_query_length - 1})",
            f"block length   {m.block_length} ({len(m.blocks)} blocks)",
            f"occ            {m.occ_layout} layout, sample rate {m.occ_sample_rate} "
            f"(counts every {32 * m.occ_sample_rate} rows)",
            f"SA sampling    every {m.sa_sample_rate} rows",
            "contigs:",
        ]
        lines += [f"  {c.name}\tlength {c.length}\toffset {c.offset}" for _, c in zip(range(50), m.contigs)]
        if len(m.contigs) > 50:
            lines.append(f"  ... {len(m.contigs) - 50} more")
        lines.append("blocks:")
        lines += [f"  {i}\tstart {b.start}\tlength {b.length}" for i, b in enumerate(m.blocks)]
        if m.neighborhood is not None:
            nb = m.neighborhood
            arrays = [self._group[f"blocks/{b}/neighborhood"] for b in range(self.n_blocks)]
            nbytes = sum(int(g[a].nbytes) for g in arrays for a in g.array_keys())
            # An offset-only index (the paper's baseline) holds a seed table and one 32-bit position per window.
            offsets = sum(int(g["seed_vertex"].nbytes) + int(g["positions"].nbytes) for g in arrays)
            lines.append(f"neighborhood   seed {nb['mask']}, neighborhood length {nb['neighborhood_length']}, "
                         f"{nb['max_errors']} substitution(s) by default; perfect hash {nbytes / 2**20:.1f} MiB, "
                         f"{nbytes / offsets:.2f}x an offset-only index")
        algorithms = sorted({c.partition(":")[0] for c in m.checksums.values()})
        lines.append(f"checksums      {len(m.checksums)} arrays ({', '.join(algorithms)})")
        return "\n".join(lines)


# Up to this many contigs a comparison per contig start beats a binary search: whole-array
# passes without branches (4 contigs, 533,000 positions: 0.9 against 4.8 ms).
LINEAR_CONTIGS = 8


def contig_of(positions: np.ndarray, contig_offsets: np.ndarray) -> np.ndarray:
    """The contig (int64) holding each position of the joined reference, given the
    contigs' first positions there (``Index.meta.contigs.offsets``, ascending from 0)."""
    if contig_offsets.size <= LINEAR_CONTIGS:
        contig = np.zeros(np.shape(positions), dtype=np.int64)
        for first in contig_offsets[1:]:
            contig += positions >= first
        return contig
    return np.searchsorted(contig_offsets, positions, side="right") - 1


def is_index(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a directory holding a dmap index (its ``zarr.json`` says so)."""
    try:
        attributes = zarr_direct.group_attributes(os.fspath(path))
    except (OSError, ValueError):
        return False
    return isinstance(attributes, dict) and isinstance(attributes.get("dmap"), dict) \
        and attributes["dmap"].get("format") == FORMAT_NAME


def index_identity(path: str) -> str:
    """A digest of the index's metadata (``zarr.json``: reference, contigs, blocks, build): where
    two hosts see different indexes at one path (node-local copies of different builds), the
    digests differ.  Computed once per process while the file stays the same (:func:`_stamp`:
    the metadata of a million contigs is 108 MB).  Raises OSError where the index cannot be read."""
    return _identity(path, _stamp(path))


@lru_cache(maxsize=8)
def _identity(path: str, stamp: tuple[int, int, int]) -> str:
    with open(os.path.join(path, "zarr.json"), "rb") as f:
        return hashlib.sha1(f.read()).hexdigest()[:12]


def _stamp(path: str) -> tuple[int, int, int]:
    """What tells one metadata file at ``path`` from another: its inode (dmap and zarr write it
    anew and rename it into place), size and time (which the OS kernel keeps in ticks of a
    few milliseconds).  Raises OSError where it cannot be read."""
    st = os.stat(os.path.join(path, "zarr.json"))
    return st.st_ino, st.st_size, st.st_mtime_ns


def unseen_index_error(path: str, worker: str, reason: str) -> IndexFormatError:
    """The error for a worker (``worker``: e.g. "the worker on host 'node2'") that cannot read the
    index the client opened at ``path``."""
    if is_url(path):  # the reason names the URL again: it need not be said twice
        return IndexFormatError(f"the worker {worker.removeprefix('the worker ')} cannot read the index: {reason}; "
                                "each worker's host fetches its own copy of an index at a URL")
    return IndexFormatError(f"index {path!r} cannot be read by {worker}: {reason}; the workers load the index "
                            "themselves: give a path every worker sees (a shared file system)")


@lru_cache(maxsize=8)
def _opened(source: str, stamp: tuple[int, int, int]) -> Index:
    return Index(source)


def refuse_url(path: str) -> None:
    """One clear line for an index to be written at a URL (``s3://...``): dmap builds an index on
    a file system; one copied to a URL then maps from there (:mod:`dmap.index.fetch`).  Without
    this a URL reads as a relative path (``s3:/bucket/...``)."""
    if is_url(path):
        raise IndexFormatError(f"index {path!r} is a URL; dmap writes an index on a file system: build it there "
                               "and copy it to the URL, from which dmap run maps it")


# Per process, the local copy of each index given as a URL (local_index_path).
_local_copies: dict[str, str] = {}


def local_index_path(path: str, refresh: bool = False) -> str:
    """The directory of the index ``path``: itself (made absolute), or for a URL this host's copy
    of the index there (:func:`dmap.index.fetch.fetched_index`), looked up once per process, or
    again with ``refresh`` (once per run: the URL may hold a new build)."""
    if not is_url(path):
        return os.path.abspath(path)
    if refresh or path not in _local_copies:
        from .fetch import fetched_index

        _local_copies[path] = fetched_index(path)
    return _local_copies[path]


def open_index(path: str | os.PathLike, refresh: bool = False) -> Index:
    """Open a dmap index for reading (see :class:`Index`): once per process while its metadata
    file stays the same, so that the client and the workers in its process share one (an
    index of 200,000 contigs takes 0.1 s to open).  A URL's index is this host's copy
    (:func:`local_index_path`; ``refresh``: fetched anew if the URL holds a new build)."""
    if isinstance(path, Index):
        return path
    source = os.fspath(path)
    local = local_index_path(source, refresh)
    try:
        stamp = _stamp(local)
    except OSError:
        return Index(local)  # which says what is wrong with the path
    return _opened(source if is_url(source) else local, stamp)
