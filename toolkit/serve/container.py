"""Servers in containers (docker SDK; the local socket or `ssh://host`): one container per arm from the image
`toolkit build env` built, running the engine's exact server command (Engine.server_command), its log streamed
to a local file, stopped with `docker stop` and removed. Each engine's container launcher is a subclass naming
its engine and stop signal (toolkit/serve/sglang.py, toolkit/serve/vllm.py); containers carry LABEL, and those
of a toolkit process that died are removed before the next one starts (reap_orphans).
"""

from __future__ import annotations

import os
import signal
import socket
import tempfile
import threading
from pathlib import Path

from toolkit.engines import Engine
from toolkit.fsutil import tail_lines
from toolkit.schema.manifest import ArmState, StopRecord
from toolkit.serve.base import BaseLauncher, free_port, with_port
from toolkit.serve.jitcache import JitCache

LABEL = "toolkit.launcher"


class ContainerLauncher(BaseLauncher):
    """One container per arm from an engine's image. network "host" (the server binds the host's port) or
    "bridge" (published port). A subclass names its `engine` (whose server_command and served_name make the
    container's command and the model requests carry), the signal `docker stop` sends and the wait after it."""

    name = "container"
    engine: Engine
    stop_signal: int = signal.SIGTERM
    stop_wait_s: float = 15.0

    def __init__(self, image: str, args: dict, *, docker_url: str | None = None, address: str | None = None,
                 gpus: str | int | list[str] | None = "all", shm_size: str = "32g", network: str = "host",
                 mounts: dict[str, str] | None = None, env: dict[str, str] | None = None, port: int | None = None,
                 log_path: Path | None = None, python: str = "python3",
                 ulimits: dict[str, int] | None = None, stop_timeout_s: int | None = None,
                 jit_cache: JitCache | None = None):
        self.image = image
        self.docker_url = docker_url
        address = address or (docker_url.split("@")[-1].split(":")[0].removeprefix("ssh://")
                              if docker_url and docker_url.startswith("ssh://") else "127.0.0.1")
        self.args, cport = with_port(args, port, "0.0.0.0" if network != "host" else address)
        super().__init__(address, cport if network == "host" else (port or free_port()))
        self.container_port = cport
        self.gpus, self.shm_size, self.network = gpus, shm_size, network
        self.mounts = dict(mounts or {})
        self.env = dict(env or {})
        # as SGLang's compose file (vLLM's docs run with ipc host alike); memlock needs a privileged engine (lower
        # it where that is refused)
        self.ulimits = {"memlock": -1, "stack": 67108864} if ulimits is None else dict(ulimits)
        self.command = self.engine.server_command(self.args, python)
        self.model = self.engine.served_name(self.args)
        self.log_path = log_path or Path(tempfile.mkdtemp(prefix=f"toolkit-{self.engine.name}-")) / "server.log"
        self.stop_timeout_s = int(self.stop_wait_s) if stop_timeout_s is None else stop_timeout_s
        self.jit_cache = jit_cache  # its `inside` is where the folder is mounted
        self._stop_notes: StopRecord | None = None
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
            stop_signal=signal.Signals(self.stop_signal).name,  # `docker stop` sends it to PID 1: the main process
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
        """`docker stop`: the container's stop signal (stop_signal) to its main process, then SIGKILL after
        stop_timeout_s; an exit code of 137 is that SIGKILL, noted as a warning."""
        if self.container is None:
            return
        notes: dict = {"signals": [f"{signal.Signals(self.stop_signal).name} to the container's main process"],
                       "warnings": []}
        try:
            self.container.stop(timeout=self.stop_timeout_s)
        except Exception:  # noqa: BLE001 - already gone
            pass
        code = self._poll_exit()
        notes["exit_code"] = code
        if code == 137:
            notes["signals"].append("SIGKILL (docker)")
            notes["warnings"].append(f"{self.name} did not exit within {self.stop_timeout_s} s of "
                                     f"{signal.Signals(self.stop_signal).name}; docker killed it")
        self._stop_notes = StopRecord(**notes)
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

    def stop_info(self) -> StopRecord | None:
        return self._stop_notes

    def info(self) -> ArmState:
        c = self.container
        return super().info().add(image=self.image, jit_cache=self.jit_cache.info() if self.jit_cache else None,
                                  image_id=c.image.id if c is not None else None,
                                  container=c.id if c is not None else None, docker=self.docker_url or "local")


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
