"""`toolkit build ...`: a thin Typer shell over toolkit.image (preflight, builder, base image)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from toolkit.console import JsonOpt, emit_json, err, out

app = typer.Typer(no_args_is_help=True, help="Build environment images with the Docker engine.")



def _client():
    from toolkit.docker_api import client

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
    from toolkit.image.base import ensure_base_image

    log = (lambda m: None) if json_out else (lambda m: err.print(m, markup=False))
    image = ensure_base_image(_client(), name=name, suite=suite, mirror=mirror, rebuild=rebuild, log=log)
    if json_out:
        emit_json({"name": name, "id": image})
    else:
        out.print(f"{name} {image}")


@app.command("env")
def env_cmd(
    spec: Annotated[Path, typer.Argument(help="an Environment spec of an engine with an image (sglang, vllm)")],
    check: Annotated[bool, typer.Option("--check", help="preflight and print the plan; touch no Docker engine")] = False,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="build every layer again, ignore the spec-hash cache")] = False,
    push: Annotated[Optional[str], typer.Option("--push", metavar="REGISTRY",
                                                help="after the build, push as REGISTRY/toolkit/NAME:HASH12")] = None,
    flags: Annotated[str, typer.Option("--flags", help="flag check: auto (SGLang's own parser when it imports, "
                                       "else read from the source), exact, static")] = "auto",
    json_out: JsonOpt = False,
) -> None:
    """Build the image of an Environment spec, after a preflight that fails before Docker is touched.

    Preflight: fetch the pinned SGLang (wheel via pip download, cached; or git), apply the spec's
    patches in order to a scratch copy with no fuzz (a failing hunk, or one that needs fuzz, names
    patch, hunk, file and line; `fuzz: N` on a patch in the spec allows N), byte-compile every
    touched file (a syntax error names file and line), verify patch sha256s, and check every server
    preset's flags and values against that SGLang + patches (names exact, closest flag suggested).
    vLLM: its presets were checked when the spec loaded (against the pinned vLLM's parser table); the
    Dockerfile installs the spec's `packages:` (torch, vllm) and the smoke check reads their versions.

    Then: render + spec hash; an image labelled with that hash is a cache hit. Otherwise a docker
    build (host network, streamed progress, OCI labels), a smoke check in a container, and a build
    record in ~/.cache/toolkit/builds/<spec_hash>.json.

    \b
    Examples:
      toolkit build env envs/sglang-cu13-blackwell.yaml --check
      toolkit build env envs/test/sglang-cpu-test.yaml --json
      toolkit build env envs/vllm-0.24.0-pair.yaml --check
    """
    from toolkit.image.builder import build_env

    log = (lambda m: None) if json_out else (lambda m: err.print(m, markup=False))
    with _StepProgress(enabled=not json_out) as progress:
        result = build_env(spec, check=check, no_cache=no_cache, push=push, flag_mode=flags, log=log,
                           on_step=progress.step)
    if json_out:
        emit_json(result)
        return
    _print_result(result, check)


class _StepProgress:
    """`Step k/N` of the docker build as a rich progress bar (plain lines when not a terminal)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled, self.progress, self.task = enabled, None, None

    def __enter__(self):
        return self

    def step(self, k: int, n: int, text: str) -> None:
        if not self.enabled:
            return
        if err.is_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            if self.progress is None:
                self.progress = Progress(TextColumn("build"), BarColumn(), MofNCompleteColumn(),
                                         TimeElapsedColumn(), TextColumn("{task.description}"), console=err)
                self.progress.start()
                self.task = self.progress.add_task("", total=n)
            self.progress.update(self.task, completed=k - 1, description=text[:70])
        else:
            err.print(f"step {k}/{n}: {text[:110]}", markup=False)

    def __exit__(self, *exc) -> None:
        if self.progress is not None:
            self.progress.stop()


def _print_result(result: dict, check: bool) -> None:
    from toolkit.console import warn

    plan, pf = result["plan"], result["preflight"]
    for w in plan.get("warnings", []):
        warn(w)
    out.print(f"spec       {plan['spec']}  ({plan['name']})")
    out.print(f"spec hash  {plan['spec_hash']}")
    if pf["flag_mode"] == "load":  # an engine checked when its spec loaded (vllm)
        out.print(f"{pf['engine']:<10} {pf['engine_version']}; flags {pf['flag_mode_reason']}")
        out.print(f"presets    ok: {', '.join(plan['presets'])}")
    else:
        _print_sglang(plan, pf)
    if check:
        out.print(f"plan       build {plan['image']} FROM {plan['base_image']} (no Docker touched: --check)")
        return
    rec = result["record"]
    if result["cache_hit"]:
        out.print(f"cache hit  {plan['image']} {rec['image_id'][:19]} in {result['seconds']:.2f} s")
    else:
        smoke = rec["smoke"]
        out.print(f"built      {', '.join(rec['tags'])}  {rec['image_id'][:19]}  in {rec['build_seconds']:.0f} s")
        if "versions" in smoke:
            out.print("smoke      " + ", ".join(f"{k} {v}" for k, v in smoke["versions"].items()) + " installed")
        else:
            out.print(f"smoke      sglang {smoke.get('sglang_version')}, {smoke.get('patched_files_checked', 0)} "
                      f"patched file(s) verified, presets parsed by SGLang: {smoke.get('presets_parsed_by_sglang')}")
        for note in smoke.get("notes", []):
            out.print(f"           note: {note}")
        out.print(f"log        {rec['log']}")
    if rec.get("pushed"):
        out.print(f"pushed     {rec['pushed']}")


def _print_sglang(plan: dict, pf: dict) -> None:
    out.print(f"sglang     {pf['sglang_version']} ({pf['source']}), {len(pf['patches'])} patch(es) apply and compile")
    for p in pf["patches"]:
        fuzz = f", fuzz allowed: {p['fuzz']}" if p.get("fuzz") else ""
        out.print(f"  patch    {p['name']}  sha256:{p['sha256'][:16]}…  {p['layout']} layout, "
                  f"{len(p['files'])} file(s){fuzz}")
    out.print(f"flags      {pf['flag_mode']} check, {pf['flag_count']} flags; presets ok: {', '.join(plan['presets'])}")
    if pf.get("flag_mode_reason") and pf["flag_mode"] == "static":
        out.print(f"           ({pf['flag_mode_reason']})")


@app.command("parser-deps")
def parser_deps_cmd() -> None:
    """Install the light packages SGLang's own argument parser needs to import (triton, msgspec, pyzmq,
    pybase64, orjson, IPython) into ~/.cache/toolkit/parser-deps, so preflight checks flags exactly.

    About 1 GB (mostly triton). Without them preflight reads the flags statically from the source."""
    from toolkit.image.source import install_parser_deps

    target = install_parser_deps(log=lambda m: err.print(m, markup=False))
    out.print(f"installed into {target}")
