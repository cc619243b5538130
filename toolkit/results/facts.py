"""The key facts of a run, read from its manifest and summary (for list, show and report headers)."""

from __future__ import annotations

from toolkit.results.archive import Archive


def _gpu(host: dict) -> str | None:
    gpus = host.get("gpus") or host.get("gpu")
    if isinstance(gpus, list) and gpus:
        names = [g.get("name", "?") if isinstance(g, dict) else str(g) for g in gpus]
        first = names[0]
        return f"{len(names)}x {first}" if all(n == first for n in names) else ", ".join(names)
    if isinstance(gpus, str):
        return gpus
    return None


def host_of(manifest: dict) -> dict:
    host = manifest.get("host")
    if isinstance(host, dict):
        return host
    hosts = manifest.get("hosts")
    if isinstance(hosts, dict) and hosts:
        return next(iter(hosts.values())) or {}
    return {}


def run_facts(a: Archive) -> dict:
    m = a.manifest
    host = host_of(m)
    env = m.get("environment") or {}
    arms = sorted(set(c.arm for c in a.cells.values()) | set((m.get("arms") or {}).keys()))
    source = m.get("source") or {}
    return {
        "path": str(a.path),
        "run_id": a.run_id,
        "matrix": a.matrix_name,
        "started_at": m.get("started_at"),
        "finished_at": (a.summary or {}).get("finished_at"),
        "status": a.status,
        "env_hash": (env.get("hash") or "")[:12] or None,
        "environment": env.get("name") or (env.get("spec") or {}).get("name"),
        "host": host.get("hostname") or host.get("name"),
        "gpu": _gpu(host),
        "arms": arms,
        "cells": len(a.cells),
        "requests": sum(c.n_requests for c in a.cells.values()),
        "source": source.get("format", "toolkit"),
    }
