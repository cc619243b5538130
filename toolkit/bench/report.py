"""The report.md of a matrix run and the one-screen summary tables printed at its end."""

from __future__ import annotations

from rich.table import Table

from toolkit.schema.records import CellSummary


def _f(v, fmt="{:.1f}") -> str:
    return "-" if v is None else fmt.format(v)


def _stat(c: CellSummary, metric: str, field: str = "p50", fmt="{:.1f}") -> str:
    s = c.metrics.get(metric)
    if s is None:
        return "-"
    v = getattr(s, field)
    mark = "*" if field in s.unreliable else ""
    return _f(v, fmt) + mark


CELL_COLUMNS = ["arm", "domain", "conc", "rep", "n", "err", "tok/s", "req/s", "TTFT p50 ms", "ITL p50 ms",
                "TPOT p50 ms", "E2E p50 ms", "E2E p99 ms", "accept"]


def cell_rows(cells: list[CellSummary]) -> list[list[str]]:
    rows = []
    for c in sorted(cells, key=lambda c: (c.domain, c.concurrency, c.arm, c.repeat)):
        if c.status == "failed":
            rows.append([c.arm, c.domain, str(c.concurrency), str(c.repeat), "-", "FAILED", "-", "-", "-", "-", "-",
                         "-", "-", (c.reason or "")[:40]])
            continue
        rows.append([c.arm, c.domain, str(c.concurrency), str(c.repeat), str(c.n_requests), f"{c.error_rate:.0%}",
                     _stat(c, "output_tok_s", "mean"), _stat(c, "request_s", "mean", "{:.2f}"),
                     _stat(c, "ttft_ms"), _stat(c, "itl_ms", fmt="{:.2f}"), _stat(c, "tpot_ms", fmt="{:.2f}"),
                     _stat(c, "e2e_ms"), _stat(c, "e2e_ms", "p99"), _stat(c, "accept_length", "mean", "{:.2f}")])
    return rows


SPEEDUP_COLUMNS = ["arm", "domain", "conc", "arm tok/s", "base tok/s", "throughput x", "paired x [95% CI]", "pairs"]


def speedup_rows(derived: dict) -> list[list[str]]:
    rows = []
    for r in derived.get("speedups", []):
        ci = (f"{r['paired_ratio']:.2f} [{r['ci_low']:.2f}, {r['ci_high']:.2f}]"
              if r.get("paired_ratio") is not None else "-")
        rows.append([r["arm"], r["domain"], str(r["concurrency"]), _f(r["arm_tok_s"]), _f(r["baseline_tok_s"]),
                     _f(r["throughput_ratio"], "{:.2f}"), ci, str(r["n_pairs"])])
    return rows


def _md_table(columns: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def markdown_report(matrix, cells: list[CellSummary], derived: dict) -> str:
    parts = [f"# {matrix.name}", "", matrix.description or "", "",
             f"Arms: {', '.join(matrix.arms)} (baseline: {derived.get('baseline')}). "
             f"Concurrency: {matrix.concurrency}. Output length: {matrix.output_len}. "
             f"Requests per cell: {matrix.requests or f'{matrix.duration_s} s'}, warmup {matrix.warmup}, "
             f"repeats {matrix.repeats}, seed {matrix.seed}, API {matrix.api}.", "",
             "## Cells", "", "Percentiles marked * come from too few requests to be reliable. ITL: per-chunk gap "
             "divided by the tokens in the chunk; TPOT: (E2E - TTFT) / (tokens - 1).", "",
             _md_table(CELL_COLUMNS, cell_rows(cells)), "", "## Speedup over the baseline", "",
             "throughput x: output tok/s ratio. paired x: ratio of per-prompt decode rates over the same prompts, "
             "95% CI from a paired bootstrap.", "", _md_table(SPEEDUP_COLUMNS, speedup_rows(derived)) if
             derived.get("speedups") else "(no spec arm to compare)", "", "## Crossover", ""]
    for c in derived.get("crossovers", []):
        parts.append(f"- {c['arm']} / {c['domain']}: {c['note']}")
    from toolkit.bench.derive import threshold_advice

    for arm in derived.get("recommended_disable_batch_threshold", {}):
        parts.append(f"- **{arm}**: {threshold_advice(derived, arm)}")
    servers = {a: i for a, i in (derived.get("arm_info") or {}).items() if i.get("engine") == "sglang"}
    if servers:
        parts += ["", "## What each server said (/server_info)", ""]
        for a, i in servers.items():
            if not i.get("server_info_read"):
                parts.append(f"- **{a}**: no /server_info")
                continue
            spec = ", ".join(f"{k.removeprefix('speculative_')}={v}" for k, v in (i.get("speculative") or {}).items())
            parts.append(f"- **{a}**: SGLang {i.get('engine_version')}, max running requests "
                         f"{i.get('max_running_requests')}" + (" (set by SGLang: flag unset)"
                         if i.get("max_running_requests_implicit") else "") + (f"; speculative: {spec}" if spec else "")
                         + (f"; differs from the preset: {i['preset_mismatches']}" if i.get("preset_mismatches") else "")
                         + (f" ({i['server_info_file']})" if i.get("server_info_file") else ""))
    parts += ["", "## Methodology checks", ""]
    checks = derived.get("methodology", [])
    parts += [f"- **{c['severity']}** `{c['check']}`: {c['message']}" for c in checks] or ["- none"]
    reps = derived.get("representativeness") or []
    if reps:
        parts += ["", "## Representativeness of the workloads", ""]
        parts += [f"- {r['workload']}: {r.get('verdict')} (divergence {r.get('divergence', 0):.2f}) "
                  f"{r.get('reason', '')}" for r in reps]
    t = derived.get("timing", {})
    if t.get("wall_s"):
        parts += ["", "## Timing", "",
                  f"Wall {t['wall_s']:.1f} s; cells {t['cells_s']:.1f} s; server starts "
                  + ", ".join(f"{a} {s:.1f} s" for a, s in t.get("launch_s", {}).items())
                  + "; server stops " + ", ".join(f"{a} {s:.1f} s" for a, s in t.get("stop_s", {}).items())
                  + (f"; overhead ratio {t['overhead_ratio']:.3f}" if t.get("overhead_ratio") else "")]
    return "\n".join(parts) + "\n"


def rich_table(title: str, columns: list[str], rows: list[list[str]]) -> Table:
    table = Table(title=title, show_lines=False, header_style="bold")
    for c in columns:
        table.add_column(c, justify="left" if c in ("arm", "domain") else "right", no_wrap=True)
    for r in rows:
        table.add_row(*r)
    return table
