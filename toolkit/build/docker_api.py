"""The one place that talks to the Docker engine (docker SDK): client, build, run, labels."""

from __future__ import annotations

from toolkit.errors import ToolFailure


def client(timeout: int = 900):
    """A docker SDK client that answers, or a ToolFailure saying how to get one."""
    try:
        import docker

        c = docker.from_env(timeout=timeout)
        c.ping()
        return c
    except Exception as exc:  # noqa: BLE001 - any failure means no usable engine
        raise ToolFailure(f"no Docker engine answers: {exc}",
                          hint="start dockerd (tests/run.sh starts one as root) or set DOCKER_HOST") from None
