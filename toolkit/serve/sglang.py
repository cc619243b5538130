"""SGLang launchers: a container from the image `toolkit build env` built (docker SDK; local socket or
`ssh://host`), or a plain process where SGLang is installed. The preset's args are rendered exactly
as `python -m sglang.launch_server --flag value ...`. Also the SGLang helpers a runner calls between
cells: /server_info, /metrics, /flush_cache.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from toolkit.engines import sglang
from toolkit.fsutil import tail_lines
from toolkit.serve.base import (BaseLauncher, ExternalLauncher, ProcessLauncher, free_port, http_get,  # noqa: F401
                                metrics_snapshot, parse_metrics)
from toolkit.serve.jitcache import JitCache
from toolkit.serve.stopping import ForceQuit, ShutdownDone

LABEL = "toolkit.launcher"
# How a stop of SGLang 0.5.17 begins (read in its source; docs/lab/starts.md, "uvicorn's force quit"):
# - SIGTERM to the whole group (the old way) kills the scheduler with -15; the main process's subprocess
#   watchdog (1 s poll) calls that a crash and SIGQUITs itself; the SIGQUIT handler sleeps 5 s "before crash
#   diagnostics" (SGLANG_PYSPY_DUMP_BEFORE_CRASH, on by default): 5.3-6.0 s on the H200, logged as a failure.
# - SIGTERM to the main process alone takes the drain path: tokenizer_manager.sigterm_watchdog polls its
#   flag every 5 s, then sends ShutdownReq and waits for the schedulers: 0-5 s plus their shutdown.
# - SIGINT to the main process alone is uvicorn's own graceful shutdown (SGLang installs no SIGINT handler in
#   it): uvicorn stops within its 0.1 s tick, uvicorn.run returns, and launch_server's `finally:
#   kill_process_tree(os.getpid(), include_parent=False)` ends the scheduler and detokenizer. The quickest
#   clean end, so it goes first; SIGTERM and SIGKILL to the group follow only after a bounded wait.
# - uvicorn (0.55, server.py `shutdown`/`_wait_tasks_to_complete`) then waits for open connections and
#   background tasks ("... (CTRL+C to force quit)": 1-2 s on the H200) and runs the lifespan shutdown; a
#   second SIGINT while it waits sets `force_exit`, which skips both. Sent only when that line appears after
#   the stop began: after uvicorn returned, `capture_signals` has restored the previous handlers, and a late
#   SIGINT would be a KeyboardInterrupt inside launch_server's `finally: kill_process_tree(...)`.
# - After that `finally` (its log line names the leader as parent and as caller, include_parent=False), the
#   main process only leaves the interpreter: on the H200 that took 2.2 s more (py-spy: torch._dynamo's atexit
#   dump_compile_times importing tabulate, then ~2 s in C with no Python frame), the whole of the stop beyond
#   0.5 s (benchmarks/sglang_h200/stop_probe.sh). Nothing is left to keep then (the log is unbuffered, the
#   children are killed, the GPU memory is freed by the kernel either way), so the leader gets SHUTDOWN_DONE's
#   grace and then SIGKILL, alone: multiprocessing's resource tracker in its group still cleans up after it.
STOP_SIGNAL = signal.SIGINT
STOP_WAIT_S = 15.0
FORCE_QUIT = ForceQuit("(CTRL+C to force quit)", signal.SIGINT, "uvicorn's force quit")
SHUTDOWN_DONE = ShutdownDone("kill_process_tree called: parent_pid={pid}, include_parent=False, pid={pid}", 0.5,
                             "its shutdown was done (launch_server's kill_process_tree of its children)")


# the preset's command line is the engine's to say (toolkit/engines/sglang.py)
render_sglang_args, sglang_command = sglang.render_args, sglang.command


def _with_port(args: dict, port: int | None, host: str | None) -> tuple[dict, int]:
    """The preset's own port wins (the command line stays exactly the preset); else add a free one."""
    args = dict(args)
    if "port" in args:
        return args, int(args["port"])
    args["port"] = port or free_port()
    if host is not None and "host" not in args:
        args["host"] = host
    return args, int(args["port"])


class SGLangMixin:
    base_url: str

    def flush_cache(self, timeout_s: float = 60.0) -> bool | None:
        """Before a cell: restart SGLang's cumulative counters (acceptance) and empty its prefix cache."""
        return flush_cache(self.base_url, timeout_s)

    def server_info(self) -> dict:
        return server_info(self.base_url)

    def sglang_info(self) -> dict:
        info = self.server_info()
        return {**server_state(info), "server_info": info}


class SGLangExternalLauncher(SGLangMixin, ExternalLauncher):
    """An SGLang server the toolkit does not manage: its /server_info is read, its caches are left alone
    (the server is someone else's; its cumulative counters then span cells)."""

    def flush_cache(self, timeout_s: float = 60.0) -> bool | None:
        return None

    def info(self) -> dict:
        return {**super().info(), **self.sglang_info()}


