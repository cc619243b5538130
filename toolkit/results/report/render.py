"""A Report rendered: terminal text (aligned columns), Markdown (`|` escaped in every table cell),
HTML (plots linked as plots/NAME.png, the files write_report stores beside it) and JSON (the report's data). Renderers only lay
out what the model holds; they compute and format nothing."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from toolkit.fsutil import write_atomic
from toolkit.results.report.model import Code, Facts, Heading, Image, Items, Para, Report, Table


def _aligned(header: list[str] | None, rows: list[list[str]], right, indent: str = "") -> list[str]:
    rows = ([header] if header else []) + rows
    if not rows:
        return []
    ncol = max(len(r) for r in rows)
    widths = [max(len(r[i]) if i < len(r) else 0 for r in rows) for i in range(ncol)]
    return [(indent + "  ".join(c.rjust(widths[i]) if right(i) else c.ljust(widths[i])
                                for i, c in enumerate(r))).rstrip() for r in rows]


def render_text(r: Report) -> str:
    out: list[str] = []
    for i, b in enumerate(r.blocks):
        if i and not isinstance(r.blocks[i - 1], Heading):
            out.append("")  # blocks are separated by a blank line; a heading sits on its block
        if isinstance(b, Heading):
            out.append(b.text)
        elif isinstance(b, Para):
            out.append(b.text)
        elif isinstance(b, Facts):
            out += _aligned(b.columns, b.rows, lambda i: False)
        elif isinstance(b, Table):
            out += _aligned(b.columns, b.rows, b.right)
        elif isinstance(b, Items):
            out += [f"  - {x}" for x in b.items]
        elif isinstance(b, Code):
            out += ["  " + line for line in b.text.splitlines()]
        elif isinstance(b, Image):
            out.append(f"  plot {b.name}: {b.caption}")
    return "\n".join(out) + "\n"


def md_cell(s: str) -> str:
    return str(s).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _md_table(header: list[str], rows: list[list[str]], right) -> str:
    lines = ["| " + " | ".join(md_cell(h) for h in header) + " |",
             "|" + "".join("---:|" if right(i) else "---|" for i in range(len(header)))]
    lines += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def render_md(r: Report, img_dir: str = "plots") -> str:
    out: list[str] = []
    for b in r.blocks:
        if isinstance(b, Heading):
            out.append("#" * b.level + " " + b.text.replace("\n", " "))
        elif isinstance(b, Para):
            out.append(b.text)
        elif isinstance(b, Facts):
            out.append(_md_table(b.columns, b.rows, lambda i: False) if b.columns else
                       "\n".join(f"- **{row[0]}**: {' / '.join(row[1:])}" for row in b.rows))
        elif isinstance(b, Table):
            out.append(_md_table(b.columns, b.rows, b.right))
        elif isinstance(b, Items):
            out.append("\n".join(f"- {x}" for x in b.items))
        elif isinstance(b, Code):
            out.append("```\n" + b.text + "\n```")
        elif isinstance(b, Image):
            out.append(f"![{b.caption}]({img_dir}/{b.name})\n\n*{b.caption}*")
    return "\n\n".join(out) + "\n"


CSS = """body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1400px}
table{border-collapse:collapse;margin:0.6em 0;font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}
td.r{text-align:right;font-variant-numeric:tabular-nums}th{background:#f0f0f0}
img{max-width:100%;border:1px solid #ddd;margin:0.4em 0}figure{margin:1em 0}
pre{background:#f6f6f6;padding:0.8em;overflow-x:auto}figcaption{font-style:italic;color:#555}"""


def _html_table(header: list[str] | None, rows: list[list[str]], right) -> str:
    e = html.escape
    head = "<tr>" + "".join(f"<th>{e(h)}</th>" for h in header) + "</tr>" if header else ""
    body = "".join("<tr>" + "".join(f"<td class='r'>{e(c)}</td>" if right(i) else f"<td>{e(c)}</td>"
                                    for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table>{head}{body}</table>"


def render_html(r: Report) -> str:
    e = html.escape
    out = [f"<!doctype html><html><head><meta charset='utf-8'><title>{e(r.title)}</title><style>{CSS}</style>"
           "</head><body>"]
    for b in r.blocks:
        if isinstance(b, Heading):
            out.append(f"<h{b.level}>{e(b.text)}</h{b.level}>")
        elif isinstance(b, Para):
            out.append(f"<p>{e(b.text)}</p>")
        elif isinstance(b, Facts):
            out.append(_html_table(b.columns, b.rows, lambda i: False))
        elif isinstance(b, Table):
            out.append(_html_table(b.columns, b.rows, b.right))
        elif isinstance(b, Items):
            out.append("<ul>" + "".join(f"<li>{e(x)}</li>" for x in b.items) + "</ul>")
        elif isinstance(b, Code):
            out.append(f"<pre>{e(b.text)}</pre>")
        elif isinstance(b, Image):
            out.append(f"<figure><img alt='{e(b.caption)}' src='plots/{e(b.name)}'>"
                       f"<figcaption>{e(b.caption)}</figcaption></figure>")
    out.append("</body></html>")
    return "\n".join(out)


def render_json(r: Report) -> str:
    return json.dumps(r.data, indent=2, default=str) + "\n"


def write_report(r: Report, out_dir: Path, html_too: bool = True) -> list[Path]:
    """report.md + plots/*.png (+ report.html, which links the plots) under out_dir."""
    written = [write_atomic(out_dir / "plots" / img.name, img.png) for img in r.images()]
    written.insert(0, write_atomic(out_dir / "report.md", render_md(r)))
    if html_too:
        written.insert(1, write_atomic(out_dir / "report.html", render_html(r)))
    return written


_EMBEDDED = re.compile(r"<img alt='([^']*)' src='data:image/png;base64,([A-Za-z0-9+/=]+)'>")


def unembed_html(page: Path) -> int:
    """Rewrite a report.html written when plots were embedded (base64) to link plots/NAME.png instead, for each
    image whose bytes equal a png beside it (nothing else in the page changes); returns how many were linked."""
    import base64
    pngs = {p.read_bytes(): p.name for p in sorted((page.parent / "plots").glob("*.png"))}
    n = 0

    def link(m: re.Match) -> str:
        nonlocal n
        name = pngs.get(base64.b64decode(m.group(2)))
        if name is None:
            return m.group(0)
        n += 1
        return f"<img alt='{m.group(1)}' src='plots/{html.escape(name)}'>"

    text = page.read_text()
    new = _EMBEDDED.sub(link, text)
    if new != text:
        write_atomic(page, new)
    return n
