"""The launcher interface and what every launcher shares: health wait with a crash watch, log tail,
and cleanup that never leaves an orphan (context manager, atexit, SIGTERM/SIGINT, and for child
processes PR_SET_PDEATHSIG so even `kill -9` of the toolkit takes the server with it).

    with TransformersLauncher(model_dir) as srv:     # start() + wait_healthy()
        run_cell(srv.base_url, ...)
"""

from __future__ import annotations

import atexit
import ctypes
import http.client
import os
import re
import shlex
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
import weakref
from pathlib import Path
from typing import Any, Callable, Protocol, runtime_checkable

from toolkit.errors import ToolFailure
from toolkit.fsutil import tail_lines
from toolkit.schema.manifest import ArmState, Hardware, SlurmJobRecord, SlurmLaunch, StopRecord
from toolkit.signals import catch


@runtime_checkable
class Launcher(Protocol):
    """Everything the matrix runner (toolkit.bench.arm) asks of a server."""

    base_url: str
    model: str | None  # the model name requests must carry (None: the server ignores it)
    command: list[str]  # the exact command line it runs ([] for a server the toolkit does not start)

    def start(self) -> None: ...
    def wait_healthy(self, timeout_s: float = 300.0,  # raises ToolFailure (exit code, log tail)
                     progress: Callable[[str], None] | None = None) -> None: ...  # progress: what it waits for
    def check_alive(self, during: str = "the cell") -> None: ...  # raises ToolFailure if the server exited
    def info(self) -> ArmState: ...  # launcher facts (+ engine, version, limits) for the archive
    # json-edge: what the server answered
    def server_info(self) -> dict: ...  # what the server says about itself ({} when it says nothing)
    def flush_cache(self) -> bool | None: ...  # reset counters and caches; None: nothing the toolkit resets
    def stop(self) -> None: ...
    def log_tail(self, n: int = 40) -> str: ...
    def log_text(self) -> str | None: ...  # the whole log kept by the toolkit (None: log_tail is all there is)
    def stop_info(self) -> StopRecord | None: ...  # how the last stop went: signals sent, warnings, exit code
    def exit_code(self) -> int | None: ...  # None while running (or not managed)

    # Optional capabilities, with BaseLauncher's no-op defaults: a launcher that has none of them (a local
    # process, a container, an external URL) inherits them; a batch job's (toolkit.slurm) gives them all.
    hardware: Hardware | None  # what its server loads once it runs (a job's node); None: the slot's hardware
    jit_cache: Any  # the kept compile cache (toolkit.serve.jitcache.JitCache), judged warm at the start; None
    cell_step: Callable[..., list] | None  # sends a cell from beside the server (a job step); None: from here
    log_path: Path | None  # where the toolkit keeps the server's log (None: it keeps none here)

    # data-keyed: archive path
    def archive_files(self) -> dict[str, str]: ...  # {archive path: text} written once it started ({}: none)
    def job_launch(self) -> SlurmLaunch | None: ...  # the batch job a launch ran in, for its launch record (None)
    def job_record(self, launch: int) -> SlurmJobRecord | None: ...  # the batch job as the manifest lists it (None)


_LIVE: "weakref.WeakSet[BaseLauncher]" = weakref.WeakSet()
_HANDLERS_INSTALLED = False


def stop_all() -> None:
    """Stop every server this process started (interrupts, exit)."""
    for launcher in list(_LIVE):
        try:
            launcher.stop()
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


def _on_signal(signum, frame):  # noqa: ARG001
    stop_all()
    previous = _PREVIOUS.get(signum)
    if callable(previous):
        previous(signum, frame)
    elif signum == signal.SIGINT:
        raise KeyboardInterrupt
    else:
        raise SystemExit(128 + signum)


_PREVIOUS: dict[int, object] = {}


def _install_handlers() -> None:
    global _HANDLERS_INSTALLED
    if _HANDLERS_INSTALLED:
        return
    _HANDLERS_INSTALLED = True
    atexit.register(stop_all)
    _PREVIOUS.update(catch((signal.SIGTERM, signal.SIGINT), _on_signal))


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def with_port(args: dict, port: int | None, host: str | None) -> tuple[dict, int]:
    """The preset's own port wins (the command line stays exactly the preset); else add a free one."""
    args = dict(args)
    if "port" in args:
        return args, int(args["port"])
    args["port"] = port or free_port()
    if host is not None and "host" not in args:
        args["host"] = host
    return args, int(args["port"])


