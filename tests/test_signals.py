"""Ctrl-C during a folder's closing writes waits until they are done (toolkit.signals): CI once caught a tune
interrupted between a run's summary.json and its SHA256SUMS, an archive that said it was finalized and did not
verify. Here the signal is sent at exactly that point."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

import toolkit.results.archive as archive
from tests.synthetic import make_records, manifest_for, summarize
from toolkit.results.archive import ArchiveWriter
from toolkit.results.verify import errors, verify_run
from toolkit.signals import signals_held


def test_a_signal_in_the_block_reaches_the_previous_handler_when_it_ends():
    got: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: got.append(signum))
    try:
        with signals_held():
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGTERM)
            assert got == []  # held
        assert got == [signal.SIGTERM]  # delivered once, to the handler that was there before
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGTERM, previous)
    with pytest.raises(KeyboardInterrupt):
        with signals_held():
            os.kill(os.getpid(), signal.SIGINT)
    with signals_held():  # nothing came: nothing is raised
        pass


def test_ctrl_c_between_summary_and_sums_leaves_a_run_that_verifies(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    w = ArchiveWriter.create(tmp_path, "m", manifest_for({"baseline": ["python", "-m", "sglang.launch_server"]}))
    recs = make_records(rng, arm="baseline", domain="chat", concurrency=1, repeat=0, n=4, output_len=16,
                        ttft_ms=40.0, itl_ms=4.0)
    w.write_cell(summarize(recs, output_len=16, workload_hash="w" * 64, sampling={"api": "chat"}), recs)
    real = archive.write_sums

    def interrupted_sums(root, *a, **kw):
        assert (root / "summary.json").exists()  # the point CI's Ctrl-C landed on
        os.kill(os.getpid(), signal.SIGINT)
        return real(root, *a, **kw)

    monkeypatch.setattr(archive, "write_sums", interrupted_sums)
    with pytest.raises(KeyboardInterrupt):
        w.finalize("complete", derived={"cells_planned": 1}, interrupted=False)
    assert (w.path / "SHA256SUMS").exists()
    assert errors(verify_run(w.path)) == []
