"""`toolkit build env`: spec -> preflight -> render + hash -> (cache hit | docker build -> smoke) -> record.

The preflight is the engine's: SGLang's flags and patches against its pinned source (flag_check "build",
toolkit/image/preflight.py); an engine whose flags were checked when the spec loaded (vllm, flag_check
"load") has nothing left to fetch, and its smoke check is the pinned packages' versions in the image.

A bad patch or preset never reaches the engine: preflight runs first and touches no Docker. The one
exception is an unchanged spec whose build record says its preflight passed: then the engine is asked
for the image labelled with that spec hash, and a hit ends the command (a cache hit, well under 2 s).
An image with the hash but no record (another cache dir) is adopted after preflight: smoke check and
record, no build.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from toolkit import __version__, engines
from toolkit.image.preflight import preflight
from toolkit.image.records import builds_dir, find_build_record, write_build_record
from toolkit.gitinfo import git_revision
from toolkit.errors import ToolFailure
from toolkit.render import render_env
from toolkit.specs import load_spec

SPEC_HASH_LABEL = "dev.toolkit.spec-hash"


def image_repo(name: str) -> str:
    return f"toolkit/{name}"


@dataclass(frozen=True)
class BuildPlan:
    """What a build makes of a spec (the build record's and `--check`'s `plan`, asdict in this order): the image
    and its tags, the base, the engine and its pinned version, the build arguments, the presets, the patches as
    preflight applied them, and the warnings."""

    spec: str
    name: str
    spec_hash: str
    image: str
    tags: list[str]
    base_image: str
    engine: str
    engine_version: str | None
    sglang: str | None
    sglang_source: str | None
    build_args: dict[str, str]
    presets: list[str]
    patches: list[dict]
    warnings: list[str]


def _plan(spec, rendered, report) -> BuildPlan:
    env = spec.model
    h = rendered.hash
    return BuildPlan(
        spec=str(spec.path), name=env.name, spec_hash=h, image=f"{image_repo(env.name)}:{h[:12]}",
        tags=[f"{image_repo(env.name)}:{h[:12]}", f"{image_repo(env.name)}:latest"], base_image=env.base_image,
        engine=env.engine, engine_version=engines.get(env.engine).pinned_version(env),
        sglang=env.sglang.version if env.sglang else None, sglang_source=env.sglang.source if env.sglang else None,
        build_args=dict(env.build_args), presets=sorted(env.servers),
        patches=[{"name": p["name"], "sha256": p["sha256"], "layout": p["layout"], "files": p["files"],
                  "fuzz": p.get("fuzz", 0), "hunks": p.get("hunks", [])} for p in (report.patches if report else [])],
        warnings=list(spec.warnings) + (report.warnings if report else []))


@dataclass(frozen=True)
class LoadCheck:
    """The preflight of an engine whose presets were checked when the spec loaded (flag_check "load"), as the
    build record's `preflight` (asdict in this order): the engine and version, the mode and why, each preset's
    server command in the image."""

    engine: str
    engine_version: str | None
    flag_mode: str
    flag_mode_reason: str
    presets: dict[str, list[str]]
    patches: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def checked_at_load(spec) -> LoadCheck:
    """What was checked when the spec loaded, and each preset's server command in the image."""
    env = spec.model
    eng = engines.get(env.engine)
    return LoadCheck(engine=eng.name, engine_version=eng.pinned_version(env), flag_mode="load",
                     flag_mode_reason=f"checked when the spec loaded, against {eng.name} {eng.pinned_version(env)}'s "
                                      "own parser (docs/engines.md)",
                     presets={name: eng.server_command(dict(args), "python") for name, args in env.servers.items()})


