"""`results list`: the archived runs as one table (newest first), corrupt runs with their error."""

from __future__ import annotations

from toolkit.results.report.model import Para, Report, Table

LIST_COLUMNS = ["RUN", "STARTED (UTC)", "STATUS", "ENV", "HOST", "GPU", "ARMS", "CELLS"]


def build_list_report(rows: list[dict]) -> Report:
    r = Report("runs", data=rows)
    if not rows:
        return r.add(Para("no runs found"))
    out = []
    for x in rows:
        if x.get("status") == "corrupt":
            out.append([f"{x['matrix']}/{x['run_id']}", "-", "CORRUPT", "-", "-", "-", x.get("error", ""), "-"])
            continue
        status = x["status"] + (" (interrupted)" if x.get("interrupted") or x["status"] == "incomplete" else
                                f" ({x['cells_failed']} failed)" if x["status"] == "partial" and x.get("cells_failed")
                                else "")
        bad = x.get("unverified") or []
        if bad:  # a tampered or truncated file: whatever summary.json says, the figures are not to be trusted
            first = bad[0].split(":", 1)[0]
            status = f"UNVERIFIED (tampered: {first}{f' +{len(bad) - 1} more' if len(bad) > 1 else ''}) {status}"
        out.append([f"{x['matrix']}/{x['run_id']}", (x.get("started_at") or "-")[:19].replace("T", " "), status,
                    x.get("env_hash") or "-", x.get("host") or "-", x.get("gpu") or "-",
                    ",".join(x.get("arms") or []) or "-", str(x.get("cells", 0))])
    return r.add(Table(LIST_COLUMNS, out, align="lllllllr"))
