"""The key facts of a run, read from its manifest and summary (for list, show and report headers)."""

from __future__ import annotations

from toolkit.results.archive import Archive


def _fingerprints(m: dict) -> tuple[dict, dict]:
    """(the fingerprint of the host the arms ran on, every host's) from either manifest shape:
    `host: {controller, hosts: {name: fp}}` (the matrix runner) or `host: fp` / `hosts: {name: fp}`."""
    raw = m.get("host") if isinstance(m.get("host"), dict) else {}
    if "controller" in raw or "hosts" in raw:
        hosts = {k: v for k, v in (raw.get("hosts") or {}).items() if isinstance(v, dict)}
        primary = next(iter(hosts.values())) if hosts else (raw.get("controller") or {})
        return primary, hosts
    hosts = {k: v for k, v in (m.get("hosts") or {}).items() if isinstance(v, dict)}
    return raw or (next(iter(hosts.values())) if hosts else {}), hosts


def host_view(fp: dict) -> dict:
    """The fields of a fingerprint that matter for a comparison (no per-device serials or UUIDs)."""
    gpu = fp.get("gpu") if isinstance(fp.get("gpu"), dict) else {}
    gpus = fp.get("gpus") if isinstance(fp.get("gpus"), list) else gpu.get("gpus") or []
    names = [g.get("name") or g.get("product_name") or "?" if isinstance(g, dict) else str(g) for g in gpus]
    links = (gpu.get("topology") or {}).get("links") if isinstance(gpu.get("topology"), dict) else None
    view = {"hostname": fp.get("hostname"), "os": fp.get("os"), "kernel": fp.get("kernel"), "cpu": fp.get("cpu"),
            "cpu_count": fp.get("cpu_count"), "memory_bytes": fp.get("memory_bytes"),
            "driver": fp.get("driver") or gpu.get("driver_version"), "cuda": fp.get("cuda") or gpu.get("cuda_version"),
            "gpus": (f"{len(names)}x {names[0]}" if names and len(set(names)) == 1 else ", ".join(names)) or None,
            "gpu_links": sorted(set(links.values())) if isinstance(links, dict) and links else None}
    return {k: v for k, v in view.items() if v is not None}


def _image(rec: dict) -> dict:
    """From a build record: what identifies the image (not build timings, log paths or plans)."""
    if not isinstance(rec, dict):
        return {}
    keep = {"id": rec.get("id") or rec.get("image_id"), "tags": rec.get("tags"), "labels": rec.get("labels"),
            "sglang_version": rec.get("sglang_version"), "patches": rec.get("patches"), "revision": rec.get("revision"),
            "spec_hash": rec.get("spec_hash")}
    return {k: v for k, v in keep.items() if v}


def normalized(m: dict) -> dict:
    """One view of a manifest, whichever writer made it (matrix runner, import, older fields)."""
    env, mat = m.get("environment") or {}, m.get("matrix") or {}
    primary, hosts = _fingerprints(m)
    tk = m.get("toolkit") if isinstance(m.get("toolkit"), dict) else {}
    arms = {}
    for arm, info in (m.get("arms") or {}).items():
        info = info or {}
        arms[arm] = {"command": info.get("command"), "server_args": info.get("server_args") or info.get("preset") or {},
                     "request_params": info.get("request_params") or {}}
    return {
        "environment": {"name": env.get("name"), "hash": env.get("hash"), "spec": env.get("spec") or env.get("resolved") or {}},
        "matrix": {"name": mat.get("name"), "hash": mat.get("hash"), "spec": mat.get("spec") or mat.get("resolved") or {}},
        "image": _image(m.get("image") or m.get("build") or {}),
        "arms": arms,
        "host": host_view(primary),
        "hosts": {h: host_view(fp) for h, fp in hosts.items()} if len(hosts) > 1 else {},
        "engine_versions": m.get("engine_versions") or primary.get("engines") or {},
        "toolkit": {"version": m.get("toolkit_version") or tk.get("version"),
                    "git_sha": m.get("git_revision") or tk.get("git_sha")},
        "workloads": {k: (v.get("hash") if isinstance(v, dict) else v) for k, v in (m.get("workloads") or {}).items()},
        "source": m.get("source") or {},
    }


def run_facts(a: Archive) -> dict:
    n = normalized(a.manifest)
    m, host, env, source = a.manifest, n["host"], n["environment"], n["source"]
    arms = sorted(set(c.arm for c in a.cells) | set(n["arms"]))
    return {
        "path": str(a.path),
        "run_id": a.run_id,
        "matrix": a.matrix_name,
        "started_at": m.get("started_at"),
        "finished_at": (a.summary or {}).get("finished_at"),
        "status": a.status,
        "env_hash": (env.get("hash") or "")[:12] or None,
        "environment": env.get("name") or env["spec"].get("name"),
        "host": host.get("hostname"),
        "gpu": host.get("gpus"),
        "arms": arms,
        "cells": len(a.cells),
        "requests": sum(c.n_requests for c in a.cells),
        "source": source.get("format", "toolkit"),
    }