# json-edge: build env --json; the build record file
def build_env(spec_path: Path, *, check: bool = False, no_cache: bool = False, push: str | None = None,
              flag_mode: str = "auto", log=print, on_step=None) -> dict:
    """Returns a result dict: {cache_hit, plan, preflight, record?}. Raises ToolkitError on any failure."""
    t0 = time.monotonic()
    spec = load_spec(spec_path, expect="Environment")
    rendered = render_env(spec)
    h = rendered.hash
    previous = None if (check or no_cache) else find_build_record(h)
    said = previous.model_extra if previous is not None else {}  # what the schema does not name: plan, preflight
    if said.get("preflight"):
        from toolkit import docker_api

        client = docker_api.client()
        hits = docker_api.images_with_label(client, SPEC_HASH_LABEL, h)
        if hits:
            rec = previous.model_dump(mode="json", exclude_unset=True)
            if hits[0].id != previous.image_id:  # same spec hash, built again elsewhere (e.g. --no-cache)
                labels = hits[0].labels
                rec.update(image_id=hits[0].id, labels=labels,
                           created=labels.get("org.opencontainers.image.created", rec.get("created")),
                           revision=labels.get("org.opencontainers.image.revision", rec.get("revision")))
            if push:
                rec["pushed"] = docker_api.push(client, hits[0].id, push, image_repo(spec.name), h[:12])
            return {"cache_hit": True, "seconds": round(time.monotonic() - t0, 3), "plan": said["plan"],
                    "preflight": said["preflight"], "record": rec}
    eng = engines.get(spec.model.engine)
    report = preflight(spec, flag_mode=flag_mode, log=log) if eng.flag_check == "build" else None
    plan = _plan(spec, rendered, report)
    checked = report.to_dict() if report else asdict(checked_at_load(spec))
    result = {"cache_hit": False, "plan": asdict(plan), "preflight": checked}
    if check:
        result["seconds"] = round(time.monotonic() - t0, 3)
        return result

    from toolkit import docker_api
    from toolkit.image.smoke import run_smoke, run_version_smoke

    client = docker_api.client()
    hits = [] if no_cache else docker_api.images_with_label(client, SPEC_HASH_LABEL, h)
    if hits:  # built before, but its record is gone (another cache dir, a cleaned cache): adopt it
        log(f"image {hits[0].id[:19]} already carries spec hash {h[:12]}: smoke check and record only")
        image_id, build_seconds, log_path = hits[0].id, 0.0, None
        created = hits[0].labels.get("org.opencontainers.image.created", "")
        revision = hits[0].labels.get("org.opencontainers.image.revision", "unknown")
    else:
        image_id, build_seconds, log_path, created, revision = _build(client, spec, rendered, plan,
                                                                     checked["flag_mode"], no_cache, log, on_step)
    image = client.images.get(image_id)
    for tag in plan.tags:
        repo, _, t = tag.rpartition(":")
        image.tag(repo, t)
    log(f"smoke check in a container from {plan.tags[0]}")
    smoke = (run_smoke(client, image_id, spec.model, report) if report else
             run_version_smoke(client, image_id, {p.name: p.version for p in spec.model.packages}))
    patches = report.patches if report else []
    record = {
        "kind": "BuildRecord", "image_id": image_id, "tags": plan.tags, "spec": str(spec.path.resolve()),
        "spec_name": spec.name, "spec_hash": h, "engine": eng.name, "engine_version": eng.pinned_version(spec.model),
        "sglang_version": spec.model.sglang.version if spec.model.sglang else None,
        "patches": {p["name"]: p["sha256"] for p in patches}, "labels": {**image.labels},
        # per patch: the fuzz the spec allowed and the hunks that used an offset or fuzz (empty: exact)
        "patch_fuzz": {p["name"]: {"allowed": p.get("fuzz", 0), "hunks": p.get("hunks", [])} for p in patches},
        "created": created, "revision": revision, "adopted": bool(hits),
        "build_seconds": round(build_seconds, 1), "duration_seconds": round(time.monotonic() - t0, 1),
        "log": str(log_path) if log_path else None, "no_cache": no_cache, "smoke": smoke, "plan": asdict(plan),
        "preflight": checked,
    }
    if smoke["failures"]:  # no record is written, so the next run builds again instead of a cache hit
        raise ToolFailure("smoke check of the image failed:\n  " + "\n  ".join(smoke["failures"]),
                          hint=f"build log: {log_path}" if log_path else "rebuild it with --no-cache")
    if push:
        record["pushed"] = docker_api.push(client, image_id, push, image_repo(spec.name), h[:12])
    write_build_record(record)
    result.update(record=record, cache_hit=bool(hits), seconds=round(time.monotonic() - t0, 3))
    return result


def _build(client, spec, rendered, plan, flag_mode, no_cache, log, on_step):
    """docker build of the rendered context; returns (image id, seconds, log path, created, revision)."""
    from toolkit import docker_api

    base_id = docker_api.local_image_id(client, spec.model.base_image)
    if base_id is None and spec.model.base_image.startswith("toolkit/base:"):
        raise spec.error(("base_image",), f"base image {spec.model.base_image} is not in the local engine",
                         hint=f"make it first: toolkit build base --name {spec.model.base_image}")
    if base_id is None:
        log(f"base image {spec.model.base_image} is not local: the engine will try to pull it")
    created = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    labels = {"org.opencontainers.image.created": created,
              "org.opencontainers.image.revision": git_revision(spec.path.resolve()) or "unknown",
              "dev.toolkit.toolkit-version": __version__, "dev.toolkit.flag-check": flag_mode}
    if base_id:
        labels["dev.toolkit.base.image-id"] = base_id
    log_path = builds_dir() / "logs" / f"{spec.name}-{rendered.hash[:12]}-{created.replace(':', '')}.log"
    with tempfile.TemporaryDirectory(prefix="toolkit-build-") as ctx:
        rendered.write(Path(ctx))
        tb = time.monotonic()
        image_id = docker_api.build(client, Path(ctx), plan.tags[0], buildargs=dict(spec.model.build_args),
                                    labels=labels, nocache=no_cache, log_path=log_path, on_step=on_step)
        build_seconds = time.monotonic() - tb
    return image_id, build_seconds, log_path, created, labels["org.opencontainers.image.revision"]
