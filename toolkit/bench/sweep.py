"""A Matrix `sweep:` before its cells run: where its rates come from (docs/bench.md#sweep-rates-from-probes).

A new run probes the baseline arm on a launch of its own, before the archive exists: a synchronous probe
(one request in flight, closed loop: its req/s is the synchronous rate) and a throughput probe
(`probe_concurrency` in flight: its req/s is the saturation rate), on the first workload's prompts. The
rates (toolkit.schema.sweep.sweep_rates, linear or geometric) then become every arm's open-loop cells, so the
arms are compared at the same x. A replay (`results reproduce`) takes the rates its original recorded, and
--resume the ones its own manifest holds (toolkit.bench.plan.RunPlan.resume): neither probes again.

The probes are archived beside the cells, not as cells (probes/<kind>.json, CellSummary's shape, and their
requests): a closed-loop probe is not a level of the run's rate axis, and no speed-up, crossover, SLO
capacity or diff reads it. The manifest's `sweep` names them.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from toolkit.bench.arm import START_TIMEOUT_S, make_launcher
from toolkit.bench.inputs import Origin
from toolkit.bench.plan import Cell, RunPlan, probe_concurrency
from toolkit.errors import ToolFailure, ToolkitError
from toolkit.results.archive import ArchiveWriter
from toolkit.schema.keys import rate_text
from toolkit.schema.metrics import figure_of
from toolkit.schema.records import CellSummary, RequestRecord
from toolkit.schema.sweep import SweepRecord, rates_note, sweep_rates


@dataclass
class Probed:
    """A sweep's rates and the probe cells that chose them (none for rates taken from another run)."""

    record: SweepRecord
    cells: dict[str, tuple[CellSummary, list[RequestRecord]]] = field(default_factory=dict)
    log: str = ""  # the probed server's log (start-up and last lines)

    def archive(self, writer: ArchiveWriter) -> None:
        """The probes under probes/: <kind>.json (a CellSummary) and <kind>.jsonl.gz (its requests); the
        server's log as logs/<arm>__probe.log."""
        if self.log:
            writer.write_file(f"logs/{self.record.arm}__probe.log", self.log + "\n")
        for kind, (summary, records) in self.cells.items():
            lines = b"".join(r.model_dump_json(exclude_defaults=True).encode() + b"\n" for r in records)
            writer.write_file(f"probes/{kind}.jsonl.gz", gzip.compress(lines, compresslevel=6, mtime=0))
            writer.write_file(f"probes/{kind}.json", summary.model_dump_json(indent=2) + "\n")


def choose_rates(plan: RunPlan, log_dir: Path, log: Callable[[str], None], origin: Origin | None = None) -> Probed:
    """The sweep's rates, set on the plan: the replayed run's (origin.sweep), else from new probes."""
    if origin is not None and origin.sweep is not None:
        record = origin.sweep.model_copy(update={"source": f"run {origin.run_id}", "probes": {}})
        log(f"sweep: the rates of run {origin.run_id}, not probed again: {_rates(record.rates)} req/s")
        probed = Probed(record)
    else:
        probed = probe(plan, log_dir, log)
    plan.set_sweep(probed.record)
    return probed


def probe(plan: RunPlan, log_dir: Path, log: Callable[[str], None]) -> Probed:
    """Start the baseline's server, run the two probes, stop it; the rates from what they measured."""
    m, arm = plan.m, plan.m.baseline_arm
    slot = next(s for s in plan.slots if arm in s.arms)
    domain, conc = next(iter(plan.workloads)), probe_concurrency(m)
    launcher = make_launcher(plan, slot, arm, log_dir, tag="probe")
    if isinstance(launcher, ToolkitError):
        raise ToolFailure(f"the sweep cannot probe arm {arm}: {launcher.message}", hint=launcher.hint)
    log(f"sweep: probing arm {arm} on {domain}: one request in flight, then {conc}")
    cells: dict[str, tuple[CellSummary, list[RequestRecord]]] = {}
    try:
        try:
            launcher.start()
            launcher.wait_healthy(timeout_s=START_TIMEOUT_S)
        except ToolkitError as exc:
            raise ToolFailure(f"the sweep cannot probe arm {arm}: {exc.message}",
                              hint=exc.hint or launcher.log_tail(20)) from None
        for kind, c in (("sync", 1), ("throughput", conc)):
            cells[kind] = _probe_cell(plan, launcher, Cell(arm, domain, c, 0), kind)
    finally:
        launcher.stop()
    log_text = _log(launcher)
    sync, sat = (_rate(cells[k][0], k, arm) for k in ("sync", "throughput"))
    rates = sweep_rates(sync, sat, m.sweep.points, m.sweep.spacing)
    tp = cells["throughput"][0]
    note = rates_note(sync, sat, conc, m.sweep.points, rates, tp.n_requests, tp.duration_s)
    record = SweepRecord(arm=arm, points=m.sweep.points, spacing=m.sweep.spacing, sync_rate=sync,
                         saturation_rate=sat, probe_concurrency=conc, rates=rates, note=note,
                         probes={k: f"probes/{k}.json" for k in cells})
    log(f"sweep: synchronous {sync:.3g} req/s, saturation {sat:.3g} req/s (c={conc}): every arm runs "
        f"{_rates(rates)} req/s" + (f" ({note})" if note else ""))
    return Probed(record, cells, log_text)


def _log(launcher) -> str:
    from toolkit.scrub import scrub_text
    from toolkit.serve.logs import TAIL_LINES, head_and_tail

    text = launcher.log_text()
    kept = head_and_tail(text) if text else launcher.log_tail(TAIL_LINES)
    return scrub_text(kept) if kept else ""


def _probe_cell(plan: RunPlan, launcher, cell: Cell, kind: str) -> tuple[CellSummary, list[RequestRecord]]:
    """One closed-loop probe, summarized as a cell is (toolkit.loadgen.summary)."""
    from toolkit.loadgen import run, run_cell
    from toolkit.loadgen.summary import summarize

    load, workload, prompts = plan.load(cell), plan.workloads[cell.domain], plan.prompts(cell)
    who = dict(model=launcher.model, arm=cell.arm, domain=cell.domain, repeat=0,
               check_alive=lambda: launcher.check_alive(during=f"the sweep's {kind} probe"))
    step = launcher.cell_step  # e.g. a batch job's: the load generator runs beside its server
    records = (step(f"probe-{kind}", load, prompts, **who) if step is not None
               else run(run_cell(launcher.base_url, load, prompts, **who)))
    summary = summarize(records, arm=cell.arm, domain=cell.domain, concurrency=cell.concurrency, repeat=0,
                        output_len=plan.m.output_len, workload_hash=workload.hash,
                        sampling={**plan.sampling(), "workers": load.processes}, load=load)
    return summary, records


def _rate(summary: CellSummary, kind: str, arm: str) -> float:
    stat = summary.metrics.get("request_s")
    value = figure_of(stat) if stat is not None else None
    if summary.status != "ok" or not value:
        raise ToolFailure(f"the sweep's {kind} probe of arm {arm} measured no request rate"
                          + (f": {summary.reason}" if summary.reason else ""),
                          hint="its rates come from the probes: fix what failed (the server's log) and run again")
    return float(value)


def _rates(rates: list[float]) -> str:
    return ", ".join(rate_text(r) for r in rates)
