"""The one place that talks to the Docker engine (docker SDK), for the image stage (build, smoke run,
push) and the serve stage (SGLang containers, on this machine or a host over ssh://)."""

from __future__ import annotations

import re
from pathlib import Path

from toolkit.errors import ToolFailure, ToolkitError
from toolkit.settings import settings


def _sdk():
    from toolkit.extras import require_module

    return require_module("docker", "docker", "talking to the Docker engine")


def client(url: str | None = None, timeout: int = 900):
    """A docker SDK client that answers: the engine at `url` (ssh://user@host:port, tcp://, unix://), else
    this machine's (DOCKER_HOST, else the local socket). Otherwise a one-line ToolkitError saying how."""
    docker = _sdk()
    where = url or settings().docker_host
    try:
        c = docker.DockerClient(base_url=url, timeout=timeout) if url else docker.from_env(timeout=timeout)
        c.ping()
        return c
    except Exception as exc:  # noqa: BLE001 - any failure means no usable engine
        reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        hint = ("check the ssh:// address, that the host runs dockerd and that its user may use docker"
                if url and url.startswith("ssh://") else "start dockerd, or set DOCKER_HOST to an engine that runs")
        raise ToolkitError(f"no Docker engine answers at {where} ({reason}): {hint}") from None  # one line


def gpu_requests(gpus: str | int | list[str] | None) -> list | None:
    """Device requests for `gpus`: None (no GPU), "all", a count, or a list of device ids."""
    docker = _sdk()
    if gpus is None:
        return None
    if gpus == "all":
        return [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])]
    if isinstance(gpus, int):
        return [docker.types.DeviceRequest(count=gpus, capabilities=[["gpu"]])]
    return [docker.types.DeviceRequest(device_ids=[str(g) for g in gpus], capabilities=[["gpu"]])]


def run_detached(client, image: str, command: list[str], *, ulimits: dict[str, int] | None = None, **kw):
    """Start a container in the background and return it; a missing image or a refused start is a
    ToolFailure that says what to do. `kw` goes to containers.run (network_mode, environment, ...)."""
    docker = _sdk()
    limits = [docker.types.Ulimit(name=k, soft=v, hard=v) for k, v in (ulimits or {}).items()]
    try:
        return client.containers.run(image, command=command, detach=True, ulimits=limits, **kw)
    except docker.errors.ImageNotFound:
        raise ToolFailure(f"image {image} is not on the Docker engine",
                          hint="build it first: toolkit build env SPEC") from None
    except docker.errors.APIError as exc:
        raise ToolFailure(f"docker could not start {image}: {exc.explanation or exc}") from None


def containers_with_label(client, label: str) -> list:
    return client.containers.list(all=True, filters={"label": label})


def images_with_label(client, key: str, value: str) -> list:
    return client.images.list(filters={"label": f"{key}={value}"})


def local_image_id(client, ref: str) -> str | None:
    """The id of the image `ref` on the engine, or None."""
    try:
        return client.images.get(ref).id
    except _sdk().errors.ImageNotFound:
        return None


STEP_RE = re.compile(r"^Step (\d+)/(\d+) : (.*)")
ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")


def build(client, context: Path, tag: str, *, buildargs: dict, labels: dict, nocache: bool, log_path: Path,
          on_step=None) -> str:
    """Build with the engine's (legacy) builder in host network mode; stream every line to log_path,
    report `Step k/N` through on_step(k, n, text); return the image id or raise ToolFailure."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    image_id, tail = None, []
    with open(log_path, "w", encoding="utf-8") as log:
        try:
            stream = client.api.build(path=str(context), tag=tag, rm=True, forcerm=True, nocache=nocache,
                                      network_mode="host", buildargs=buildargs, labels=labels, decode=True,
                                      pull=False)
            for chunk in stream:
                if "error" in chunk or "errorDetail" in chunk:
                    msg = chunk.get("error") or chunk["errorDetail"].get("message", "")
                    log.write(f"ERROR: {msg}\n")
                    lines = [ANSI_RE.sub("", t).rstrip() for t in tail]
                    lines = [t for t in lines if t.strip()][-15:]
                    raise ToolFailure(f"docker build failed: {ANSI_RE.sub('', msg).strip()}\n  " + "\n  ".join(lines),
                                      hint=f"full log: {log_path}")
                if "aux" in chunk and isinstance(chunk["aux"], dict) and chunk["aux"].get("ID"):
                    image_id = chunk["aux"]["ID"]
                text = chunk.get("stream") or chunk.get("status") or ""
                if not text:
                    continue
                log.write(text if text.endswith("\n") else text + "\n")
                tail.append(text if text.endswith("\n") else text + "\n")
                del tail[:-40]
                if on_step and (m := STEP_RE.match(text.strip())):
                    on_step(int(m.group(1)), int(m.group(2)), m.group(3))
        except ToolFailure:
            raise
        except Exception as exc:  # noqa: BLE001 - engine/API errors become tool failures
            raise ToolFailure(f"docker build failed: {exc}", hint=f"full log: {log_path}") from None
    if image_id is None:
        image_id = local_image_id(client, tag)
    if image_id is None:
        raise ToolFailure("docker build ended without an image", hint=f"full log: {log_path}")
    return image_id


def run_python(client, image: str, code: str, environment: dict, gpus: bool = False,
               timeout: float = 300) -> tuple[int, str]:
    """Run `python -c CODE` in a throw-away container without network; return (exit code, output)."""
    kw = {}
    if gpus:
        kw["device_requests"] = gpu_requests("all")
    container = client.containers.create(image, ["python", "-c", code], environment=environment,
                                         network_mode="none", **kw)
    try:
        container.start()
        result = container.wait(timeout=timeout)
        output = container.logs(stdout=True, stderr=True).decode("utf-8", "replace")
        return int(result.get("StatusCode", 1)), output
    finally:
        container.remove(force=True)


def push(client, image_id: str, registry: str, repo: str, tag: str) -> str:
    """Tag image_id as REGISTRY/repo:tag and push it; return the pushed reference."""
    target = f"{registry.rstrip('/')}/{repo}"
    client.images.get(image_id).tag(target, tag)
    for chunk in client.images.push(target, tag, stream=True, decode=True):
        if "error" in chunk:
            raise ToolFailure(f"docker push {target}:{tag} failed: {chunk['error']}",
                              hint="log in first (`docker login REGISTRY`) and check the registry address")
    return f"{target}:{tag}"
