"""The client's per-read parse (toolkit.loadgen.http._Conn + client._Stream: HTTP chunked framing, SSE,
tokens per chunk), without sockets or an event loop: the schedule server's chunks (SGLang's shape with
per-chunk usage) handed to data_received as reads of K chunks, K = 1 (a realistic load: a chunk a read),
12, 48 and 455 (a saturated client: the reads of a capacity run). CPU time per read and per chunk, for
this tree and, with --baseline DIR, another checkout's client in the same process (before/after).

    python benchmarks/loadgen_parse.py [--baseline ../main]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load(root: Path, tag: str) -> types.SimpleNamespace:
    """toolkit.loadgen.http and .client of `root`, as modules of their own (the schema from this tree; a
    tree older than toolkit/loadgen/ has them under toolkit/bench/)."""
    mods = {}
    pkg = "loadgen" if (root / "toolkit" / "loadgen").is_dir() else "bench"
    for name in ("http", "client"):
        spec = importlib.util.spec_from_file_location(f"{tag}_{name}", root / "toolkit" / pkg / f"{name}.py")
        m = importlib.util.module_from_spec(spec)
        if name == "client":
            sys.modules[f"toolkit.{pkg}.http"] = mods["http"]  # client imports Pool from it
        spec.loader.exec_module(m)
        mods[name] = m
    return types.SimpleNamespace(**mods)


def event(n: int) -> bytes:
    delta = b'{"reasoning_content":null,"content":" tok%d"}' % n
    choice = b'{"index":0,"delta":%s,"logprobs":null,"finish_reason":null,"matched_stop":null}' % delta
    usage = (b',"usage":{"prompt_tokens":8,"total_tokens":%d,"completion_tokens":%d,"prompt_tokens_details":null,'
             b'"reasoning_tokens":0}' % (8 + n, n))
    e = b'data: {"id":"r1","object":"chat.completion.chunk","created":1,"model":"m","choices":[%s]%s}\n\n' % (
        choice, usage)
    return b"%x\r\n%s\r\n" % (len(e), e)


def per_read(mods, raw: bytes, reps: int) -> tuple[float, list]:
    """CPU seconds per read of `raw` (a fresh connection and stream each time), and the tokens parsed."""
    def once():
        c = mods.http._Conn()
        st = mods.client._Stream("chat")
        c._reset(st, None)
        c.status, c.state = 200, 1
        c.data_received(raw)
        return st
    st = once()
    best = float("inf")
    for _ in range(5):
        t0 = time.process_time()
        for _ in range(reps):
            once()
        best = min(best, (time.process_time() - t0) / reps)
    return best, st.tokens


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", type=Path, help="another checkout whose client is timed beside this one")
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    trees = {"this": load(ROOT, "this")}
    if a.baseline:
        trees["base"] = load(a.baseline.resolve(), "base")
    print(f"{'K':>4} " + " ".join(f"{n + ' us/read':>14} {n + ' us/chunk':>15}" for n in trees))
    for k in (1, 12, 48, 455):
        raw = b"".join(event(i) for i in range(1, k + 1))
        reps = max(20, 20000 // k)
        row, tokens = [], None
        for name, mods in trees.items():
            t, tok = per_read(mods, raw, reps)
            assert tokens is None or tok == tokens, f"{name} parsed other tokens"
            tokens = tok
            row.append(f"{t * 1e6:14.2f} {t * 1e6 / k:15.3f}")
        print(f"{k:4} " + " ".join(row))


if __name__ == "__main__":
    main()
