"""`toolkit results report`: Markdown (plots as PNG files beside it) and a self-contained HTML page
(plots embedded as base64 PNG). One run, or run A against run B with the plots overlaid.

The report is built once as a list of blocks, then rendered to Markdown and HTML, so both say the same.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path

from toolkit.fsutil import write_atomic
from toolkit.results.archive import Archive
from toolkit.results.diff import HIGHER_IS_BETTER, DiffResult, fmt_num
from toolkit.results.facts import normalized, run_facts
from toolkit.results.text import _centre, _delta, _warnings

Block = tuple


def _facts_rows(a: Archive) -> list[list[str]]:
    f = run_facts(a)
    m = normalized(a.manifest)
    image = m["image"].get("id")
    return [["run", f"{f['matrix']}/{f['run_id']}"], ["status", f["status"]],
            ["started / finished", f"{f['started_at']} / {f['finished_at'] or '-'}"],
            ["environment", f"{f['environment'] or '-'} (hash {f['env_hash'] or '-'})"],
            ["image", str(image or "-")], ["host / GPU", f"{f['host'] or '-'} / {f['gpu'] or '-'}"],
            ["toolkit", f"{m['toolkit']['version'] or '-'} {m['toolkit']['git_sha'] or ''}"],
            ["source", f["source"]]]


def _cells_table(a: Archive) -> Block:
    def s(c, metric, field):
        st = c.metrics.get(metric)
        return "-" if st is None else fmt_num(getattr(st, field)) + ("*" if field in st.unreliable else "")

    rows = [[c.arm, c.domain, str(c.concurrency), str(c.repeat), str(c.n_requests), str(c.n_errors),
             s(c, "ttft_ms", "p50"), s(c, "ttft_ms", "p99"), s(c, "tpot_ms", "p50"), s(c, "itl_ms", "p50"),
             s(c, "e2e_ms", "p50"), s(c, "output_tok_s", "mean"), s(c, "accept_length", "mean"),
             c.status if c.status == "ok" else f"failed: {c.reason}"]
            for c in sorted(a.cells, key=lambda c: (c.arm, c.domain, c.concurrency, c.repeat))]
    return ("table", ["arm", "domain", "c", "rep", "n", "err", "TTFT p50", "TTFT p99", "TPOT p50", "ITL p50",
                      "E2E p50", "tok/s", "accept", "status"], rows)


def _derived_blocks(a: Archive) -> list[Block]:
    out: list[Block] = []
    d = a.derived.model_dump(mode="json")  # typed: toolkit.schema.manifest.Derived
    sp = d.get("speedups") or []
    if sp:
        rows = [[r.get("arm", "?"), r.get("domain", "?"), str(r.get("concurrency")), fmt_num(r.get("throughput_ratio")),
                 _centre(r.get("paired_ratio"), r.get("ci_low"), r.get("ci_high"))] for r in sp]
        out += [("h2", "Speedup over the baseline"),
                ("table", ["arm", "domain", "c", "throughput ratio", "paired ratio [95% CI]"], rows)]
    cross = d.get("crossovers") or []
    if cross:
        out += [("h3", "Crossover"), ("list", [f"{c.get('arm')} / {c.get('domain')}: {c.get('note')}" for c in cross])]
    warns = _warnings(d)
    out += [("h2", "Methodology checks"),
            ("list", [f"{w.get('severity', 'warning')}: {w.get('message')}" for w in warns] or ["none raised"])]
    return out


def _plots(runs: list[tuple[str, Archive]]) -> list[Block]:
    from toolkit.results.plots import all_plots

    return [("h2", "Plots")] + [("img", name, caption, png) for name, caption, png in all_plots(runs)]


def _commands(a: Archive) -> list[Block]:
    lines = []
    for arm, info in normalized(a.manifest)["arms"].items():
        cmd = info["command"]
        if cmd:
            lines.append(f"{arm}: {' '.join(map(str, cmd)) if isinstance(cmd, list) else cmd}")
        elif info["server_args"]:
            lines.append(f"{arm}: " + " ".join(f"--{k} {v}" for k, v in info["server_args"].items()))
    return [("h2", "Server commands"), ("pre", "\n".join(lines))] if lines else []


def run_blocks(a: Archive, plots: bool = True) -> list[Block]:
    head = [("h1", f"Run {a.matrix_name}/{a.run_id}"), ("table", None, _facts_rows(a)), ("h2", "Cells"),
            _cells_table(a), ("p", "Latencies in ms; * marks a percentile from too few samples.")]
    tail = _plots([("", a)]) if plots else [("p", f"Plots: `toolkit results report {a.path} --html`.")]
    return head + _derived_blocks(a) + _commands(a) + tail


def diff_blocks(a: Archive, b: Archive, r: DiffResult) -> list[Block]:
    out: list[Block] = [("h1", f"{b.matrix_name}/{b.run_id} against {a.matrix_name}/{a.run_id}"),
                        ("table", ["", "A (reference)", "B"],
                         [[fa[0], fa[1], fb[1]] for fa, fb in zip(_facts_rows(a), _facts_rows(b))])]
    for metric in r.metrics:
        rows = []
        for c in r.cells:
            m = c.metrics.get(metric) if c.comparable else None
            if m is not None:
                d, pn = _delta(m)
                rows.append([c.label, _centre(m.a, m.a_low, m.a_high), _centre(m.b, m.b_low, m.b_high), d,
                             pn + {"better": " better", "worse": " WORSE"}.get(m.verdict, "")])
        g = r.geomean.get(metric)
        if g:
            rows.append(["geomean", fmt_num(g["a"]), fmt_num(g["b"]),
                         "-" if g["delta_pct"] is None else f"{g['delta_pct']:+.2f}%", ""])
        if rows:
            better = "higher" if metric in HIGHER_IS_BETTER else "lower"
            out += [("h3", f"{metric} ({better} is better; median [95% CI])"),
                    ("table", ["cell", "A", "B", "delta", "p, n"], rows)]
    out.append(("p", "~ : no significant change (Mann-Whitney U on per-request samples, alpha 0.05"
                     + (", Holm-adjusted" if r.correction == "holm" else "") + "); ? : not tested."))
    bad = [f"{c.label}: {c.reason}" for c in r.cells if not c.comparable]
    if bad:
        out += [("h3", "Not comparable"), ("list", bad)]
    if r.only_a or r.only_b:
        out += [("h3", "Unmatched cells"), ("list", [f"only in A: {x}" for x in r.only_a] +
                                           [f"only in B: {x}" for x in r.only_b])]
    out += [("h2", "Environment diff"),
            ("table", ["section", "field", "A", "B"],
             [[e["section"], e["field"], "(absent)" if e["a"] is None else e["a"],
               "(absent)" if e["b"] is None else e["b"]] for e in r.env]) if r.env else ("p", "No differences.")]
    return out + _plots([("A", a), ("B", b)])


def _md_cell(s: str) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def to_markdown(blocks: list[Block], img_dir: str = "plots") -> str:
    out = []
    for b in blocks:
        kind = b[0]
        if kind in ("h1", "h2", "h3"):
            out.append("#" * int(kind[1]) + " " + b[1])
        elif kind == "p":
            out.append(b[1])
        elif kind == "list":
            out.append("\n".join(f"- {x}" for x in b[1]))
        elif kind == "pre":
            out.append("```\n" + b[1] + "\n```")
        elif kind == "table":
            rows = b[2]
            head = b[1] or [""] * max((len(r) for r in rows), default=1)
            lines = ["| " + " | ".join(_md_cell(h) for h in head) + " |", "|" + "---|" * len(head)]
            lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
            out.append("\n".join(lines))
        elif kind == "img":
            out.append(f"![{b[2]}]({img_dir}/{b[1]})\n\n*{b[2]}*")
    return "\n\n".join(out) + "\n"


CSS = """body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1400px}
table{border-collapse:collapse;margin:0.6em 0;font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}
th{background:#f0f0f0}img{max-width:100%;border:1px solid #ddd;margin:0.4em 0}figure{margin:1em 0}
pre{background:#f6f6f6;padding:0.8em;overflow-x:auto}figcaption{font-style:italic;color:#555}"""


def to_html(blocks: list[Block], title: str) -> str:
    e = html.escape
    out = [f"<!doctype html><html><head><meta charset='utf-8'><title>{e(title)}</title><style>{CSS}</style></head><body>"]
    for b in blocks:
        kind = b[0]
        if kind in ("h1", "h2", "h3"):
            out.append(f"<{kind}>{e(b[1])}</{kind}>")
        elif kind == "p":
            out.append(f"<p>{e(b[1])}</p>")
        elif kind == "list":
            out.append("<ul>" + "".join(f"<li>{e(str(x))}</li>" for x in b[1]) + "</ul>")
        elif kind == "pre":
            out.append(f"<pre>{e(b[1])}</pre>")
        elif kind == "table":
            head = f"<tr>{''.join(f'<th>{e(str(h))}</th>' for h in b[1])}</tr>" if b[1] else ""
            rows = "".join("<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in row) + "</tr>" for row in b[2])
            out.append(f"<table>{head}{rows}</table>")
        elif kind == "img":
            data = base64.b64encode(b[3]).decode()
            out.append(f"<figure><img alt='{e(b[2])}' src='data:image/png;base64,{data}'>"
                       f"<figcaption>{e(b[2])}</figcaption></figure>")
    out.append("</body></html>")
    return "\n".join(out)


def write_report(blocks: list[Block], out_dir: Path, title: str, html_too: bool = True) -> list[Path]:
    """report.md + plots/*.png (+ report.html, self-contained) under out_dir."""
    written = []
    for b in blocks:
        if b[0] == "img":
            written.append(write_atomic(out_dir / "plots" / b[1], b[3]))
    written.insert(0, write_atomic(out_dir / "report.md", to_markdown(blocks)))
    if html_too:
        written.insert(1, write_atomic(out_dir / "report.html", to_html(blocks, title)))
    return written


def summary_markdown(a: Archive) -> str:
    """The report.md a runner can store at finalize: the tables, no plots (`report` makes those)."""
    return to_markdown(run_blocks(a, plots=False))
