"""Power before spending: the line `bench matrix` prints before any server starts, saying how many launches
(and requests) per arm a comparison needs to find a given change at 80 % power, and what the planned run can
find (its minimum detectable effect), from the newest noise calibration (`toolkit bench noise`) of the same
environment under the results root, else the default launch CV. The formulas are toolkit/stats/planning.py
(power, launches_needed, requests_per_launch, mde_pct); docs/results.md#power-before-spending.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from toolkit.stats import (ALPHA, DEFAULT, POWER, Noise, launches_needed, machine_prior, mde_pct,
                           requests_per_launch)

CHANGE_PCT = 10.0
METRICS = ("ttft_ms", "tpot_ms")


def _noisiest(view, metric: str) -> Noise | None:
    arms = sorted({g[0] for g in view.groups})
    found = [n for n in (view.noise(a, metric) for a in arms) if n is not None]
    return max(found, key=lambda n: n.var, default=None)


def _request_var(view, metric: str) -> float | None:
    """The median over the calibration's cells of the variance of a request's log figure within one launch."""
    vs = []
    for g, keys in view.groups.items():
        for launch_keys in view.reader.by_launch(keys).values():
            x = view.reader.samples(launch_keys).get(metric)
            x = x[x > 0] if x is not None else np.empty(0)
            if len(x) > 2:
                vs.append(float(np.var(np.log(x), ddof=1)))
    return float(np.median(vs)) if vs else None


def plan_power(env_hash: str | None, launches: int, requests: int | None, root: Path,
               change_pct: float = CHANGE_PCT, env_name: str | None = None) -> str:
    """The plan's power line: per metric the launches per arm that find a change_pct change at POWER (two-sided
    alpha, log-ratio scale, each cell's own launch variance), the requests per launch beyond which more requests
    no longer help, the planned run's minimum detectable effect (its launches a side), and across machines;
    the launch CV's source named. A calibration the verdicts would refuse (a busy host; an older hash of the
    Environment `env_name`: toolkit.results.noise.refusal) is not used, and the line says why."""
    from toolkit.results.cells import CellReader
    from toolkit.results.noise import LaunchView, newest_calibration

    refused: list[str] = []
    cal = newest_calibration(root, env_hash, env_name, refused=refused)
    view = LaunchView(CellReader(cal), source=f"calibration {cal.run_id}") if cal is not None else None
    parts, source = [], "; ".join([view.source if view is not None else DEFAULT.text(), *refused])
    for metric in METRICS:
        noise = (_noisiest(view, metric) if view is not None else None) or DEFAULT
        need = launches_needed(noise, change_pct)
        n = max(1, launches)
        # the df the run's tests will have: each cell's own variance, 2 (n - 1), from 3 launches (or with no
        # calibration to borrow); a calibration's below that; the calibration's or the default's with one launch
        if n >= 3 or (n == 2 and view is None):
            noise = Noise(var=noise.var, df=float(2 * (n - 1)), source=noise.source)
        mde = mde_pct(noise, n)
        mde_x = mde_pct(noise, n, machine_var=machine_prior(metric).var)  # each side's machine effect added
        rv = _request_var(view, metric) if view is not None else None
        req = f", >= {requests_per_launch(rv, noise.var)} requests per cell-launch" if rv is not None else ""
        parts.append(f"{metric} (launch CV {noise.cv:.0%}): {need if need else '>64'} launches per arm{req}; "
                     f"this run ({launches} launch{'es' if launches != 1 else ''}"
                     f"{f', {requests} requests' if requests else ''}) detects {mde:.0f}% "
                     f"({mde_x:.0f}% against a run on another machine)")
    return (f"power: to find a {change_pct:g}% change with {POWER:.0%} power at alpha {ALPHA} (log ratio) -- "
            + "; ".join(parts) + f" [launch noise from {source}]")


__all__ = ["CHANGE_PCT", "plan_power"]
