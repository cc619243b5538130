"""Representativeness against acceptance: per domain (workload), the workload's distance from the drafter's
training sample (toolkit/workloads/represent.py: the divergence score, 0.75 x JS of the domain mix + 0.25 x JS of
the prompt-length bins, 0 = the same, 1 = disjoint) beside a real speculative arm's acceptance length there
(toolkit/results/surface.py real_acceptance: the mean accept_length of its unforced ok cells, weighted by n),
and Spearman's rank correlation of the two over the domains. One home: built here (`build`), rendered by
`results show`/`report`/`--json` (toolkit/results/report/run.py).

The distances come from the run's manifest (a Matrix with `training_data:`) or, with `--training-data FILE`,
are computed now from FILE and the run's own workload prompts (`from_training`: each workload reloaded as the
run loaded it and kept only where its hash matches the manifest's).

With a handful of domains the correlation is descriptive: no p-value is given (with n = 4 even a perfect rank
order has an exact two-sided p of 1/12).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

NOTE = ("distance: the workload's divergence from the drafter's training sample (0.75 x JS domain mix + 0.25 x "
        "JS prompt-length bins; 0 the same, 1 disjoint; close < 0.45 <= moderate < 0.65 <= far). accept: the real "
        "speculative arm's mean acceptance length over the domain's cells. Spearman's rho over domains (average "
        "ranks for ties): a negative rho means farther workloads accept less. Descriptive only: with this few "
        "domains no p-value is claimed.")


def _get(x: Any, key: str, default: Any = None) -> Any:
    return x.get(key, default) if isinstance(x, dict) else getattr(x, key, default)


def ranks(xs: list[float]) -> list[float]:
    """1-based ranks, ties given their average rank."""
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    out = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(xs: list[float], ys: list[float]) -> float | None:
    """Spearman's rank correlation (Pearson's r of the average ranks); None with fewer than 3 pairs or a
    constant side."""
    if len(xs) != len(ys) or len(xs) < 3:
        return None
    rx, ry = ranks(xs), ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx, syy = sum((a - mx) ** 2 for a in rx), sum((b - my) ** 2 for b in ry)
    return None if sxx == 0 or syy == 0 else sxy / (sxx * syy) ** 0.5


@dataclass
class Represented:
    """Representativeness against the real acceptance: rows {arm, domain, distance, verdict, accept_len}, per arm
    Spearman's rho over its domains {arm, n, rho}, where the distances came from, the note on reading them, and the
    workloads left out (None: none). The report's --json writes these fields in this order, `left_out` only when
    there are some."""

    rows: list[dict]
    spearman: list[dict]
    source: str
    note: str
    left_out: list[str] | None = None


def build(representativeness: list, acceptance: dict[tuple[str, str], float], source: str) -> Represented | None:
    """Rows per (arm, domain) where the workload has a distance and the arm an acceptance, and per arm the
    Spearman correlation over its domains. None when either input is missing. `source`: where the distances
    came from."""
    dist = {_get(r, "workload"): r for r in representativeness or [] if _get(r, "divergence") is not None}
    rows = [{"arm": arm, "domain": domain, "distance": float(_get(dist[domain], "divergence")),
             "verdict": _get(dist[domain], "verdict"), "accept_len": acc}
            for (arm, domain), acc in sorted(acceptance.items()) if domain in dist]
    if not rows:
        return None
    corr = []
    for arm in sorted({r["arm"] for r in rows}):
        rs = [r for r in rows if r["arm"] == arm]
        corr.append({"arm": arm, "n": len(rs), "rho": spearman([r["distance"] for r in rs],
                                                               [r["accept_len"] for r in rs])})
    return Represented(rows, corr, source, NOTE)


def from_training(a, training: Path) -> tuple[list[dict], list[str]]:
    """The representativeness of the run's workloads against the training file, computed now: each workload
    reloaded from the run's resolved Matrix (bundled names; files from the archived inputs) with its seed, kept
    where its content hash matches the manifest's. (records, notes on the workloads left out)."""
    from toolkit.errors import ToolkitError
    from toolkit.workloads.bundled import read_prompts

    training = Path(training)
    if not training.is_file():
        raise ToolkitError(f"--training-data {training}: no such file",
                           hint="a JSON lines sample of the drafter's training prompts (e.g. "
                                "`python -m toolkit.pair sample PREP OUT.jsonl`)")
    train = read_prompts(training)
    m = a.manifest
    spec = m.matrix.resolved or {}
    matrix_path = m.inputs.matrix if m.inputs is not None else None
    with tempfile.TemporaryDirectory(prefix="toolkit-inputs-") as tmp:
        base = _lay_out_inputs(a, Path(tmp)) / (Path(matrix_path).parent if matrix_path else Path("."))
        return _reloaded(spec, m, base, train, training.name)


def _lay_out_inputs(a, tree: Path) -> Path:
    """The run's archived inputs under tree in their layout, the bytes the run read (inputs/files/<path> or its
    session's store, NAME.gz once compacted: toolkit.results.compact), so its specs' relative paths resolve."""
    from toolkit.results.compact import exists, read_bytes, stored_at

    for f in (a.manifest.inputs.files if a.manifest.inputs is not None else []):
        rel = PurePosixPath(f.path)
        if rel.is_absolute() or ".." in rel.parts:
            continue  # not a place in the tree: nothing a spec of the run can name relatively
        src = stored_at(a.path, f)
        if f.archived and exists(src):
            dest = tree / f.path
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(read_bytes(src))
    return tree


def _reloaded(spec: dict, m, base: Path, train, train_name: str) -> tuple[list[dict], list[str]]:
    from toolkit.errors import ToolkitError
    from toolkit.specs.matrix import Workload
    from toolkit.workloads.loader import load_workload
    from toolkit.workloads.represent import representativeness

    out, notes = [], []
    for ref in spec.get("workloads") or []:
        ref = ref if isinstance(ref, str) else Workload.model_validate(ref)
        name = ref if isinstance(ref, str) else ref.name
        try:
            w = load_workload(ref, base_dir=base, seed=spec.get("seed", 0), output_len=spec.get("output_len", 128))
        except ToolkitError as e:
            notes.append(f"{name}: not reloaded ({e})")
            continue
        want = _get(m.workloads.get(w.name), "hash") if m.workloads else None
        if want is not None and want != w.hash:
            notes.append(f"{w.name}: the prompts reloaded now differ from the run's (hash {w.hash[:12]} vs "
                         f"{want[:12]}): left out")
            continue
        rep = representativeness(train, w.prompts, train_name=train_name, workload_name=w.name,
                                 workload_hash=w.hash)
        out.append({"workload": w.name, "verdict": rep.verdict, "divergence": rep.score, "reason": rep.reason})
    return out, notes
