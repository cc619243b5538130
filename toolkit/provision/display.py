"""Terminal side of a provisioning run: live progress from runner events and the per-host recap."""

from __future__ import annotations

from rich.live import Live
from rich.table import Table
from rich.text import Text

from toolkit.provision.runner import Event, HostRecap, ProvisionResult

STYLE = {"ok": "green", "changed": "yellow", "failed": "red", "unreachable": "red", "skipped": "cyan",
         "not run": "dim"}


class LiveProgress:
    """On a terminal: a live table (host, current task, ok/changed/failed counts). Otherwise plain lines:
    each task once, then each change or failure; quiet for ok/skipped results."""

    def __init__(self, console, hosts: list[str]):
        self.console = console
        self.plain = console.no_color or not console.is_terminal
        self.rows = {h: {"task": "", "ok": 0, "changed": 0, "failed": 0, "last": ""} for h in hosts}
        self.task = ""
        self.live = None if self.plain else Live(self._table(), console=console, refresh_per_second=8,
                                                 transient=True)
        self._printed_task = ""

    def __enter__(self):
        if self.live:
            self.live.__enter__()
        return self

    def __exit__(self, *exc):
        if self.live:
            self.live.__exit__(*exc)

    def __call__(self, ev: Event) -> None:
        if ev.kind == "task":
            self.task = ev.task
        else:
            row = self.rows.setdefault(ev.host, {"task": "", "ok": 0, "changed": 0, "failed": 0, "last": ""})
            row["task"], row["last"] = ev.task, ev.kind
            if ev.kind in ("ok", "changed"):
                row["ok"] += 1
            if ev.kind == "changed":
                row["changed"] += 1
            if ev.kind in ("failed", "unreachable"):
                row["failed"] += 1
            if self.plain and ev.kind in ("changed", "failed", "unreachable"):
                if self._printed_task != ev.task:
                    self.console.print(f"TASK [{ev.task}]", markup=False)
                    self._printed_task = ev.task
                line = f"  {ev.kind}: {ev.host}"
                if ev.message:
                    line += ": " + ev.message.splitlines()[0][:200]
                self.console.print(line, markup=False)
            if ev.diff:
                if not self.plain and self._printed_task != ev.task:
                    self.console.print(f"TASK [{ev.task}]", markup=False)
                    self._printed_task = ev.task
                self.console.print(f"  diff on {ev.host}:\n" + "\n".join("    " + l for l in ev.diff.splitlines()),
                                   markup=False, highlight=False)
        if self.live:
            self.live.update(self._table())

    def _table(self) -> Table:
        t = Table(title=f"TASK [{self.task}]" if self.task else "starting ansible-playbook", title_justify="left")
        for col in ("host", "task", "ok", "changed", "failed"):
            t.add_column(col, justify="right" if col in ("ok", "changed", "failed") else "left")
        for host, r in self.rows.items():
            t.add_row(host, Text(r["task"][:60], style=STYLE.get(r["last"], "")), str(r["ok"]), str(r["changed"]),
                      Text(str(r["failed"]), style="red" if r["failed"] else ""))
        return t


def recap_table(result: ProvisionResult) -> Table:
    mode = " (check mode: nothing was changed)" if result.check else ""
    t = Table(title=f"PLAY RECAP {result.run_id}{mode}", title_justify="left")
    counts = ["ok", "changed", "failed", "unreachable", "skipped"]
    counts += [c for c in ("rescued", "ignored") if any(getattr(r, c) for r in result.hosts.values())]
    for col in ("host", "status", *counts):
        t.add_column(col, justify="left" if col in ("host", "status") else "right", no_wrap=True)
    for r in result.hosts.values():
        t.add_row(r.host, Text(r.status, style=STYLE.get(r.status, "")), *(str(getattr(r, c)) for c in counts))
    return t


def print_report(console, result: ProvisionResult) -> None:
    console.print(recap_table(result))
    if result.skips:
        console.print("Skipped on purpose (not failures):", markup=False)
        seen = set()
        for s in result.skips:
            key = (s.role, tuple(s.steps), s.reason)
            hosts = sorted({x.host for x in result.skips if (x.role, tuple(x.steps), x.reason) == key})
            if key in seen:
                continue
            seen.add(key)
            console.print(f"  {s.role} on {', '.join(hosts)}: {'; '.join(s.steps)}\n    why: {s.reason}", markup=False)
    for host, path in result.fingerprints.items():
        console.print(f"fingerprint {host}: {path}", markup=False)
    console.print(f"artifacts: {result.run_dir} ({result.elapsed_s:.0f} s)", markup=False)


__all__ = ["LiveProgress", "print_report", "recap_table", "HostRecap"]
