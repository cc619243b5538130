"""toolkit.fsutil: the tail of a log another process may still be writing."""

from __future__ import annotations

from toolkit.fsutil import tail_lines


def test_tail_lines_reads_the_end_of_a_large_file_and_nothing_of_a_missing_one(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("".join(f"line {i}\n" for i in range(100_000)))  # ~1.2 MB: only its last 64 KiB is read
    assert tail_lines(log, 3) == "line 99997\nline 99998\nline 99999"
    assert len(tail_lines(log, 10_000).splitlines()) < 10_000  # what 64 KiB holds, not the whole file
    log.write_bytes(b"ok\n\xff broken utf-8\n")
    assert tail_lines(log, 5) == "ok\n\ufffd broken utf-8"
    assert tail_lines(tmp_path / "none.log", 5) == "" and tail_lines(None, 5) == ""
