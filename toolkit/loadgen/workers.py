"""A cell's load spread over worker processes, so that the client is never what limits a measurement.

One Python process streams some tens of thousands of chunks per second (docs/lab/loadgen.md); a GPU host
at high concurrency streams more, and past its limit a client measures its own queue. run_parallel
starts N processes (`python -m toolkit.loadgen.workers`), each with its own event loop and connection
pool running a `Share` of the cell (toolkit.loadgen.share), and merges their records into the one cell:

- one clock: send times and chunk arrivals are time.perf_counter, CLOCK_MONOTONIC on Linux, the same
  clock in every process; the cell's t0 is the parent's.
- closed loop: worker w keeps its share of the concurrency in flight (C // N, one more for the first
  C % N) and takes the next request index from a counter all of them share, so the cell has exactly C
  requests in flight until the last ones drain, as with one process. Request i is the same prompt
  whoever sends it (share.item), so arms stay paired.
- open loop: every worker walks the same seeded Poisson schedule and sends arrivals i = w (mod N): the
  aggregate is the one-process schedule, arrival for arrival. The concurrency cap is split as above.
- phases start together: warmup in every worker, all done, then the measured phase, each at a start
  time the parent gives.
- the parent keeps what needs the launcher: check_alive every 0.5 s and after each failed request
  (the worker's slot waits for the answer, as the slot of one process waits for check_alive),
  on_record as batches arrive (every 20 ms), CellFailed with the records measured so far.
- no worker outlives the run: the parent stops and reaps them in `finally` (a failure, an exception,
  Ctrl-C); a worker dies with the parent's thread (PR_SET_PDEATHSIG, SIGKILL), so SIGTERM or kill -9
  of the parent takes it too; it stops on EOF of its control pipe; it ignores SIGINT (the terminal
  sends Ctrl-C to the whole group: the parent decides).

Workers are plain subprocesses, not multiprocessing: its spawn start method launches a resource
tracker that outlives the cell, and re-imports the caller's __main__. The shared counter is an
8-byte temporary file under a POSIX record lock (lockf, owned per process).
"""

from __future__ import annotations

import asyncio
import fcntl
import itertools
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from toolkit.errors import ToolFailure
from toolkit.loadgen.load import CellLoad
from toolkit.schema.records import Prompt, RequestRecord

FLUSH_S = 0.02      # how often a worker sends its finished records to the parent
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0


class SharedCounter:
    """take(limit) -> the next request index of the phase, or None once `limit` is reached; one counter
    for every process of the cell (an 8-byte file, read and advanced under lockf)."""

    def __init__(self, fd: int):
        self.fd = fd

    def reset(self) -> None:
        os.pwrite(self.fd, (0).to_bytes(8, "little"), 0)

    def __call__(self, limit: int | None) -> int | None:
        fcntl.lockf(self.fd, fcntl.LOCK_EX)
        try:
            i = int.from_bytes(os.pread(self.fd, 8, 0), "little")
            if limit is not None and i >= limit:
                return None
            os.pwrite(self.fd, (i + 1).to_bytes(8, "little"), 0)
            return i
        finally:
            fcntl.lockf(self.fd, fcntl.LOCK_UN)


def split(total: int, n: int, w: int) -> int:
    """Worker w's share of `total` over n workers (the first total % n get one more)."""
    return total // n + (1 if w < total % n else 0)


class Channel:
    """Pickled messages, length-prefixed, over two pipes: send() writes whole messages on a blocking
    pipe; attach() reads the other on an event loop, which makes that pipe non-blocking (so it must not
    be the one written to: a non-blocking write would cut a message short)."""

    def __init__(self, rfd: int, wfd: int):
        self.rfd, self.wfd, self.buf = rfd, wfd, b""

    def send(self, msg) -> None:
        data = pickle.dumps(msg, pickle.HIGHEST_PROTOCOL)
        view = memoryview(len(data).to_bytes(8, "little") + data)
        while view:
            view = view[os.write(self.wfd, view):]

    def recv_blocking(self):
        """One message, before the pipe is attached to a loop."""
        while len(self.buf) < 8 or len(self.buf) < 8 + int.from_bytes(self.buf[:8], "little"):
            chunk = os.read(self.rfd, 1 << 20)
            if not chunk:
                raise EOFError
            self.buf += chunk
        return self._take()

    def _take(self):
        n = int.from_bytes(self.buf[:8], "little")
        msg, self.buf = pickle.loads(self.buf[8:8 + n]), self.buf[8 + n:]
        return msg

    def attach(self, loop, on_msg: Callable, on_eof: Callable[[], None]) -> None:
        def readable() -> None:
            try:
                chunk = os.read(self.rfd, 1 << 20)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if not chunk:
                loop.remove_reader(self.rfd)
                on_eof()
                return
            self.buf += chunk
            while len(self.buf) >= 8 and len(self.buf) >= 8 + int.from_bytes(self.buf[:8], "little"):
                on_msg(self._take())
        loop.add_reader(self.rfd, readable)

    def close(self, loop=None) -> None:
        if loop is not None:
            loop.remove_reader(self.rfd)
        for fd in (self.rfd, self.wfd):
            try:
                os.close(fd)
            except OSError:
                pass