def http_get(url: str, timeout: float = 2.0) -> tuple[int, bytes]:
    """A tiny synchronous GET (health polls, /server_info): (status, body); status 0 when unreachable, with
    the reason as the body. https:// and the API key of an endpoint registered for the URL (toolkit.endpoints)."""
    from toolkit import endpoints

    ep = endpoints.lookup(url)
    req = urllib.request.Request(url, headers=ep.headers() if ep else {})
    ctx = ep.ssl_context() if ep and ep.tls else None
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=ctx) as r:  # noqa: S310 - loopback/user URLs
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read() or b""
    except (urllib.error.URLError, OSError, TimeoutError, http.client.HTTPException) as e:
        reason = getattr(e, "reason", e)
        return 0, endpoints.redact(f"{type(reason).__name__}: {reason}").encode()


_ERROR_LINE = re.compile(r"(\berror\b|Error:|Exception:|Traceback)", re.I)


def last_error_line(log: str) -> str | None:
    """The server's own last word on why it stopped: the last log line that reports an error."""
    for line in reversed(log.splitlines()):
        if _ERROR_LINE.search(line) and not line.lstrip().startswith("Traceback"):
            return line.strip()[:300]
    return None


REFUSED_GRACE_S = 5.0  # a server restarting refuses for a moment; one refusing this long is not there
NOTE_EVERY_S = 5.0


class Waiting:
    """Tells `progress` what a health wait is waiting for (the last answer, seconds so far), every NOTE_EVERY_S."""

    def __init__(self, progress: Callable[[str], None] | None, url: str, t0: float):
        self.progress, self.url, self.t0, self.next = progress, url, t0, t0 + NOTE_EVERY_S

    def __call__(self, status: int, body: bytes) -> None:
        now = time.monotonic()
        if self.progress is None or now < self.next:
            return
        self.next = now + NOTE_EVERY_S
        text = body.decode(errors="replace")
        said = f"HTTP {status}" if status else "not listening yet" if "Connection refused" in text else \
            (text[:80] or "no answer")
        self.progress(f"waiting for {self.url}: {said} ({now - self.t0:.0f} s)")


