"""Helpers the test areas share (fixtures that start parts live in tests/conftest.py):

    served(app)                   an aiohttp app served from a thread of its own; yields its base URL
    write_matrix(tmp, body)       env.yaml (the tiny embedded-engine environment, TINY_ENV) and a Matrix on it
    mock_server(tmp)              guidellm's mock server through the toolkit's own ProcessLauncher
    BusyHost()                    `with BusyHost() as host:`, then `host.busy`: the toolkit's own busy-host check
                                  over the block (a timing bound that holds only on a quiet host asks it)
    FAKE_SGLANG                   the fake `sglang` package (launch_server with SGLang 0.5.17's flags and
                                  stop paths), for process, container and matrix tests without a GPU
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parent.parent
FAKE_SGLANG = ROOT / "tests" / "data" / "fake_sglang"

# the smallest environment the embedded engine serves: random weights, a plain arm, a prompt-lookup arm
# and one whose flag transformers refuses
TINY_ENV = textwrap.dedent("""\
    kind: Environment
    name: t-cpu
    engine: transformers
    model:
      dummy: {hidden_size: 32, intermediate_size: 64, layers: 1, heads: 2, vocab_size: 512, seed: 0}
    servers:
      baseline: {}
      ngram: {}
      broken: {no-such-flag: true}
    request_params:
      ngram:
        generation_config: {prompt_lookup_num_tokens: 4}
    """)


async def read_request(reader: asyncio.StreamReader) -> bool:
    """Read one HTTP request (head and Content-Length body) off a raw asyncio server's connection; False
    when the client closed it instead."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return False
    n = int([h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")][0].split(b":")[1])
    await reader.readexactly(n)
    return True


# a user's own workload of ~4 KiB (over toolkit.results.compact.COMPACT_MIN), for archives that store it
USER_PROMPTS = "".join(f'{{"id": "p{i}", "prompt": "write function number {i} that adds {i} and {i * 7}"}}\n'
                       for i in range(60))


def quickstart_with_user_workload(tmp: Path) -> Path:
    """The quickstart Matrix copied under tmp/envs with a user workload beside it (tmp/data/mine.jsonl:
    USER_PROMPTS) as its second domain, `mine`: a run of it archives that file in its inputs. The Matrix's path."""
    import re

    envs = tmp / "envs"
    shutil.copytree(ROOT / "envs", envs)
    (tmp / "data").mkdir()
    (tmp / "data" / "mine.jsonl").write_text(USER_PROMPTS)
    m = envs / "matrices" / "quickstart.yaml"
    text, n = re.subn(r"^workloads: .*$", "workloads: [coding, {name: mine, path: ../../data/mine.jsonl}]",
                      m.read_text(), flags=re.M)
    assert n == 1
    m.write_text(text)
    return m


def write_matrix(tmp: Path, body: str, *, env: str = TINY_ENV, name: str = "t", file: str = "m.yaml") -> Path:
    """tmp/env.yaml (`env`) and tmp/`file`: a Matrix called `name` on it, `body` its other fields (YAML,
    dedented). Returns the Matrix's path."""
    (tmp / "env.yaml").write_text(env)
    m = tmp / file
    m.write_text(f"kind: Matrix\nname: {name}\nenvironment: env.yaml\n" + textwrap.dedent(body))
    return m


@contextlib.contextmanager
def served(app) -> Iterator[str]:
    """Serve an aiohttp web.Application on 127.0.0.1 (a free port) from a thread running its own event
    loop; yields the base URL, then stops the loop and cleans the runner up."""
    from aiohttp import web

    from toolkit.serve import free_port

    port = free_port()
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
    t = threading.Thread(target=loop.run_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        t.join(5)
        if not t.is_alive():
            loop.run_until_complete(runner.cleanup())
            loop.close()


def guidellm_bin() -> str | None:
    exe = Path(sys.executable).with_name("guidellm")
    return str(exe) if exe.is_file() else shutil.which("guidellm")


def mock_server(tmp: Path, *extra: str, ttft_ms: float = 20, itl_ms: float = 2, tokens: int = 32):
    """guidellm's mock server (a ProcessLauncher, healthy): ttft_ms to the first token, itl_ms between tokens."""
    from tests.conftest import need
    from toolkit.serve import ProcessLauncher, free_port

    exe = guidellm_bin()
    need(exe is not None, "guidellm is not installed (pip install -e '.[test]')")
    port = free_port()
    cmd = [exe, "mock-server", "--host", "127.0.0.1", "--port", str(port), "--ttft-ms", str(ttft_ms),
           "--itl-ms", str(itl_ms), "--output-tokens", str(tokens), *extra]
    srv = ProcessLauncher(cmd, log_path=tmp / f"mock-{port}.log", port=port)
    srv.name = "guidellm mock-server"
    srv.wait_healthy(120)
    return srv


def wait_for(cond, timeout_s: float, what: str):
    """cond()'s first truthy value within timeout_s (polled every 50 ms), else an AssertionError naming `what`:
    tests wait on conditions with deadlines, never on fixed sleeps."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def archive_bytes(folder: Path) -> bytes:
    """Every file under folder as a reader sees it (NAME.gz, *.jsonl.gz and the records codec's *.rec.xz
    decompressed: runs are compacted at finalize), concatenated: what a test searches for a secret or a kept
    string."""
    import gzip
    import lzma

    return b"".join(gzip.decompress(p.read_bytes()) if p.name.endswith(".gz") else
                    lzma.decompress(p.read_bytes()) if p.name.endswith(".xz") else p.read_bytes()
                    for p in sorted(Path(folder).rglob("*")) if p.is_file())


def record_dicts(run: Path, key: str) -> list[dict]:
    """A cell's records as the JSON objects the run wrote (cells/<key>.jsonl.gz or .rec.xz, as finalize left it)."""
    import json

    from toolkit.results.records import read_records, records_path

    return [json.loads(r.model_dump_json(exclude_defaults=True)) for r in read_records(records_path(run / "cells", key))]


class BusyHost:
    """The toolkit's own busy-host check (toolkit/bench/hostload.py HostLoad, toolkit/schema/eligibility.py
    busy_check) over what a `with` block ran: after it, `busy` is the check's CellCheck where other work wanted the
    CPUs, else None."""

    def __init__(self, interval_s: float | None = None):
        from toolkit.bench.hostload import HostLoad

        self._load = HostLoad() if interval_s is None else HostLoad(interval_s=interval_s)
        self.busy = None

    def __enter__(self) -> "BusyHost":
        self._load.start()
        return self

    def __exit__(self, *exc) -> None:
        from toolkit.schema.eligibility import busy_check

        self.busy = busy_check(self._load.stop())