# -- the parent --------------------------------------------------------------------------------------

class _Workers:
    """The worker processes of one cell and their messages, on the caller's event loop."""

    def __init__(self, n: int, counter_fd: int):
        self.procs: list[subprocess.Popen] = []
        self.chans: list[Channel] = []
        self.inbox: asyncio.Queue = asyncio.Queue()
        self.loop = asyncio.get_running_loop()
        root = str(Path(__file__).resolve().parents[2])  # the toolkit a caller imported, not another one
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
        for w in range(n):
            down_r, down_w = os.pipe()  # parent -> worker
            up_r, up_w = os.pipe()      # worker -> parent
            try:
                self.procs.append(subprocess.Popen(
                    [sys.executable, "-m", "toolkit.loadgen.workers", str(down_r), str(up_w), str(counter_fd),
                     str(os.getpid())], pass_fds=(down_r, up_w, counter_fd), env=env, stdin=subprocess.DEVNULL))
            finally:
                os.close(down_r)
                os.close(up_w)
            ch = Channel(up_r, down_w)
            self.chans.append(ch)
            ch.attach(self.loop, lambda msg, w=w: self.inbox.put_nowait((w, msg)),
                      lambda w=w: self.inbox.put_nowait((w, ("exit", self.procs[w].wait()))))

    def send(self, msg) -> None:
        for w, ch in enumerate(self.chans):
            if self.procs[w].poll() is None:
                try:
                    ch.send(msg)
                except OSError:
                    pass

    def close(self) -> None:
        """Stop and reap every worker (EOF on its pipe stops it; SIGKILL after STOP_TIMEOUT_S)."""
        for ch in self.chans:
            try:
                self.loop.remove_reader(ch.rfd)
            except (OSError, ValueError):
                pass
            ch.close()
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for p in self.procs:
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


async def run_parallel(base_url: str, load: CellLoad, prompts: list[Prompt], n: int, who: dict,
                       on_record: Callable[[RequestRecord], None] | None,
                       check_alive: Callable[[], None] | None,
                       on_measure: Callable[[], None] | None = None) -> list[RequestRecord]:
    """run_cell over n worker processes (see the module's docstring); same records, same failures."""
    from toolkit import endpoints
    from toolkit.loadgen.client import make_pool
    from toolkit.loadgen.share import cell_failed

    make_pool(base_url)  # a bad URL is the caller's error, raised here, before any process starts
    records: list[RequestRecord] = []
    failure: list[BaseException] = []
    t0 = time.perf_counter()
    cfg = dict(base_url=base_url, load=load, prompts=prompts, t0=t0, n=n, who=who,
               endpoint=endpoints.lookup(base_url), check=check_alive is not None)

    def alive() -> None:
        if check_alive is not None and not failure:
            try:
                check_alive()
            except ToolFailure as exc:
                failure.append(exc)

    with tempfile.TemporaryFile() as cf:
        counter = SharedCounter(cf.fileno())
        counter.reset()
        ws = _Workers(n, cf.fileno())
        try:
            for w in range(n):
                try:
                    ws.chans[w].send(dict(cfg, index=w))
                except OSError:  # it died before its first message: the cell fails saying so
                    failure.append(ToolFailure(f"load worker {w} exited with code {ws.procs[w].wait()} before "
                                               "the cell started"))
                    break
            await _gather(ws, "ready", records, on_record, alive, failure, READY_TIMEOUT_S)
            phases = (["warmup"] if load.warmup else []) + ["measure"]
            for phase in phases:
                if failure:
                    break
                counter.reset()
                if phase == "measure" and on_measure is not None:
                    on_measure()  # every worker is idle: warmup done, nothing sent yet
                start = time.perf_counter() + 0.01  # every worker starts at the same instant
                until = start + load.duration_s if phase == "measure" and load.duration_s else None
                ws.send(("go", phase, start, until))
                await _gather(ws, phase, records, on_record, alive, failure, None)
            if failure:
                ws.send(("stop",))
                await _gather(ws, "stopped", records, on_record, None, failure, STOP_TIMEOUT_S)
        finally:
            ws.close()
    if failure:
        raise cell_failed(failure[0], records, who, load.concurrency)
    return records