class SGLangProcessLauncher(SGLangMixin, ProcessLauncher):
    name = "sglang"
    stop_signal, stop_group = STOP_SIGNAL, False  # the main process ends its own children (see STOP_SIGNAL)
    force_quit, shutdown_done = FORCE_QUIT, SHUTDOWN_DONE

    def __init__(self, args: dict, *, python: str | None = None, port: int | None = None,
                 log_path: Path | None = None, env: dict | None = None, dummy_models: dict | None = None,
                 jit_cache: JitCache | None = None):
        args, port = _with_port(args, port, "127.0.0.1")
        log_path = log_path or Path(tempfile.mkdtemp(prefix="toolkit-sglang-")) / "server.log"
        super().__init__(sglang_command(args, python or sys.executable), log_path=log_path, env=env, port=port,
                         stop_timeout_s=STOP_WAIT_S)
        self.jit_cache = jit_cache
        self.model = sglang.served_name(args)
        # the environment's config-only folders this preset reads (load-format dummy), made before the start
        self.dummy_models = dummy_models or {}
        self.reads = set(sglang.meaning(args).reads)

    def _spawn(self) -> None:
        if self.reads & set(self.dummy_models):
            from toolkit.serve.dummy import ensure_config_folders

            ensure_config_folders(self.dummy_models, only=self.reads)
        if self.jit_cache is not None:  # the Environment's own `env:` wins over the kept folders
            self.jit_cache.prepare()
            own = self.env or {}
            self.env = {**self.jit_cache.env(), **own, **self.jit_cache.bytecode_env(os.environ, own)}
        super()._spawn()

    def info(self) -> dict:
        return {**super().info(), **self.sglang_info(), "jit_cache": self.jit_cache.info() if self.jit_cache else None}


class SGLangDockerLauncher(SGLangMixin, BaseLauncher):
    """One container per arm. network "host" (the server binds the host's port) or "bridge" (published port)."""

    name = "sglang container"

    def __init__(self, image: str, args: dict, *, docker_url: str | None = None, address: str | None = None,
                 gpus: str | int | list[str] | None = "all", shm_size: str = "32g", network: str = "host",
                 mounts: dict[str, str] | None = None, env: dict[str, str] | None = None, port: int | None = None,
                 log_path: Path | None = None, python: str = "python3",
                 ulimits: dict[str, int] | None = None, stop_timeout_s: int = int(STOP_WAIT_S),
                 jit_cache: JitCache | None = None):
        self.image = image
        self.docker_url = docker_url
        address = address or (docker_url.split("@")[-1].split(":")[0].removeprefix("ssh://")
                              if docker_url and docker_url.startswith("ssh://") else "127.0.0.1")
        self.args, cport = _with_port(args, port, "0.0.0.0" if network != "host" else address)
        super().__init__(address, cport if network == "host" else (port or free_port()))
        self.container_port = cport
        self.gpus, self.shm_size, self.network = gpus, shm_size, network
        self.mounts = dict(mounts or {})
        self.env = dict(env or {})
        # as SGLang's compose file; memlock needs a privileged engine (lower it where that is refused)
        self.ulimits = {"memlock": -1, "stack": 67108864} if ulimits is None else dict(ulimits)
        self.command = sglang_command(self.args, python)
        self.model = sglang.served_name(self.args)
        self.log_path = log_path or Path(tempfile.mkdtemp(prefix="toolkit-sglang-")) / "server.log"
        self.stop_timeout_s = stop_timeout_s
        self.jit_cache = jit_cache  # its `inside` is where the folder is mounted
        self._stop_notes: dict = {}
        self.container = None
        self._client = None
        self._exit: int | None = None
        self._log_thread: threading.Thread | None = None

    def _docker(self):
        if self._client is None:
            from toolkit import docker_api

            self._client = docker_api.client(self.docker_url, timeout=120)
        return self._client

    def _spawn(self) -> None:
        from toolkit import docker_api

        client = self._docker()
        reap_orphans(client)
        volumes = {h: {"bind": c, "mode": "ro"} for h, c in self.mounts.items()}
        env = dict(self.env)
        if self.jit_cache is not None:  # kept between containers: mounted read-write
            self.jit_cache.prepare()
            volumes[str(self.jit_cache.folder)] = {"bind": self.jit_cache.inside, "mode": "rw"}
            env = {**self.jit_cache.env(), **env}
        kw = dict(
            ipc_mode="host", shm_size=self.shm_size, network_mode=self.network, environment=env,
            device_requests=docker_api.gpu_requests(self.gpus), volumes=volumes,
            stop_signal=signal.Signals(STOP_SIGNAL).name,  # `docker stop` sends it to PID 1: the main process
            labels={LABEL: "1", f"{LABEL}.owner": f"{socket.gethostname()}:{os.getpid()}"},
        )
        if self.network != "host":
            kw["ports"] = {f"{self.container_port}/tcp": (self.host, self.port)}
        self.container = docker_api.run_detached(client, self.image, self.command, ulimits=self.ulimits, **kw)
        self._log_thread = threading.Thread(target=self._copy_logs, daemon=True)
        self._log_thread.start()

    def _copy_logs(self) -> None:
        """Stream the container's output into a local file, so the tail survives the container."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with open(self.log_path, "ab") as f:
                for chunk in self.container.logs(stream=True, follow=True):
                    f.write(chunk)
                    f.flush()
        except Exception:  # noqa: BLE001 - the container went away; the file has what came
            pass

    def stream_logs(self):
        """Yield the container's log lines as they come (until it exits)."""
        for line in self.container.logs(stream=True, follow=True):
            yield line.decode(errors="replace")

    def _poll_exit(self) -> int | None:
        if self._exit is not None or self.container is None:
            return self._exit
        try:
            self.container.reload()
        except Exception:  # noqa: BLE001 - removed under us
            self._exit = -1
            return self._exit
        if self.container.status in ("exited", "dead"):
            self._exit = int(self.container.attrs["State"]["ExitCode"])
        return self._exit

    def _terminate(self) -> None:
        """`docker stop`: the container's stop signal (STOP_SIGNAL) to its main process, then SIGKILL after
        stop_timeout_s; an exit code of 137 is that SIGKILL, noted as a warning."""
        if self.container is None:
            return
        self._stop_notes = {"signals": [f"{signal.Signals(STOP_SIGNAL).name} to the container's main process"],
                            "warnings": []}
        try:
            self.container.stop(timeout=self.stop_timeout_s)
        except Exception:  # noqa: BLE001 - already gone
            pass
        code = self._poll_exit()
        self._stop_notes["exit_code"] = code
        if code == 137:
            self._stop_notes["signals"].append("SIGKILL (docker)")
            self._stop_notes["warnings"].append(f"{self.name} did not exit within {self.stop_timeout_s} s of "
                                                f"{signal.Signals(STOP_SIGNAL).name}; docker killed it")
        if self._log_thread:
            self._log_thread.join(5)
        try:
            self.container.remove(force=True)
        except Exception:  # noqa: BLE001
            pass

    def log_tail(self, n: int = 40) -> str:
        if self.container is not None and not self._stopped:
            try:
                return self.container.logs(tail=n).decode(errors="replace").rstrip("\n")
            except Exception:  # noqa: BLE001 - fall back to the local copy
                pass
        return tail_lines(self.log_path, n)

    def stop_info(self) -> dict:
        return dict(self._stop_notes)

    def info(self) -> dict:
        c = self.container
        return {**super().info(), **self.sglang_info(), "image": self.image,
                "jit_cache": self.jit_cache.info() if self.jit_cache else None,
                "image_id": c.image.id if c is not None else None, "container": c.id if c is not None else None,
                "docker": self.docker_url or "local"}


