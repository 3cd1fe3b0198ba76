"""A run's reads files and their read groups, listed in one tab-separated file.

``dmap run INDEX --manifest lanes.tsv`` maps the files that a manifest lists,
one reads file (or pair of files) per line, each with its own read group, as
STAR's ``--readFilesManifest`` does.  It stands for comma-separated lists and
one ``-R`` per file, which a sample sequenced on many lanes (or a single-cell
run of thousands of files) would spell out on one command line::

    # first mates         second mates (- for none)   read group: ID, then any TAG:VALUE
    lane1_R1.fq.gz        lane1_R2.fq.gz              ID:lane1    SM:sample1    PL:ILLUMINA
    lane2_R1.fq.gz        lane2_R2.fq.gz              lane2

Columns are separated by tabs.  A read group given as one word without a
colon is its ID (``lane2`` is ``ID:lane2``); a leading ``@RG`` column is
allowed.  Either every line has a read group or none does; either every line
names second mates or none does.  Blank lines and lines starting with ``#``
are skipped.  Paths are taken as written, relative to the working directory,
as in an ``@FILE`` list (:func:`dmap.io.splits.reads_paths`).

From Python::

    m = dmap.read_manifest("lanes.tsv")
    dmap.map_reads(index, m.reads, m.mates, read_group=m.read_groups, sam_path="out.bam")
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import DmapError, InputFormatError
from ..format.sam import ReadGroup
from .splits import STDIN, check_path

NO_MATES = "-"


@dataclass
class Manifest:
    """What a manifest lists, as :func:`dmap.map_reads` takes it."""

    reads: list[str]
    mates: list[str] | None  # None: single-end (or interleaved) files
    read_groups: list[str] | None  # one @RG line per file (pair of files), or None


def read_manifest(path: str | os.PathLike) -> Manifest:
    """The reads files, mates' files and read groups that the manifest ``path`` lists (see the module).

    Read once, so that ``path`` may be a pipe (``--manifest <(...)``).  Every listed file is
    checked to exist before anything is mapped.

    Raises
    ------
    InputFormatError
        One line naming the manifest and its line: unreadable, empty, a line without a second
        column, single-end lines mixed with pairs, read groups on some lines only, or a
        malformed read group.
    """
    where = os.fspath(path)
    try:
        with open(where, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        raise InputFormatError(f"manifest {where!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputFormatError(f"manifest {where!r} cannot be read: {e}") from None
    rows = [(number, line.rstrip("\r").split("\t")) for number, line in enumerate(lines, 1)
            if line.strip() and not line.startswith("#")]
    if not rows:
        raise InputFormatError(f"manifest {where!r} lists no reads file")
    reads, mates, groups = [], [], []
    for number, cols in rows:
        at = f"manifest {where!r}, line {number}"
        cols = [c.strip() for c in cols]
        if len(cols) < 2 or not cols[0] or not cols[1]:
            raise InputFormatError(f"{at}: give the reads file and, after a tab, its mates' file or '{NO_MATES}'")
        if cols[0] == STDIN:
            raise InputFormatError(f"{at}: standard input ('-') is not a file a manifest can list")
        reads.append(cols[0])
        mates.append(cols[1])
        groups.append(_read_group(cols[2:], at))
    paired = [m != NO_MATES for m in mates]
    if any(paired) and not all(paired):
        number = rows[paired.index(not paired[0])][0]
        raise InputFormatError(f"manifest {where!r}, line {number}: single-end files and pairs of files in one "
                               "manifest; map them in two runs")
    given = [g is not None for g in groups]
    if any(given) and not all(given):
        number = rows[given.index(not given[0])][0]
        raise InputFormatError(f"manifest {where!r}, line {number}: a read group on some lines only; give one on "
                               "every line, or on none")
    for (number, _), read, mate in zip(rows, reads, mates, strict=True):
        for p in (read, mate) if paired[0] else (read,):
            try:
                check_path(p, "reads")
            except InputFormatError as e:
                raise InputFormatError(f"manifest {where!r}, line {number}: {e}") from None
    return Manifest(reads, mates if paired[0] else None, groups if given[0] else None)


def _read_group(cols: list[str], at: str) -> str | None:
    """The @RG line of a manifest line's read group columns (None where there are none)."""
    fields = [c for c in cols if c]
    if fields[:1] == ["@RG"]:
        fields = fields[1:]
    if not fields:
        return None
    if len(fields) == 1 and ":" not in fields[0]:
        fields = [f"ID:{fields[0]}"]
    line = "\t".join(["@RG", *fields])
    try:
        ReadGroup.parse(line)
    except DmapError as e:
        raise InputFormatError(f"{at}: {e}") from None
    return line
