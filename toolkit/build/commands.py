"""`toolkit build ...`: a thin Typer shell over toolkit.build (preflight, builder, base image)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from toolkit.console import emit_json, err, out

app = typer.Typer(no_args_is_help=True, help="Build environment images with the Docker engine.")

JsonOpt = Annotated[bool, typer.Option("--json", help="print machine-readable JSON on stdout")]


def _client():
    from toolkit.build.docker_api import client

    return client()


@app.command("base")
def base_cmd(
    name: Annotated[str, typer.Option("--name", help="image tag to make")] = "toolkit/base:bookworm",
    suite: Annotated[str, typer.Option("--suite", help="Debian suite for debootstrap")] = "bookworm",
    mirror: Annotated[Optional[str], typer.Option("--mirror", help="Debian mirror (default: the one apt "
                                                  "uses on this machine, from /etc/apt/sources.list*)")] = None,
    rebuild: Annotated[bool, typer.Option("--rebuild", help="make it again even if the tag exists")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Make a local base image with debootstrap + `docker import` (no image registry needed).

    For air-gapped machines and CI: use it as `base_image: toolkit/base:bookworm` in a spec.
    Cached: an existing tag is reused unless --rebuild. Needs root (debootstrap) and a Docker engine.
    """
    from toolkit.build.base import ensure_base_image

    log = (lambda m: None) if json_out else (lambda m: err.print(m, markup=False))
    image = ensure_base_image(_client(), name=name, suite=suite, mirror=mirror, rebuild=rebuild, log=log)
    if json_out:
        emit_json({"name": name, "id": image})
    else:
        out.print(f"{name} {image}")