class BaseLauncher:
    """Shared behaviour. Subclasses implement _spawn, _poll_exit, _terminate, log_tail."""

    name = "server"
    health_path = "/health"

    def __init__(self, host: str = "127.0.0.1", port: int | None = None):
        self.host = host
        self.port = port or free_port(host)
        self.model: str | None = None
        self.command: list[str] = []
        self._started = False
        self._stopped = False

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # -- subclass hooks
    def _spawn(self) -> None:
        raise NotImplementedError

    def _poll_exit(self) -> int | None:
        raise NotImplementedError

    def _terminate(self) -> None:
        raise NotImplementedError

    def log_tail(self, n: int = 40) -> str:
        raise NotImplementedError

    def last_error(self, log: str) -> str | None:
        """The engine's own last word in its log on why it stopped (an engine's launcher may know it better)."""
        return last_error_line(log)

    # -- the interface
    def start(self) -> None:
        if self._started:
            return
        _install_handlers()
        self._spawn()
        self._started = True
        _LIVE.add(self)

    def exit_code(self) -> int | None:
        return self._poll_exit() if self._started else None

    def check_alive(self, during: str = "the cell") -> None:
        """Raise ToolFailure with the exit code and log tail if the server has exited."""
        code = self.exit_code()
        if code is not None:
            tail = self.log_tail(20)
            said = self.last_error(self.log_tail(200))  # the error can precede a long usage text
            raise ToolFailure(f"{self.name} exited with code {code} during {during}" + (f": {said}" if said else ""),
                              hint=f"last lines of its log:\n{tail}")

    def wait_healthy(self, timeout_s: float = 300.0, progress: Callable[[str], None] | None = None) -> None:
        """Poll the health endpoint until 200, watching the server: fail at once if it exits. `progress`
        hears what it waits for every few seconds."""
        self.start()
        t0 = time.monotonic()
        deadline = t0 + timeout_s
        url = self.base_url + self.health_path
        note = Waiting(progress, url, t0)
        while True:
            self.check_alive(during="start-up")
            status, body = http_get(url, timeout=2.0)
            if status == 200:
                return
            note(status, body)
            if time.monotonic() > deadline:
                tail = self.log_tail(20)
                self.stop()
                raise ToolFailure(f"{self.name} did not answer {url} with 200 within {timeout_s:.0f} s "
                                  f"(last status {status or 'unreachable'})", hint=f"last lines of its log:\n{tail}")
            time.sleep(0.2)

    def stop(self) -> None:
        if not self._started or self._stopped:
            return
        self._stopped = True
        try:
            self._terminate()
        finally:
            _LIVE.discard(self)

    pinned_weights: dict[str, str] | None = None  # {path: sha256} checked before the start (toolkit.serve.weights)

    def info(self) -> ArmState:
        """The arm's facts as far as the launcher knows them (each launcher adds its own; the runner completes
        them with what the server says and the preset means)."""
        out = ArmState(launcher=type(self).__name__, base_url=self.base_url, model=self.model,
                       command=list(self.command), command_line=shlex.join(self.command) if self.command else None)
        if self.pinned_weights is not None:
            out.add(weights_checked=self.pinned_weights)
        return out

    def server_info(self) -> dict:  # json-edge: what the server answered
        """What the server says about itself: nothing, unless an engine's launcher knows how to ask."""
        return {}

    def stop_info(self) -> StopRecord | None:
        """How the last stop went (signals sent, in order, warnings, exit code); None when the toolkit stops
        nothing."""
        return None

    log_path: Path | None = None  # where the toolkit keeps the server's log, for launchers that keep one

    def log_text(self) -> str | None:
        """The whole log as the toolkit kept it (None where it keeps none: log_tail is all there is)."""
        if self.log_path is None:
            return None
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return None

    def flush_cache(self) -> bool | None:
        """Nothing to reset, unless an engine's launcher knows how (SGLang: /flush_cache)."""
        return None

    # -- optional capabilities (the Launcher protocol's): none, unless a launcher has them
    hardware: Hardware | None = None
    jit_cache = None
    cell_step: Callable[..., list] | None = None

    def archive_files(self) -> dict[str, str]:  # data-keyed: archive path
        return {}

    def job_launch(self) -> SlurmLaunch | None:
        return None

    def job_record(self, launch: int) -> SlurmJobRecord | None:  # noqa: ARG002 - a batch job's launcher has one
        return None

    def __enter__(self):
        self.wait_healthy()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _pdeathsig() -> None:
    """In the child: die with SIGTERM when the parent dies (Linux). The kernel ties this to the *thread*
    that forked, so it is only set for launchers started from the main thread (see ProcessLauncher)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class ProcessLauncher(BaseLauncher):
    """A server as a child process in its own process group; stdout+stderr go to a log file.

    A stop sends `stop_signal` (to the whole group, or to the leader alone where the engine ends its own
    children more cleanly that way) and waits up to stop_timeout_s before anything harsher; `force_quit`
    (toolkit.serve.stopping.ForceQuit): the line in its log by which the engine offers to skip a wait, and
    the signal that does; `shutdown_done` (toolkit.serve.stopping.ShutdownDone): the line by which it says its
    own shutdown is done, after which only the interpreter's exit is left to wait for."""

    stop_signal: int = signal.SIGTERM
    stop_group: bool = True
    force_quit = None
    shutdown_done = None

    def __init__(self, command: list[str], *, log_path: Path, env: dict | None = None, host: str = "127.0.0.1",
                 port: int | None = None, stop_timeout_s: float = 10.0):
        super().__init__(host, port)
        self.command = command
        self.log_path = Path(log_path)
        self.env = env
        self.stop_timeout_s = stop_timeout_s
        self.proc: subprocess.Popen | None = None

    def _spawn(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, **(self.env or {}))
        with open(self.log_path, "ab") as log:
            try:
                main = threading.current_thread() is threading.main_thread()
                self.proc = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT, env=env,
                                             stdin=subprocess.DEVNULL, start_new_session=True,
                                             preexec_fn=_pdeathsig if main else None)
            except OSError as exc:
                raise ToolFailure(f"cannot start {self.name}: {exc}", hint=f"command: {shlex.join(self.command)}")

    def _poll_exit(self) -> int | None:
        return self.proc.poll() if self.proc else None

    def _terminate(self) -> None:
        from toolkit.serve.stopping import stop_process

        self._stop_notes = StopRecord(signals=[], warnings=[])
        if self.proc is not None and self.proc.poll() is None:
            self._stop_notes = stop_process(self.proc, self.name, self.stop_signal, self.stop_group, self.stop_timeout_s,
                                            log_path=self.log_path, force_quit=self.force_quit,
                                            done=self.shutdown_done)

    def stop_info(self) -> StopRecord | None:
        return getattr(self, "_stop_notes", None)

    def log_tail(self, n: int = 40) -> str:
        return tail_lines(self.log_path, n)

    def info(self) -> ArmState:
        return super().info().add(pid=self.proc.pid if self.proc else None, log=str(self.log_path))