async def _gather(ws: _Workers, phase: str, records: list, on_record, alive, failure: list,
                  timeout_s: float | None) -> None:
    """Take messages until every live worker says `phase` (or failure, in which case return at once so
    the caller can stop them; while stopping, `alive` is None and every worker's last batch is awaited)."""
    waiting = {w for w, p in enumerate(ws.procs) if p.poll() is None} if phase != "ready" else set(range(len(ws.procs)))
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    next_check = time.monotonic() + 0.5
    while waiting:
        if alive is not None and failure:
            return
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            if alive is None:
                return  # stopping: close() reaps what is left
            raise ToolFailure(f"load workers did not start within {timeout_s:.0f} s",
                              hint="the machine is overloaded, or `python -m toolkit.loadgen.workers` cannot start")
        try:
            w, msg = await asyncio.wait_for(ws.inbox.get(), max(0.01, min(next_check - now, 0.5)))
        except asyncio.TimeoutError:
            msg = None
        if alive is not None and time.monotonic() >= next_check:
            next_check = time.monotonic() + 0.5
            alive()
        if msg is None:
            continue
        kind = msg[0]
        if kind == "recs":
            records.extend(msg[1])
            if on_record is not None:
                for r in msg[1]:
                    on_record(r)
            if alive is not None and any(r.error is not None for r in msg[1]):
                alive()
        elif kind == "check":  # a request failed in worker w: is the server alive? (it waits for the answer)
            if alive is not None:
                alive()
                if not failure:
                    try:
                        ws.chans[w].send(("checked", msg[1]))
                    except OSError:
                        pass  # the worker is gone: its exit arrives as a message of its own
        elif kind == "error":
            failure.append(ToolFailure(f"load worker {w} failed: {msg[1]}"))
            waiting.discard(w)
        elif kind == "exit":
            waiting.discard(w)
            if alive is not None and not failure:
                failure.append(ToolFailure(f"load worker {w} exited with code {msg[1]} during the cell"))
        elif kind == phase:
            waiting.discard(w)


# -- a worker ----------------------------------------------------------------------------------------

def _die_with_parent(ppid: int) -> None:
    """SIGKILL when the parent's thread that started us ends (Linux); exit if it is already gone."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != ppid:
        os._exit(1)


async def _work(ch: Channel, counter: SharedCounter) -> None:
    from toolkit import endpoints
    from toolkit.loadgen.share import Share, until_failure

    cfg = ch.recv_blocking()
    if cfg["endpoint"] is not None:
        endpoints.register(cfg["endpoint"])
    w, n, load = cfg["index"], cfg["n"], cfg["load"]
    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue = asyncio.Queue()
    pending: list[RequestRecord] = []

    def flush() -> None:
        if pending:
            ch.send(("recs", pending[:]))
            pending.clear()

    def on_record(rec: RequestRecord) -> None:
        if not pending:
            loop.call_later(FLUSH_S, flush)
        pending.append(rec)

    checks: dict[int, asyncio.Future] = {}
    ids = itertools.count()

    def on_error(rec: RequestRecord) -> asyncio.Future:
        """As check_alive after a failed request with one process: the parent checks the server, and
        this slot waits for its answer (a dead server must not be raced through at full speed)."""
        flush()
        seq = next(ids)
        fut = checks[seq] = loop.create_future()
        ch.send(("check", seq))
        return fut

    def on_msg(msg) -> None:
        if msg[0] == "checked":
            fut = checks.pop(msg[1], None)
            if fut is not None and not fut.done():
                fut.set_result(None)
        else:
            inbox.put_nowait(msg)

    share = Share(cfg["base_url"], load, cfg["prompts"], slots=split(load.concurrency, n, w), take=counter,
                  t0=cfg["t0"], on_record=on_record, on_error=on_error if cfg["check"] else None, **cfg["who"])
    ch.attach(loop, on_msg, lambda: inbox.put_nowait(("stop",)))  # EOF: the parent is gone or done
    ch.send(("ready",))
    async with share.pool:
        while True:
            msg = await inbox.get()
            if msg[0] != "go":
                break
            _, phase, start, until = msg
            await asyncio.sleep(max(0.0, start - time.perf_counter()))
            if phase == "warmup":
                work = share.closed(load.warmup, True, None)
            elif load.rate or load.arrivals is not None:
                work = share.open_loop(load.requests, until, start, n, w)
            else:
                work = share.closed(load.requests, False, until)
            task = asyncio.ensure_future(until_failure(work, share.failure))
            getter = asyncio.ensure_future(inbox.get())
            await asyncio.wait({task, getter}, return_when=asyncio.FIRST_COMPLETED)
            if getter.done():  # stop (or EOF) in the middle of a phase: cancel what is in flight
                share.failure.append(ToolFailure("stopped"))
                await task
                break
            getter.cancel()
            task.result()
            flush()
            ch.send((phase,))
    try:
        flush()
        ch.send(("stopped",))
    except OSError:  # the parent closed its end: nobody is waiting for these
        pass


def main() -> None:
    """`python -m toolkit.loadgen.workers IN_FD OUT_FD COUNTER_FD PARENT_PID`: started by run_parallel only."""
    rfd, wfd, counter_fd, ppid = (int(x) for x in sys.argv[1:5])
    _die_with_parent(ppid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    ch = Channel(rfd, wfd)
    from toolkit.loadgen.share import run

    try:
        run(_work(ch, SharedCounter(counter_fd)))
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which fails the cell
        try:
            ch.send(("error", f"{type(exc).__name__}: {exc}"[:500]))
        except OSError:
            pass
        sys.exit(1)


if __name__ == "__main__":
    main()
