"""Representativeness against acceptance (toolkit/results/represent.py) as report blocks: per arm and domain
the workload's distance from the drafter's training sample beside the real acceptance, and Spearman's rho."""

from __future__ import annotations

from toolkit.results.report.model import Heading, Items, Para, Table, fmt_num
from toolkit.results.represent import Represented


def represent_blocks(r: Represented | None) -> list:
    if not r:
        return []
    rows = [[x["arm"], x["domain"], f"{x['distance']:.2f}", x.get("verdict") or "-", fmt_num(x["accept_len"])]
            for x in r.rows]
    rho = "; ".join(f"{c['arm']}: rho = " + ("-" if c["rho"] is None else f"{c['rho']:+.2f}") + f" (n = {c['n']})"
                    for c in r.spearman)
    out: list = [Heading("Representativeness against acceptance"),
                 Table(["arm", "domain", "distance", "verdict", "accept"], rows, align="llrlr"),
                 Para(f"Spearman's rank correlation of distance and acceptance over domains: {rho}. Distances "
                      f"{r.source}."),
                 Para(r.note)]
    if r.left_out:
        out.append(Items(r.left_out))
    return out
