"""Manifests: reads files, mates' files and read groups listed in one tab-separated file."""

import pytest

from dmap.errors import InputFormatError
from dmap.io.manifest import read_manifest


def _files(tmp_path, *names):
    for name in names:
        (tmp_path / name).write_text("@r\nACGT\n+\nIIII\n")
    return [str(tmp_path / name) for name in names]


def test_pairs_with_read_groups(tmp_path):
    a1, a2, b1, b2 = _files(tmp_path, "a_1.fq", "a_2.fq", "b_1.fq", "b_2.fq")
    (tmp_path / "m.tsv").write_text(
        "# first\tsecond\tread group\n"
        f"{a1}\t{a2}\tID:a\tSM:s\tPL:ILLUMINA\n"
        "\n"
        f"{b1}\t{b2}\t@RG\tID:b\tSM:s\r\n"  # a leading @RG column, and a CRLF line end
    )
    m = read_manifest(tmp_path / "m.tsv")
    assert m.reads == [a1, b1] and m.mates == [a2, b2]
    assert m.read_groups == ["@RG\tID:a\tSM:s\tPL:ILLUMINA", "@RG\tID:b\tSM:s"]


def test_single_end_files_and_a_bare_id(tmp_path):
    a, b = _files(tmp_path, "a.fq", "b.fq")
    (tmp_path / "m.tsv").write_text(f"{a}\t-\tlane1\n{b}\t-\tlane2\n")
    m = read_manifest(tmp_path / "m.tsv")
    assert m.reads == [a, b] and m.mates is None
    assert m.read_groups == ["@RG\tID:lane1", "@RG\tID:lane2"]


def test_no_read_groups(tmp_path):
    a, b = _files(tmp_path, "a.fq", "b.fq")
    (tmp_path / "m.tsv").write_text(f"{a}\t-\n{b}\t-\t\n")
    m = read_manifest(tmp_path / "m.tsv")
    assert m.reads == [a, b] and m.mates is None and m.read_groups is None


@pytest.mark.parametrize("text, words", [
    ("", ["lists no reads file"]),
    ("# only a comment\n\n", ["lists no reads file"]),
    ("{a}\n", ["line 1", "its mates' file or '-'"]),
    ("{a}\t-\tID:x\n{b}\t{a}\tID:y\n", ["line 2", "single-end files and pairs of files"]),
    ("{a}\t-\tID:x\n{b}\t-\n", ["line 2", "a read group on some lines only"]),
    ("{a}\t-\n{b}\t-\tID:y\n", ["line 2", "a read group on some lines only"]),
    ("{a}\t-\tSM:x\n", ["line 1", "no ID"]),
    ("{a}\t-\tID:x\tIDy\n", ["line 1", "TAG:VALUE"]),
    ("{a}\t-\tID:x\n{b}\t-\tID:x\tSM:other\n", []),  # two lines for one ID: read_groups refuses it later
    ("-\t-\n", ["line 1", "standard input"]),
    ("{a}\t-\n{missing}\t-\n", ["line 2", "missing.fq", "does not exist"]),
    ("{a}\t{missing}\n", ["line 1", "missing.fq", "does not exist"]),
])
def test_a_bad_manifest_is_one_clear_line(tmp_path, text, words):
    a, b = _files(tmp_path, "a.fq", "b.fq")
    (tmp_path / "m.tsv").write_text(text.format(a=a, b=b, missing=tmp_path / "missing.fq"))
    if not words:
        assert len(read_manifest(tmp_path / "m.tsv").read_groups) == 2
        return
    with pytest.raises(InputFormatError) as e:
        read_manifest(tmp_path / "m.tsv")
    assert "\n" not in str(e.value)
    for w in words:
        assert w in str(e.value)


def test_a_missing_manifest(tmp_path):
    with pytest.raises(InputFormatError, match="does not exist"):
        read_manifest(tmp_path / "none.tsv")
