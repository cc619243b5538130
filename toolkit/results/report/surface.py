"""The speed-up surface and the prediction from it (toolkit/results/surface.py) as report blocks: the
surface pivoted to (arm, domain, level) x acceptance length, the predicted speed-ups, the predicted
crossovers and the check against measured speed-ups. Labelled synthetic throughout."""

from __future__ import annotations

from toolkit.results.report.model import Heading, Items, Para, Table, fmt_centre, fmt_num, fmt_pct
from toolkit.schema.keys import level_label, rate_text

SURFACE_HEADING = "Speed-up surface (synthetic acceptance)"
SURFACE_NOTE = ("SYNTHETIC: each column is the speculative arm with its acceptance length forced by "
                "SGLANG_SIMULATE_ACC_LEN (the Matrix's synthetic_acceptance), not what its drafter achieves. Cell: "
                "the paired speed-up over the baseline with its launch-aware 95% CI (the speed-up table's). pooled: "
                "the mean over domains, its interval the envelope of theirs. `left out`: no prediction uses it.")


def _lvl(r: dict) -> str:
    return level_label(int(r.get("concurrency") or 0), r.get("rate"))


def surface_blocks(s: dict | None) -> list:
    if not s:
        return []
    rows = s["rows"]
    accs = sorted({r["accept_len"] for r in rows})
    keyed: dict[tuple, dict] = {}
    for r in rows:
        keyed.setdefault((r["arm"], r["domain"] == "pooled", r["domain"], r["level"]), {})[r["accept_len"]] = r
    table = []
    for (arm, _, domain, _), by_acc in sorted(keyed.items()):
        ref = next(iter(by_acc.values()))
        table.append([arm, domain, _lvl(ref)] + [
            ("-" if (r := by_acc.get(a)) is None else
             fmt_centre(r["ratio"], r["ci_low"], r["ci_high"]) + (" (left out)" if r["excluded"] else ""))
            for a in accs])
    out: list = [Heading(SURFACE_HEADING),
                 Table(["arm", "domain", "level"] + [f"synthetic acc {rate_text(a)}" for a in accs], table,
                       align="lll" + "r" * len(accs)),
                 Para(SURFACE_NOTE)]
    return out + prediction_blocks(s)


def prediction_blocks(s: dict) -> list:
    src = s.get("acceptance_from")
    where = f"run {src}" if src else "this run's real speculative arms"
    if not s.get("acceptance"):
        return [Para(f"Prediction: no real acceptance in {where} (a real speculative arm's accept_length); "
                     "`--acceptance-from RUN` names a run that has one.")]
    acc = ", ".join(f"{a['arm']}/{a['domain']} {fmt_num(a['accept_len'])}" + (
        " (" + ", ".join(f"{_lvl_key(k)} {fmt_num(v)}" for k, v in a["by_level"].items()) + ")"
        if a.get("by_level") else "") for a in s["acceptance"])
    rows = []
    for p in s["prediction"]:
        if p.get("level") is None:
            rows.append([p["arm"], p["domain"], fmt_num(p["accept_len"]), "-", "-", "refused: " + p["refused"]])
            continue
        if "refused" in p:
            rows.append([p["arm"], p["domain"], fmt_num(p["accept_len"]), _lvl(p), "-", "refused: " + p["refused"]])
            continue
        a0, a1 = p["between"]
        rows.append([p["arm"], p["domain"], fmt_num(p["accept_len"]), _lvl(p),
                     fmt_centre(p["ratio"], p["ci_low"], p["ci_high"]),
                     f"acc: {p.get('accept_from', 'domain mean')}; {p['surface']} surface, between synthetic acc "
                     f"{rate_text(a0)} and {rate_text(a1)}"])
    out: list = [Heading("Predicted speed-up from real acceptance (from the synthetic surface)"),
                 Para(f"Real acceptance per domain (mean over levels; per level in brackets) from {where}: {acc}. "
                      "A prediction uses the acceptance at its own level (acc: this level), the domain's mean only "
                      "where that level has none (acc: domain mean)."),
                 Table(["arm", "domain", "real accept", "level", "predicted x [interval]", "from"], rows,
                       align="llrlrl"),
                 Para("Interpolation: " + s["how"] + ".")]
    if s.get("crossovers"):
        out += [Heading("Predicted crossover"), Items([f"{c['arm']} / {c['domain']}: {c['note']}"
                                                       for c in s["crossovers"]])]
    if s.get("check"):
        out += check_blocks(s["check"], s.get("check_summary"), where)
    elif s.get("check_refused"):
        out += [Heading("Check: predicted vs measured speed-up"), Para(s["check_refused"] + ".")]
    return out


def _lvl_key(k: str) -> str:
    return f"c={k}" if float(k).is_integer() else rate_text(float(k))


def check_blocks(check: list[dict], summary: dict | None, where: str) -> list:
    from toolkit.results.surface import GOAL_PCT, VERDICT_RULE

    goal = (summary or {}).get("goal_pct", GOAL_PCT)
    rows = [[c["arm"], c["domain"], _lvl(c), fmt_centre(c["predicted"], c["predicted_low"], c["predicted_high"]),
             fmt_centre(c["measured"], c["measured_low"], c["measured_high"]),
             fmt_pct(c["error_pct"]) + ("" if c.get("error_low_pct") is None else
                                        f" [{c['error_low_pct']:+.1f}%, {c['error_high_pct']:+.1f}%]"),
             f"within {goal:g} %" if c["verdict"] == "within" else
             f"left out: {c['left_out']}" if c.get("left_out") else c["verdict"]] for c in check]
    out: list = [Heading("Check: predicted vs measured speed-up"),
                 Table(["arm", "domain", "level", "predicted x [interval]", "measured x [95% CI]",
                        "error [95% interval]", f"goal +-{goal:g} %"], rows, align="lllrrrl")]
    if summary:
        med = summary["median_abs_error_pct"]
        out.append(Para(f"Summary: {summary['cells']} cells: {summary['within']} within {goal:g} %, "
                        f"{summary['off']} off, {summary['inconclusive']} inconclusive"
                        + (f", {summary['left out']} left out (no verdict)" if summary.get("left out") else "")
                        + "; median |error| "
                        + ("-" if med is None else f"{med:.1f} %") + "."))
    out.append(Para(f"measured: the real speed-ups of {where} at the same arm, domain and level; error: predicted / "
                    f"measured - 1. Verdict against a goal fixed before the data: {VERDICT_RULE}."))
    return out
