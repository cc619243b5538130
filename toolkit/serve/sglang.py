"""SGLang launchers: a container from the image `toolkit build env` built (docker SDK; local socket or
`ssh://host`), or a plain process where SGLang is installed. The preset's args are rendered exactly
as `python -m sglang.launch_server --flag value ...`. Also the SGLang helpers a runner calls between
cells: /server_info, /metrics, /flush_cache.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from toolkit.engines import sglang
from toolkit.schema.manifest import ArmState
from toolkit.serve.container import LABEL, ContainerLauncher, reap_orphans  # noqa: F401 (their home: container.py)
from toolkit.serve.base import (BaseLauncher, ExternalLauncher, ProcessLauncher, free_port, http_get,  # noqa: F401
                                metrics_snapshot, parse_metrics, with_port)
from toolkit.serve.jitcache import JitCache
from toolkit.serve.stopping import ForceQuit, ShutdownDone

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


class SGLangMixin:
    base_url: str

    def flush_cache(self, timeout_s: float = 60.0) -> bool | None:
        """Before a cell: restart SGLang's cumulative counters (acceptance) and empty its prefix cache."""
        return flush_cache(self.base_url, timeout_s)

    def server_info(self) -> dict:  # json-edge: what the server answered
        return server_info(self.base_url)

    def info(self) -> ArmState:
        """The launcher's facts and what the server says about itself (its /server_info, kept whole as the extra
        `server_info` for the runner to archive)."""
        said = self.server_info()
        return super().info().add_state(server_state(said)).add(server_info=said)  # type: ignore[misc] - a mixin


class SGLangExternalLauncher(SGLangMixin, ExternalLauncher):
    """An SGLang server the toolkit does not manage: its /server_info is read, its caches are left alone
    (the server is someone else's; its cumulative counters then span cells)."""

    def flush_cache(self, timeout_s: float = 60.0) -> bool | None:
        return None


class SGLangProcessLauncher(SGLangMixin, ProcessLauncher):
    name = "sglang"
    stop_signal, stop_group = STOP_SIGNAL, False  # the main process ends its own children (see STOP_SIGNAL)
    force_quit, shutdown_done = FORCE_QUIT, SHUTDOWN_DONE

    def __init__(self, args: dict, *, python: str | None = None, port: int | None = None,
                 log_path: Path | None = None, env: dict | None = None, dummy_models: dict | None = None,
                 jit_cache: JitCache | None = None):
        args, port = with_port(args, port, "127.0.0.1")
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

    def info(self) -> ArmState:
        return super().info().add(jit_cache=self.jit_cache.info() if self.jit_cache else None)


class SGLangDockerLauncher(SGLangMixin, ContainerLauncher):
    """SGLang in a container (toolkit/serve/container.py): /server_info and /flush_cache as for any SGLang server
    the toolkit starts; stopped with STOP_SIGNAL to its main process."""

    name = "sglang container"
    engine = sglang.ENGINE
    stop_signal, stop_wait_s = STOP_SIGNAL, STOP_WAIT_S


# -- SGLang helpers for the runner ---------------------------------------------------------------

def server_info(base_url: str) -> dict:  # json-edge: what the server answered
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
