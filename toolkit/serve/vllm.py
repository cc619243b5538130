"""vLLM's launchers: a process, `vllm serve MODEL --flag value ...` where vLLM is installed (the target's `python`,
run as `python -m vllm.entrypoints.cli.main`, the module the `vllm` script calls), its log to a file, healthy
when /health answers 200 and /v1/models lists the name it serves, stopped by SIGTERM to the API server, and
its own last error line when it dies; or a container of the image `toolkit build env` built, running the same
command (VLLMDockerLauncher, toolkit/serve/container.py). Also the vLLM helpers a runner could call between cells: /version,
/server_info (dev mode only), /metrics.

Read from vLLM 0.24.0's source (no GPU run of it yet):
- entrypoints/cli/main.py: the `vllm` console script's `main`; `serve` takes MODEL as its positional.
- entrypoints/launcher.py:95-125: SIGINT and SIGTERM to the API server set its shutdown event; it stops the
  engine client (drain, or abort with shutdown_timeout 0), so the engine core processes end with it: the
  leader alone is signalled, the group only if it has not exited within STOP_WAIT_S.
- entrypoints/serve/instrumentator/basic.py: /version -> {"version": ...}; /health is 200 once the engine
  core answers; entrypoints/serve/dev/server_info/api_router.py: /server_info only with VLLM_SERVER_DEV_MODE=1.
"""

from __future__ import annotations

import json
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from toolkit.engines import vllm
from toolkit.errors import ToolFailure
from toolkit.schema.manifest import ArmState
from toolkit.serve.base import ProcessLauncher, http_get, metrics_snapshot, with_port
from toolkit.serve.container import ContainerLauncher

STOP_SIGNAL = signal.SIGTERM
STOP_WAIT_S = 30.0   # a drain waits for running requests; the runner stops a server between cells, idle
MODELS_PATH = "/v1/models"


# the preset's command line is the engine's to say (toolkit/engines/vllm.py)
render_args, vllm_command = vllm.render_args, vllm.command


class VLLMMixin:
    """What every vLLM server the toolkit starts has: its own last error line, health as /health then
    /v1/models listing the served name, /version and the dev-mode /server_info."""

    base_url: str
    model: str | None

    def last_error(self, log: str) -> str | None:
        return vllm.last_error_line(log)

    def wait_healthy(self, timeout_s: float = 300.0, progress: Callable[[str], None] | None = None) -> None:
        """/health 200 (the engine core answers), then /v1/models listing the served name (the front end
        routes requests), both before the deadline and while the server lives."""
        t0 = time.monotonic()
        super().wait_healthy(timeout_s, progress)
        url = self.base_url + MODELS_PATH
        while True:
            self.check_alive(during="start-up")
            status, body = http_get(url, timeout=2.0)
            if status == 200 and served_models(body) and (self.model is None or self.model in served_models(body)):
                return
            if time.monotonic() - t0 > timeout_s:
                tail = self.log_tail(20)
                self.stop()
                raise ToolFailure(f"vllm answered /health but {url} did not list {self.model!r} within "
                                  f"{timeout_s:.0f} s (last status {status or 'unreachable'})",
                                  hint=f"last lines of its log:\n{tail}")
            time.sleep(0.2)

    def server_info(self) -> dict:  # json-edge: what the server answered
        return server_info(self.base_url)

    def info(self) -> ArmState:
        said = self.server_info()
        return super().info().add_state(vllm.server_state(said)).add(server_info=said)  # type: ignore[misc] - a mixin


class VLLMProcessLauncher(VLLMMixin, ProcessLauncher):
    name = "vllm"
    stop_signal, stop_group = STOP_SIGNAL, False  # the API server ends its engine core itself

    def __init__(self, args: dict, *, python: str | None = None, port: int | None = None,
                 log_path: Path | None = None, env: dict | None = None):
        args, port = with_port(args, port, "127.0.0.1")
        log_path = log_path or Path(tempfile.mkdtemp(prefix="toolkit-vllm-")) / "server.log"
        super().__init__(vllm_command(args, python or sys.executable), log_path=log_path, env=env, port=port,
                         stop_timeout_s=STOP_WAIT_S)
        self.model = vllm.served_name(args)
        self.reads = set(vllm.meaning(args).reads)


class VLLMDockerLauncher(VLLMMixin, ContainerLauncher):
    """vLLM in a container of the image `toolkit build env` built (toolkit/serve/container.py): `python -m
    vllm.entrypoints.cli.main serve MODEL ...` as its command, `docker stop` sending SIGTERM to the API server
    (its main process), which ends its engine core itself."""

    name = "vllm container"
    engine = vllm.ENGINE
    stop_signal, stop_wait_s = STOP_SIGNAL, STOP_WAIT_S

    def __init__(self, image: str, args: dict, **kw):
        super().__init__(image, args, **kw)
        self.reads = set(vllm.meaning(self.args).reads)


def served_models(body: bytes) -> list[str]:
    try:
        return [m.get("id") for m in json.loads(body).get("data", []) if isinstance(m, dict)]
    except (ValueError, AttributeError):
        return []


def server_info(base_url: str) -> dict:  # json-edge: what the server answered
    """/version merged with /server_info?config_format=json where the server has it (dev mode): {} when it
    answers neither."""
    out: dict = {}
    status, body = http_get(base_url + "/version", timeout=5)
    if status == 200:
        try:
            out.update(json.loads(body))
        except ValueError:
            pass
    status, body = http_get(base_url + "/server_info?config_format=json", timeout=5)
    if status == 200:
        try:
            got = json.loads(body)
            out["vllm_config"] = got.get("vllm_config") if isinstance(got, dict) else None
        except ValueError:
            pass
    return out


def acceptance_counters(base_url: str) -> dict[str, float] | None:  # data-keyed: /metrics series names
    """The server's spec-decode counters now (toolkit.engines.vllm.acceptance_counters)."""
    return vllm.acceptance_counters(metrics_snapshot(base_url))
