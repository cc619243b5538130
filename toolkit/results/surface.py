"""The speed-up surface of a run with synthetic-acceptance arms (the Matrix's `synthetic_acceptance:`,
docs/bench.md#synthetic-acceptance), and the speed-up it predicts from a real acceptance length. One home:
the table is built here once (`build`), then rendered by `results show`/`report`/`--json`
(toolkit/results/report/run.py) and plotted (toolkit/results/plots.py surface_plot).

- Surface: the run's own speed-up rows (toolkit/results/speedups.py: the paired, launch-aware ratio over the
  baseline and its 95% CI, under the verdicts' rule of what a verdict may use), indexed by (speculative arm,
  domain, forced acceptance length, load level). With two or more domains, a `pooled` domain per (arm, length,
  level): the mean of the domains' ratios, its interval the envelope of theirs (lowest low, highest high): conservative, for domains
  the surface was not measured on.
- Prediction: a real acceptance length per (arm, domain, level) (the mean accept_length of the real speculative
  arm's cells there, weighted by their requests; where that level has none, the domain's mean over its levels,
  said so in the row's `accept_from`), at each level linear in acceptance between the two nearest measured
  lengths; the interval's endpoints go through the same interpolation (the acceptance's own uncertainty is not
  carried). Outside the measured lengths: refused, never extrapolated.
- Predicted crossover: the lowest level from which the predicted interval lies below 1 at that level and
  every higher one (the run crossover's rule, toolkit/results/verdicts.py); "pays at every level" when the
  predicted interval lies above 1 everywhere.
- Check: where real speed-ups were measured for that arm, domain and level, predicted vs measured: the error
  (predicted / measured - 1) with an interval (the predicted interval's and the measured CI's half-widths on the
  log scale, each taken as a 95% normal interval, added in quadrature) and a verdict against GOAL_PCT, fixed
  before the data: within when the whole error interval lies inside +-GOAL_PCT, off when it lies wholly
  outside, inconclusive otherwise. A summary counts the verdicts and gives the median |error|.
  Like with like only: a measured speed-up no verdict may use (toolkit/schema/eligibility.py: a stall, unequal
  work, ...) is `left out`, and so is a cell where the two runs' baselines answered more than WORK_TOLERANCE
  apart in output tokens a request (`other work`: the surface measured answers of another length than the run it
  is checked against, e.g. a pooled surface of long answers predicting short ones); neither gets a verdict or
  counts in the summary's error.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

from toolkit.schema.keys import level_label
from toolkit.stats import error_interval

POOLED = "pooled"
GOAL_PCT = 15.0  # the prediction's goal (issue 41): |predicted / measured - 1| within 15 %, fixed before the data
VERDICT_RULE = (f"within {GOAL_PCT:g} %: the whole error interval lies inside +-{GOAL_PCT:g} %; off: it lies wholly "
                f"outside; inconclusive: it straddles +-{GOAL_PCT:g} %. Error interval: exp(ln(predicted / measured) "
                "+- sqrt(hp^2 + hm^2)) - 1, hp and hm the half-widths on the log scale of the predicted interval "
                "and of the measured 95% CI, each taken as a 95% normal interval")
HOW = ("linear in acceptance between the two nearest measured lengths at each level; the interval's endpoints "
       "interpolated the same way (the measured acceptance's own uncertainty is not carried); outside the measured "
       "lengths no prediction is made (never extrapolated)")


def _get(x: Any, key: str, default: Any = None) -> Any:
    return x.get(key, default) if isinstance(x, dict) else getattr(x, key, default)


def _level(r: Any) -> float:
    rate = _get(r, "rate")
    return float(rate) if rate is not None else float(_get(r, "concurrency"))


def of_arm(run_arm: str, manifest_arms: dict | None = None) -> str:
    """The speculative arm (server preset) a synthetic run arm runs: its manifest record's `of`, else the name
    before `-synacc`."""
    rec = _get((manifest_arms or {}).get(run_arm), "synthetic_acceptance") if manifest_arms else None
    if rec is not None and _get(rec, "of"):
        return _get(rec, "of")
    return run_arm.split("-synacc", 1)[0]


def surface_rows(speedups: list, manifest_arms: dict | None = None) -> list[dict]:
    """One row per synthetic speed-up row (arm = the speculative arm it forces), then the pooled rows."""
    rows = []
    for r in speedups:
        acc = _get(r, "synthetic_acceptance")
        ratio = _get(r, "paired_ratio")
        if acc is None:
            continue
        rows.append({"arm": of_arm(_get(r, "arm"), manifest_arms), "run_arm": _get(r, "arm"),
                     "domain": _get(r, "domain"), "accept_len": float(acc), "level": _level(r),
                     "axis": "rate" if _get(r, "rate") is not None else "concurrency",
                     "concurrency": _get(r, "concurrency"), "rate": _get(r, "rate"),
                     "ratio": ratio, "ci_low": _get(r, "ci_low"), "ci_high": _get(r, "ci_high"),
                     "excluded": bool(_get(r, "excluded")), "synthetic": True,
                     **({"left_out": _get(r, "excluded")[0]} if _get(r, "excluded") else {})})
    rows.sort(key=lambda x: (x["arm"], x["domain"], x["level"], x["accept_len"]))
    return rows + pooled_rows(rows)


def pooled_rows(rows: list[dict]) -> list[dict]:
    """Per (arm, length, level) over the domains with a usable row: the mean ratio and the envelope of the
    intervals. Only where two or more domains have one."""
    by: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        if r["domain"] != POOLED and _usable(r):
            by[(r["arm"], r["accept_len"], r["level"])].append(r)
    out = []
    for (arm, acc, lvl), rs in sorted(by.items(), key=lambda kv: (kv[0][0], kv[0][2], kv[0][1])):
        if len(rs) < 2:  # one domain: its own row says it all
            continue
        out.append({**{k: rs[0][k] for k in ("arm", "axis", "concurrency", "rate")}, "run_arm": rs[0]["run_arm"],
                    "domain": POOLED, "accept_len": acc, "level": lvl,
                    "ratio": sum(r["ratio"] for r in rs) / len(rs), "ci_low": min(r["ci_low"] for r in rs),
                    "ci_high": max(r["ci_high"] for r in rs), "excluded": False, "synthetic": True,
                    "domains": sorted(r["domain"] for r in rs)})
    return out


def _usable(r: dict) -> bool:
    return (not r.get("excluded") and r.get("ratio") is not None and r.get("ci_low") is not None
            and r.get("ci_high") is not None)


# json-edge: fields of a report --json surface row
def interpolate(points: list[tuple[float, float, float, float]], accept: float) -> dict:
    """(accept_len, ratio, ci_low, ci_high) points of one (arm, domain, level) at `accept`: linear between the
    two nearest measured lengths, the interval's endpoints the same way. Refused outside the measured range:
    {"refused": why}."""
    pts = sorted(points)
    if not pts:
        return {"refused": "no measured length"}
    lo_acc, hi_acc = pts[0][0], pts[-1][0]
    if accept < lo_acc or accept > hi_acc:
        return {"refused": f"acceptance {accept:.3g} is outside the measured lengths {lo_acc:g} to {hi_acc:g}: "
                           "not extrapolated"}
    for (a0, *v0), (a1, *v1) in zip(pts, pts[1:]):
        if a0 <= accept <= a1:
            w = 0.0 if a1 == a0 else (accept - a0) / (a1 - a0)
            r, lo, hi = ((1 - w) * x0 + w * x1 for x0, x1 in zip(v0, v1))
            return {"ratio": r, "ci_low": lo, "ci_high": hi, "between": [a0, a1]}
    a0, *v0 = pts[0]  # a single measured length, equal to accept
    return {"ratio": v0[0], "ci_low": v0[1], "ci_high": v0[2], "between": [a0, a0]}


def predict(surface: list[dict], acceptance: dict[tuple[str, str], float],
            by_level: dict[tuple[str, str, float], float] | None = None) -> list[dict]:
    """Per (arm, domain) with a measured acceptance and each level of the arm's surface: the predicted speed-up
    (from the domain's own surface, else the pooled one), or why none. The acceptance used at a level: `by_level`'s
    (arm, domain, level) figure, else the domain's `acceptance` (its `accept_from` says which)."""
    by_level = by_level or {}
    by: dict[tuple, list[tuple]] = defaultdict(list)
    levels: dict[str, dict[float, dict]] = defaultdict(dict)
    measured = {r["arm"] for r in surface}
    for r in surface:
        if _usable(r):
            by[(r["arm"], r["domain"], r["level"])].append((r["accept_len"], r["ratio"], r["ci_low"], r["ci_high"]))
            levels[r["arm"]].setdefault(r["level"], r)
    out = []
    for (arm, domain), acc in sorted(acceptance.items()):
        if arm not in levels:
            why = (f"no level of {arm}'s synthetic surface is one a prediction may use (all left out, or no "
                   "interval)" if arm in measured else f"no synthetic surface of {arm}")
            out.append({"arm": arm, "domain": domain, "accept_len": acc, "level": None, "refused": why,
                        "accept_from": "domain mean"})
            continue
        for lvl, ref in sorted(levels[arm].items()):
            src = domain if (arm, domain, lvl) in by else POOLED
            own = by_level.get((arm, domain, lvl))
            a = acc if own is None else own
            row = {"arm": arm, "domain": domain, "accept_len": a, "level": lvl, "axis": ref["axis"],
                   "concurrency": ref["concurrency"], "rate": ref["rate"], "surface": src,
                   "accept_from": "this level" if own is not None else
                   f"domain mean (no real acceptance at {_label(ref)})" if by_level else "domain mean"}
            if (arm, src, lvl) in by:
                row.update(interpolate(by[(arm, src, lvl)], a))
                if src == POOLED:
                    row["domains"] = next((r.get("domains") for r in surface
                                           if (r["arm"], r["domain"], r["level"]) == (arm, POOLED, lvl)), None)
            elif own_out := [r for r in surface if (r["arm"], r["domain"], r["level"]) == (arm, domain, lvl)
                             and r.get("left_out")]:
                row["refused"] = f"the {domain} surface at this level is left out ({own_out[0]['left_out']})"
            else:
                seen = sorted({d for a, d, _ in by if a == arm and d != POOLED})
                row["refused"] = (f"no surface for {domain} at this level (measured on {', '.join(seen)}; a pooled "
                                  "surface needs two or more domains)")
            out.append(row)
    return out


def crossovers(pred: list[dict]) -> list[dict]:
    """Per (arm, domain): the lowest level from which the predicted interval lies below 1 there and at every
    higher level; "pays at every level" when it lies above 1 at every level. Refused levels break no tie: only
    the predicted ones count, and a domain with none has no verdict."""
    by: dict[tuple, list[dict]] = defaultdict(list)
    for p in pred:
        by[(p["arm"], p["domain"])].append(p)
    out = []
    for (arm, domain), ps in sorted(by.items()):
        rs = sorted((p for p in ps if "ratio" in p), key=lambda p: p["level"])
        if not rs:
            why = next((p["refused"] for p in ps if "refused" in p), "no prediction")
            out.append({"arm": arm, "domain": domain, "crossover": None, "note": f"no prediction ({why})"})
            continue
        cross = next((r for i, r in enumerate(rs) if all(x["ci_high"] < 1 for x in rs[i:])), None)
        if cross is not None:
            note = ("predicted slower than the baseline at every level" if cross is rs[0]
                    else f"predicted crossover at {_label(cross)}: the predicted interval lies below 1 from there on")
        elif all(r["ci_low"] > 1 for r in rs):
            note = f"pays at every level ({_label(rs[0])} to {_label(rs[-1])}, predicted)"
        else:
            note = f"no predicted crossover through {_label(rs[-1])} (not significantly slower)"
        refused = [p for p in ps if "refused" in p]
        if refused:
            note += f"; {len(refused)} level(s) refused: {refused[0]['refused']}"
        out.append({"arm": arm, "domain": domain, "crossover": cross["level"] if cross is not None else None,
                    "note": note})
    return out


def _label(r: dict) -> str:
    return level_label(int(r["concurrency"] or 0), r.get("rate"))


def verdict(low_pct: float | None, high_pct: float | None, goal_pct: float = GOAL_PCT) -> str:
    """within / off / inconclusive of an error interval (percent) against +-goal_pct (VERDICT_RULE)."""
    if low_pct is None or high_pct is None:
        return "inconclusive"
    if -goal_pct <= low_pct and high_pct <= goal_pct:
        return "within"
    if high_pct < -goal_pct or low_pct > goal_pct:
        return "off"
    return "inconclusive"


def check(pred: list[dict], measured: list, goal_pct: float = GOAL_PCT,
          work: tuple[Any, Any] | None = None) -> list[dict]:
    """Predicted vs measured where real speed-up rows (no synthetic_acceptance) exist for the same arm, domain
    and level: the error, its interval and the verdict against goal_pct; `covered`: the measured ratio lies in
    the predicted interval. `work`: (surface's, measured run's) callables (domain, level) -> their baseline's
    output tokens a request (None unknown), for the like-with-like rule (`other work`)."""
    real = {(_get(r, "arm"), _get(r, "domain"), _level(r)): r for r in measured
            if _get(r, "synthetic_acceptance") is None and _get(r, "paired_ratio") is not None}
    out = []
    for p in pred:
        m = real.get((p["arm"], p["domain"], p["level"]))
        if m is None or "ratio" not in p:
            continue
        left_out = _left_out(p, m, work)
        got = float(_get(m, "paired_ratio"))
        lo_m, hi_m = _get(m, "ci_low"), _get(m, "ci_high")
        iv = error_interval(p["ratio"], p["ci_low"], p["ci_high"], got, lo_m, hi_m) if got else None
        lo, hi = (None, None) if iv is None else (iv[0] * 100, iv[1] * 100)
        out.append({"arm": p["arm"], "domain": p["domain"], "level": p["level"], "axis": p["axis"],
                    "concurrency": p["concurrency"], "rate": p["rate"], "accept_len": p["accept_len"],
                    "accept_from": p.get("accept_from"), "predicted": p["ratio"],
                    "predicted_low": p["ci_low"], "predicted_high": p["ci_high"], "measured": got,
                    "measured_low": lo_m, "measured_high": hi_m,
                    "error_pct": (p["ratio"] / got - 1) * 100 if got else None, "error_low_pct": lo,
                    "error_high_pct": hi, "verdict": "left out" if left_out else verdict(lo, hi, goal_pct),
                    "covered": p["ci_low"] <= got <= p["ci_high"], **({"left_out": left_out} if left_out else {})})
    return out


def _left_out(p: dict, m: Any, work: tuple[Any, Any] | None) -> str | None:
    """Why a check cell compares unlike things (module docstring), or None."""
    from toolkit.schema.eligibility import WORK_TOLERANCE

    if _get(m, "excluded"):
        return f"the measured speed-up is one no verdict may use: {_get(m, 'excluded')[0]}"
    if work is None:
        return None
    domains = (p.get("domains") or []) if p.get("surface") == POOLED else [p["domain"]]
    got = [work[0](d, p["level"]) for d in domains]
    if not got or any(x is None for x in got):
        return None
    a, b = sum(got) / len(got), work[1](p["domain"], p["level"])
    if b is None or b <= 0 or abs(a / b - 1) <= WORK_TOLERANCE:
        return None
    return (f"other work: the surface's baseline answered {a:.0f} output tokens a request, the measured run's "
            f"{b:.0f}")


def check_summary(rows: list[dict], goal_pct: float = GOAL_PCT) -> dict:  # json-edge: report --json's surface
    """The check's verdict counts and the median |error| (percent) over its cells."""
    errs = [abs(r["error_pct"]) for r in rows if r.get("error_pct") is not None and not r.get("left_out")]
    return {"goal_pct": goal_pct, "cells": len(rows), "rule": VERDICT_RULE,
            **{v: sum(r["verdict"] == v for r in rows) for v in ("within", "off", "inconclusive", "left out")},
            "median_abs_error_pct": statistics.median(errs) if errs else None}


# data-keyed: arm, domain
def real_acceptance(cells: list, baseline: str | None = None, per_level: bool = False) -> dict[tuple, float]:
    """(arm, domain) -> the real acceptance length of a speculative arm: the mean accept_length of its ok cells
    whose acceptance was not forced, weighted by each figure's n; with per_level, (arm, domain, level) -> the
    same over that level's cells. `cells`: (key, CellSummary, metrics)."""
    acc: dict[tuple, list[tuple[float, int]]] = defaultdict(list)
    for _, c, m in cells:
        s = m.get("accept_length")
        if (c.status != "ok" or c.synthetic_acceptance is not None or s is None or s.mean is None
                or c.arm == baseline):
            continue
        key = (c.arm, c.domain, _level(c)) if per_level else (c.arm, c.domain)
        acc[key].append((float(s.mean), max(s.n, 1)))
    return {k: sum(v * n for v, n in vs) / sum(n for _, n in vs) for k, vs in acc.items()}


# json-edge: report --json's surface
def build(speedups: list, manifest_arms: dict | None, cells: list | None = None,
          measured: list | None = None, source: str | None = None, baseline: str | None = None,
          surface_cells: tuple[list, str | None] | None = None) -> dict | None:
    """The surface of a run and, with the real acceptance `cells` (default: none), the prediction, its
    crossovers and the check against `measured` real speed-up rows. `source`: where the acceptance came from
    (None: the run itself). `surface_cells`: the surface run's own cells and baseline, for the like-with-like
    rule (`check`'s `other work`; None: not applied). None when the run has no synthetic speed-up."""
    rows = surface_rows(speedups, manifest_arms)
    if not rows:
        return None
    out: dict = {"rows": rows, "how": HOW, "acceptance_from": source}
    acceptance = real_acceptance(cells or [], baseline)
    by_level = real_acceptance(cells or [], baseline, per_level=True)
    out["acceptance"] = [{"arm": a, "domain": d, "accept_len": v,
                          "by_level": {f"{lvl:g}": x for (a2, d2, lvl), x in sorted(by_level.items())
                                       if (a2, d2) == (a, d)}} for (a, d), v in sorted(acceptance.items())]
    if acceptance:
        pred = predict(rows, acceptance, by_level)
        out["prediction"] = pred
        out["crossovers"] = crossovers(pred)
        work = None
        if surface_cells is not None:
            from toolkit.schema.eligibility import Eligibility

            mine, theirs = Eligibility([c for _, c, _ in surface_cells[0]]), Eligibility([c for _, c, _ in cells or []])
            work = (lambda d, lvl: mine.work(surface_cells[1], d, lvl), lambda d, lvl: theirs.work(baseline, d, lvl))
        out["check"] = check(pred, measured or [], work=work)
        out["check_summary"] = check_summary(out["check"])
    return out
