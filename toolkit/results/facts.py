"""The key facts of a run, read from its typed manifest and summary (for list, show and report headers),
and the comparable view of a manifest that the environment diff flattens."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from toolkit.errors import ToolkitError
from toolkit.results.archive import Archive, open_archive
from toolkit.schema.manifest import BuildRecord, CommandError, Fingerprint, Manifest


def gpu_model(fp: Fingerprint) -> str | None:
    """A fingerprint's GPUs as `results list` names them ("2x NVIDIA H100 80GB HBM3"; several models: their
    names joined), None without any: what noise calibrations and reproductions are matched on."""
    names = [g.name or "?" for g in fp.devices]
    return (f"{len(names)}x {names[0]}" if names and len(set(names)) == 1 else ", ".join(names)) or None


def host_view(fp: Fingerprint) -> dict:  # json-edge: the view envdiff flattens (normalized's `host`)
    """The fields of a fingerprint that matter for a comparison (no per-device serials or UUIDs)."""
    gpu = fp.gpu
    links = gpu.topology.links if gpu is not None and gpu.topology is not None else None
    view = {"hostname": fp.hostname, "os": fp.os, "kernel": fp.kernel, "cpu": fp.cpu, "cpu_count": fp.cpu_count,
            "memory_bytes": fp.memory_bytes, "driver": fp.driver or (gpu.driver_version if gpu else None),
            "cuda": fp.cuda or (gpu.cuda_version if gpu else None), "gpus": gpu_model(fp),
            "gpu_links": sorted(set(links.values())) if isinstance(links, dict) and links else None,
            "env": dict(fp.env) or None}
    return {k: v for k, v in view.items() if v is not None}


def _image(rec: BuildRecord | None) -> dict:  # json-edge: the view envdiff flattens
    """From a build record: what identifies the image (not build timings, log paths or plans)."""
    if rec is None:
        return {}
    keep = {"id": rec.id or rec.image_id, "tags": rec.tags, "labels": rec.labels, "sglang_version": rec.sglang_version,
            "patches": rec.patches, "revision": rec.revision, "spec_hash": rec.spec_hash}
    return {k: v for k, v in keep.items() if v}


def _command(c: str | list[str] | CommandError | None) -> str | list[str] | dict | None:
    """An arm's command as the manifest holds it ({error} where no launcher could be made)."""
    return c.model_dump(mode="json") if isinstance(c, CommandError) else c


def normalized(m: Manifest) -> dict:  # json-edge: the view envdiff flattens
    """The comparable view of a manifest (what the environment diff flattens and reports print)."""
    primary, hosts = m.host.primary, m.host.hosts
    return {
        "environment": {"name": m.environment.name, "hash": m.environment.hash, "spec": m.environment.resolved},
        "matrix": {"name": m.matrix.name, "hash": m.matrix.hash, "spec": m.matrix.resolved},
        "image": _image(m.build),
        "arms": {arm: {"command": _command(a.command), "server_args": a.preset, "request_params": a.request_params,
                       **({"environment": {"name": a.environment.name, "hash": a.environment.hash,
                                           "engine": a.environment.engine}} if a.environment is not None else {})}
                 for arm, a in m.arms.items()},
        "host": host_view(primary),
        "hosts": {h: host_view(fp) for h, fp in hosts.items()} if len(hosts) > 1 else {},
        "engine_versions": m.engine_versions or dict(primary.engines),
        "toolkit": {"version": m.toolkit.version, "git_sha": m.toolkit.git_sha},
        "workloads": {k: w.hash for k, w in m.workloads.items()},
        "source": m.source.model_dump(mode="json", exclude_none=True) if m.source else {},
    }


@dataclass
class RunFacts:
    """The key facts of one run, as list, show, diff and report headers print them (their --json: asdict, in
    this order)."""

    path: str
    run_id: str
    matrix: str
    started_at: str | None
    finished_at: str | None
    status: str
    why: str  # why the run is not complete ("" when it is)
    interrupted: bool | None
    cells_failed: int
    env_hash: str | None
    environment: str | None
    host: str | None
    gpu: str | None
    arms: list[str]
    cells: int
    requests: int
    source: str


def run_facts(a: Archive) -> RunFacts:
    m = a.manifest
    env = m.environment
    return RunFacts(
        path=str(a.path), run_id=a.run_id, matrix=a.matrix_name, started_at=m.started_at,
        finished_at=a.summary.finished_at if a.summary else None, status=a.status, why=a.why,
        interrupted=a.interrupted if a.summary is not None else None,
        cells_failed=sum(c.status != "ok" for c in a.cells), env_hash=(env.hash or "")[:12] or None,
        environment=env.name or env.resolved.get("name"), host=m.host.primary.hostname,
        gpu=gpu_model(m.host.primary),
        arms=sorted(set(c.arm for c in a.cells) | set(m.arms)), cells=len(a.cells),
        requests=sum(c.n_requests for c in a.cells), source=m.source.format if m.source else "toolkit")


def list_runs(root: str | Path = "results", matrix: str | None = None) -> list[dict]:
    """Key facts of every run under root (newest first). A corrupt run is listed with its error; `unverified`:
    the files whose SHA256SUMS line does not match (tampered, truncated; `results verify` checks the rest)."""
    from toolkit.results.verify import verify_sums

    root = Path(root)
    rows = []
    for manifest in sorted(root.glob("*/*/manifest.json")):
        run = manifest.parent
        if matrix and run.parent.name != matrix:
            continue
        try:
            a = open_archive(run)
            rows.append({**asdict(run_facts(a)), "unverified": [str(p) for p in verify_sums(run, a.status if a.summary
                                                                                     else None)]})
        except ToolkitError as exc:
            rows.append({"path": str(run), "run_id": run.name, "matrix": run.parent.name, "status": "corrupt",
                         "error": exc.message})
    rows.sort(key=lambda r: (r.get("started_at") or "", r["run_id"]), reverse=True)
    return rows
