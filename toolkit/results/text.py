"""Plain-text tables for a person scanning a terminal: aligned columns, `~` for no significant change."""

from __future__ import annotations

from toolkit.results.archive import Archive
from toolkit.results.diff import HIGHER_IS_BETTER, DiffResult, MetricDiff, fmt_num
from toolkit.results.facts import run_facts
from toolkit.results.stats import ALPHA, MIN_SAMPLES


def table(rows: list[list[str]], header: list[str] | None = None, right: set[int] | None = None,
          indent: str = "") -> str:
    rows = ([header] if header else []) + rows
    if not rows:
        return ""
    widths = [max(len(r[i]) if i < len(r) else 0 for r in rows) for i in range(max(len(r) for r in rows))]
    right = right or set()
    lines = []
    for r in rows:
        cells = [(c.rjust(widths[i]) if i in right else c.ljust(widths[i])) for i, c in enumerate(r)]
        lines.append((indent + "  ".join(cells)).rstrip())
    return "\n".join(lines)


def list_text(rows: list[dict]) -> str:
    if not rows:
        return "no runs found"
    out = []
    for r in rows:
        if r.get("status") == "corrupt":
            out.append([f"{r['matrix']}/{r['run_id']}", "-", "CORRUPT", "-", "-", "-", r.get("error", ""), "-"])
            continue
        out.append([f"{r['matrix']}/{r['run_id']}", (r.get("started_at") or "-")[:19].replace("T", " "),
                    r["status"], r.get("env_hash") or "-", r.get("host") or "-", r.get("gpu") or "-",
                    ",".join(r.get("arms") or []) or "-", str(r.get("cells", 0))])
    return table(out, ["RUN", "STARTED (UTC)", "STATUS", "ENV", "HOST", "GPU", "ARMS", "CELLS"], right={7})


def _stat(c, metric: str, field: str) -> str:
    s = c.metrics.get(metric)
    if s is None:
        return "-"
    v = getattr(s, field)
    mark = "*" if field in s.unreliable else ""
    return fmt_num(v) + mark


def cells_text(a: Archive) -> str:
    if not a.cells:
        return ""
    rows = []
    for c in sorted(a.cells, key=lambda c: (c.arm, c.domain, c.concurrency, c.repeat)):
        rows.append([c.arm, c.domain, str(c.concurrency), str(c.repeat), str(c.n_requests), str(c.n_errors),
                     _stat(c, "ttft_ms", "p50"), _stat(c, "ttft_ms", "p99"), _stat(c, "tpot_ms", "p50"),
                     _stat(c, "itl_ms", "p50"), _stat(c, "e2e_ms", "p50"), _stat(c, "output_tok_s", "mean"),
                     _stat(c, "accept_length", "mean"), c.status if c.status == "ok" else f"FAILED: {c.reason}"])
    head = ["ARM", "DOMAIN", "C", "REP", "N", "ERR", "TTFT p50", "TTFT p99", "TPOT p50", "ITL p50", "E2E p50",
            "TOK/S", "ACCEPT", "STATUS"]
    return table(rows, head, right=set(range(2, 13)))


def _warnings(derived: dict) -> list[dict]:
    for key in ("checks", "methodology", "warnings", "methodology_checks"):
        v = derived.get(key)
        if isinstance(v, list):
            return [w if isinstance(w, dict) else {"message": str(w)} for w in v]
    return []


def show_text(a: Archive) -> str:
    f = run_facts(a)
    out = [f"run       {f['matrix']}/{f['run_id']}  ({f['status']})",
           f"path      {f['path']}",
           f"started   {f['started_at']}   finished {f['finished_at'] or '-'}",
           f"env       {f['environment'] or '-'} {f['env_hash'] or ''}   host {f['host'] or '-'}   gpu {f['gpu'] or '-'}",
           f"source    {f['source']}", "",
           cells_text(a) or "no cells", "  (* percentile from too few samples; latencies in ms)"]
    d = a.derived.model_dump(mode="json")  # typed: toolkit.schema.manifest.Derived
    sp = d.get("speedups") or []
    if sp:
        rows = [[r.get("arm", "?"), r.get("domain", "?"), str(r.get("concurrency")), fmt_num(r.get("throughput_ratio")),
                 f"{fmt_num(r.get('paired_ratio'))} [{fmt_num(r.get('ci_low'))}, {fmt_num(r.get('ci_high'))}]"]
                for r in sp]
        out += ["", "speedup over baseline (output tok/s ratio; paired decode-rate ratio with 95% CI)",
                table(rows, ["ARM", "DOMAIN", "C", "TPUT RATIO", "PAIRED [CI]"], right={2, 3}, indent="  ")]
    for c in d.get("crossovers") or []:
        out.append(f"  crossover {c.get('arm')} {c.get('domain')}: {c.get('note') or c.get('crossover_concurrency')}")
    warns = _warnings(d)
    out += ["", f"methodology checks: {len(warns) or 'none raised'}"]
    for w in warns:
        out.append(f"  {w.get('severity', 'warning')}: {w.get('message')}")
    return "\n".join(out)