class ExternalLauncher(BaseLauncher):
    """A server the toolkit does not manage: start/stop do nothing; health is polled the same way.

    http:// or https:// (toolkit.endpoints: the CA bundle and API key registered for the URL). A gateway or a
    hosted endpoint often has no /health: a 404 there is followed by GET /v1/models. A refused key (401/403)
    or a certificate that does not verify fails at once instead of polling until the timeout."""

    name = "external server"

    def __init__(self, url: str, model: str | None = None, health_path: str = "/health"):
        from urllib.parse import urlsplit

        u = urlsplit(url.rstrip("/"))
        if u.scheme not in ("http", "https"):
            raise ToolFailure(f"an external server's URL must start with http:// or https://, not {url!r}",
                              exit_code=2)
        super().__init__(u.hostname or "127.0.0.1", u.port or (443 if u.scheme == "https" else 80))
        self._url = url.rstrip("/")
        self.model = model
        self.health_path = health_path

    @property
    def base_url(self) -> str:
        return self._url

    def wait_healthy(self, timeout_s: float = 300.0, progress: Callable[[str], None] | None = None) -> None:
        """Poll until 200. A server that is not up yet (no answer, 503) is waited for, `progress` hearing what
        it answered every few seconds; a refused connection (for REFUSED_GRACE_S), a URL whose scheme the port
        does not speak, a refused key or a certificate that does not verify fail at once, with the reason."""
        from toolkit import endpoints
        from toolkit.serve.reach import unreachable

        self.start()
        t0 = time.monotonic()
        deadline = t0 + timeout_s
        ep = endpoints.lookup(self._url)
        note = Waiting(progress, self._url + self.health_path, t0)
        refused_since = None
        while True:
            url = self._url + self.health_path
            status, body = http_get(url, timeout=5.0)
            if status == 404 and self.health_path == "/health":
                url = self._url + "/v1/models"
                status, body = http_get(url, timeout=5.0)
            if status == 200:
                return
            note(status, body)
            if status in (401, 403):
                key = f"the key in ${ep.api_key_env}" if ep and ep.api_key else "no API key"
                raise ToolFailure(f"{url} answered HTTP {status} with {key}: the server wants a valid API key",
                                  hint="set `api_key_env:` in the matrix target to the variable that holds the key")
            if status == 0 and b"CERTIFICATE_VERIFY_FAILED" in body:
                raise ToolFailure(f"{url}: the server's TLS certificate does not verify "
                                  f"({body.decode(errors='replace')[:200]})",
                                  hint="name the CA that issued it with `ca_bundle:` in the matrix target")
            verdict = unreachable(url, status, body)
            if verdict.kind == "final" or (verdict.kind == "refused" and refused_since is not None
                                           and time.monotonic() - refused_since >= REFUSED_GRACE_S):
                raise ToolFailure(f"{self.name} at {self._url}: {verdict.message}", hint=verdict.hint)
            refused_since = (refused_since or time.monotonic()) if verdict.kind == "refused" else None
            if time.monotonic() > deadline:
                last = f"HTTP {status}" if status else (body.decode(errors="replace")[:200] or "unreachable")
                raise ToolFailure(f"{self.name} did not answer {url} with 200 within {timeout_s:.0f} s (last: {last})")
            time.sleep(0.5)

    def info(self) -> ArmState:
        from toolkit import endpoints

        ep = endpoints.lookup(self._url)
        if ep is None:
            return super().info().add(tls=self._url.startswith("https://"))
        return super().info().add(**ep.recorded()._asdict())

    def _spawn(self) -> None:
        pass

    def _poll_exit(self) -> int | None:
        return None

    def _terminate(self) -> None:
        pass

    def log_tail(self, n: int = 40) -> str:
        return ""


def metrics_snapshot(base_url: str) -> dict[str, float]:  # data-keyed: /metrics series
    """Prometheus /metrics as {"name{labels}": value}; {} when absent (SGLang: without --enable-metrics;
    vLLM: with --disable-log-stats)."""
    status, body = http_get(base_url + "/metrics", timeout=10)
    return parse_metrics(body.decode(errors="replace")) if status == 200 else {}


def parse_metrics(text: str) -> dict[str, float]:  # data-keyed: /metrics series
    """Prometheus text format -> {"name{labels}": value}. Label values may hold spaces; a sample may end
    with a timestamp, which is dropped."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        close = line.rfind("}")
        if close >= 0:
            name, rest = line[:close + 1], line[close + 1:]
        else:
            name, _, rest = line.partition(" ")
        fields = rest.split()
        try:
            out[name.strip()] = float(fields[0])
        except (IndexError, ValueError):
            continue
    return out
