"""Ctrl-C during a folder's closing writes waits until they are done (toolkit.signals): CI once caught a tune
interrupted between a run's summary.json and its SHA256SUMS, an archive that said it was finalized and did not
verify. Here the signal is sent at exactly that point."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import toolkit.results.archive as archive
from tests.synthetic import make_records, manifest_for, summarize
from toolkit.results.archive import ArchiveWriter
from toolkit.results.verify import errors, verify_run
from toolkit.signals import catch, restore, signals_held

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def pristine_handlers():
    """Python's own SIGINT and SIGTERM handlers for each test, whatever ran before in this process (a launcher
    started in-process installs the toolkit's stop-everything handler for good: toolkit/serve/base.py); put back
    after. The tests compare against what was there before, so that must be known."""
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    for s, h in before.items():
        signal.signal(s, h)


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


IGNORED_ON_ENTRY = """
import os, signal, threading
from toolkit.bench.matrix import _install_interrupts
from toolkit.serve import base
from toolkit.signals import signals_held

base._install_handlers()                            # a launcher's cleanup on SIGINT/SIGTERM
previous = _install_interrupts(threading.Event())   # a matrix run's stopping flag
print(sorted(map(int, previous)), signal.getsignal(signal.SIGINT) is signal.SIG_IGN, sorted(map(int, base._PREVIOUS)))
with signals_held():
    os.kill(os.getpid(), signal.SIGINT)
os.kill(os.getpid(), signal.SIGINT)
print("went on", signal.getsignal(signal.SIGINT) is signal.SIG_IGN)
"""


def test_a_signal_ignored_on_entry_stays_ignored():
    """`cmd &` in a script, or nohup, starts the toolkit with SIGINT ignored: its handlers leave it so (a stray
    Ctrl-C does not stop a run meant to go on) and still take SIGTERM."""
    r = subprocess.run([sys.executable, "-c", IGNORED_ON_ENTRY], cwd=ROOT, capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                       preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == [f"[{signal.SIGTERM.value}] True [{signal.SIGTERM.value}]", "went on True"]


def test_catch_replaces_what_is_not_ignored_and_restore_puts_it_back():
    got: list[int] = []
    before = signal.getsignal(signal.SIGTERM)
    previous = catch((signal.SIGINT, signal.SIGTERM), lambda signum, frame: got.append(signum))
    try:
        assert previous == {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: before}
        os.kill(os.getpid(), signal.SIGINT)
        assert got == [signal.SIGINT]
    finally:
        restore(previous)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.getsignal(signal.SIGTERM) is before