def reap_orphans(client) -> list[str]:
    """Remove toolkit containers on this engine whose owning toolkit process (same host) is gone."""
    from toolkit.docker_api import containers_with_label

    removed = []
    for c in containers_with_label(client, LABEL):
        owner = c.labels.get(f"{LABEL}.owner", "")
        host, _, pid = owner.rpartition(":")
        if host == socket.gethostname() and pid.isdigit() and not _pid_alive(int(pid)):
            c.remove(force=True)
            removed.append(c.id)
    return removed


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# -- SGLang helpers for the runner ---------------------------------------------------------------

def server_info(base_url: str) -> dict:
    """/server_info (falls back to the deprecated /get_server_info); {} when the server has neither."""
    for path in ("/server_info", "/get_server_info"):
        status, body = http_get(base_url + path, timeout=10)
        if status == 200:
            try:
                return json.loads(body)
            except ValueError:
                return {}
    return {}


# What may differ between a preset and the server it started without meaning another server: the
# toolkit picks the port (and the bind address) when the preset leaves them out.
_NOT_COMPARED = {"host", "port"}


server_state = sglang.server_state  # moved to the engine (toolkit/engines/sglang.py); kept for callers


def _same(want, have) -> bool:
    if want is True or want is False:
        return bool(have) is want
    if isinstance(want, list):
        return isinstance(have, list) and [str(x) for x in want] == [str(x) for x in have]
    if isinstance(want, (int, float)) and not isinstance(have, bool):
        try:
            return float(want) == float(have)
        except (TypeError, ValueError):
            return False
    return str(want) == str(have)


def preset_mismatches(preset: dict, info: dict) -> list[dict]:
    """Flags of the preset whose value the server reports differently in /server_info (flag -> field name
    with dashes as underscores). A flag the server does not report is not judged."""
    out = []
    for flag, want in preset.items():
        name = flag.replace("-", "_")
        if name in _NOT_COMPARED or name not in info:
            continue
        if not _same(want, info[name]):
            out.append({"flag": flag, "preset": want, "server": info[name]})
    return out


def flush_cache(base_url: str, timeout_s: float = 60.0) -> bool:
    """POST /flush_cache until it succeeds (SGLang flushes only when idle), so acceptance counters restart."""
    deadline = time.monotonic() + timeout_s
    while True:
        req = urllib.request.Request(base_url + "/flush_cache", method="POST", data=b"")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:  # noqa: S310
                if r.status == 200:
                    return True
        except OSError:
            pass
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