def _centre(v, lo, hi) -> str:
    if v is None:
        return "-"
    if lo is None or hi is None:
        return fmt_num(v)
    return f"{fmt_num(v)} [{fmt_num(lo)}, {fmt_num(hi)}]"


def _delta(m: MetricDiff) -> tuple[str, str]:
    d = "-" if m.delta_pct is None else f"{m.delta_pct:+.2f}%"
    p = m.p_adj if m.p_adj is not None else m.p
    if m.verdict in ("better", "worse"):
        return d, f"(p={p:.3f} n={m.a_n}+{m.b_n})"
    if m.verdict == "~":
        return "~", f"(p={p:.3f} n={m.a_n}+{m.b_n})"
    if m.verdict == "too-few":
        return "?", f"(n={m.a_n}+{m.b_n}: too few to test)"
    return "?", "(one figure per cell or summary-only import: not tested)"


def diff_text(r: DiffResult, facts_a: dict, facts_b: dict) -> str:
    out = []
    for tag, f in (("A", facts_a), ("B", facts_b)):
        out.append(f"{tag}: {f['matrix']}/{f['run_id']}  {f['status']}  {(f['started_at'] or '')[:19]}  "
                   f"env {f['env_hash'] or '-'}  {f['source']}")
    comparable = [c for c in r.cells if c.comparable]
    for metric in r.metrics:
        rows = []
        for c in comparable:
            m = c.metrics.get(metric)
            if m is None:
                continue
            d, pn = _delta(m)
            mark = {"better": "  better", "worse": "  WORSE"}.get(m.verdict, "")
            rows.append([c.label, _centre(m.a, m.a_low, m.a_high), _centre(m.b, m.b_low, m.b_high), d, pn + mark])
        if not rows:
            continue
        g = r.geomean.get(metric)
        if g:
            rows.append(["geomean", fmt_num(g["a"]), fmt_num(g["b"]),
                         "-" if g["delta_pct"] is None else f"{g['delta_pct']:+.2f}%", f"({g['cells']} cells)"])
        better = "higher" if metric in HIGHER_IS_BETTER else "lower"
        out += ["", f"{metric} ({better} is better; median [95% CI])",
                table(rows, ["cell", "A", "B", "delta", ""], right={3}, indent="  ")]
    notes = sorted({f"{c.label}: {n}" for c in comparable for n in c.notes})
    if notes:
        out += ["", "notes:"] + [f"  {n}" for n in notes]
    bad = [c for c in r.cells if not c.comparable]
    if bad:
        out += ["", "not comparable:"] + [f"  {c.label}: {c.reason}" for c in bad]
    if r.only_a or r.only_b:
        out += ["", "unmatched cells:"] + [f"  only in A: {x}" for x in r.only_a] + [f"  only in B: {x}" for x in r.only_b]
    corr = " (p Holm-adjusted over all tests)" if r.correction == "holm" else " (p not adjusted for multiple tests)"
    out += ["", f"~ : no significant change (Mann-Whitney U on per-request samples, p >= {ALPHA}){corr}",
            f"? : not tested (fewer than {MIN_SAMPLES} requests per side, or no per-request samples)"]
    out += ["", env_text(r.env)]
    return "\n".join(out)


def env_text(rows: list[dict]) -> str:
    if not rows:
        return "environment: no differences"
    out = [f"environment: {len(rows)} difference{'s' if len(rows) != 1 else ''}"]
    body = []
    last = None
    for row in rows:
        sec = row["section"] if row["section"] != last else ""
        last = row["section"]
        a = "(absent)" if row["a"] is None else _short(row["a"])
        b = "(absent)" if row["b"] is None else _short(row["b"])
        body.append([sec, row["field"], a, "->", b])
    return "\n".join(out) + "\n" + table(body, ["SECTION", "FIELD", "A", "", "B"], indent="  ")


def _short(v: str, width: int = 48) -> str:
    if len(v) == 64 and all(ch in "0123456789abcdef" for ch in v):
        return v[:12]
    return v if len(v) <= width else v[: width - 3] + "..."
