"""dmap.progress: what a long run writes on standard error, on a terminal and into a log file."""

import gzip
import io

from dmap.progress import Progress, input_size


def test_a_log_gets_plain_lines_with_the_time_left():
    log = io.StringIO()
    p = Progress("reads", "mapped", total_bytes=1000, stream=log, interval=0)
    p.start -= 10  # ten seconds in
    p.update(400, bytes_done=250)
    line = log.getvalue()
    assert line.endswith("\n") and "\r" not in line
    assert line.startswith("dmap: 400 reads mapped in 10.0 s (40 reads/s); 25% of the input, about 30 s left")


def test_no_share_without_a_size_and_nothing_between_intervals():
    log = io.StringIO()
    p = Progress("symbols", "indexed", stream=log, interval=3600)
    p.update(5)
    assert log.getvalue() == ""
    assert "%" not in p.line() and "5 symbols indexed" in p.line()


def test_input_size(tmp_path):
    (tmp_path / "r.fq").write_bytes(b"@r\nA\n+\nI\n")
    (tmp_path / "r.fq.gz").write_bytes(gzip.compress(b"@r\nA\n+\nI\n"))
    assert input_size([str(tmp_path / "r.fq")]) == 9
    assert input_size([str(tmp_path / "r.fq")] * 2) == 18  # several files map as one run
    assert input_size([str(tmp_path / "r.fq.gz")]) is None and input_size(["-"]) is None
    assert input_size([str(tmp_path / "r.fq"), str(tmp_path / "missing")]) is None
