"""One arm of a matrix run on its slot: start its server, learn what the server says about itself, run
the arm's cells in order against it (each archived as soon as it is done), stop it. A server that will
not start, or dies, fails the arm's remaining cells with the reason and its log tail: failed cells are
results too. Any other exception (in the load generator, its workers, or a bug here) fails the cell it
happened in, with its reason and traceback, and the arm goes on: a cell is never silently missing."""

from __future__ import annotations

import dataclasses
import json
import shlex
import time
from pathlib import Path
from typing import Any, Callable

from toolkit.bench.hostinfo import launch_machine
from toolkit.bench.hostload import HostLoad
from toolkit.bench.ledger import Ledger
from toolkit.bench.plan import Cell, RunPlan, Slot
from toolkit.errors import ToolFailure, ToolkitError
from toolkit.schema.eligibility import busy_check
from toolkit.schema.keys import launch_suffix
from toolkit.schema.manifest import ArmState, CommandError, LaunchRecord, Window
from toolkit.schema.records import CellSummary, RequestRecord
from toolkit.targets import LaunchArgs

START_TIMEOUT_S = 600


def make_launchers(plan: RunPlan, log_dir: Path) -> dict[str, Any]:  # data-keyed: arm (its launcher, or why none)
    """Every arm's launcher (toolkit.serve.Launcher), made but not started, so that the manifest records
    the exact command; an arm whose launcher cannot be made maps to the ToolkitError saying why."""
    out: dict[str, Any] = {}
    for slot in plan.slots:
        for arm in slot.arms:
            if not plan.todo.get(arm):
                continue
            try:
                out[arm] = _launcher_for(plan, arm, plan.launcher_kwargs(slot, arm, log_dir))
            except ToolkitError as exc:
                out[arm] = exc
            except Exception as exc:  # noqa: BLE001 - e.g. transformers refusing a dummy model: the arm fails
                out[arm] = ToolFailure(f"{type(exc).__name__}: {exc}")
    return out


def command_of(launcher) -> str | CommandError | None:
    """What the manifest records as an arm's command."""
    if isinstance(launcher, ToolkitError):
        return CommandError(error=launcher.message)
    return shlex.join(launcher.command) if launcher is not None and launcher.command else None


def _json(obj: Any) -> str:
    return json.dumps(obj, indent=1, sort_keys=True, default=str)


def make_launcher(plan: RunPlan, slot: Slot, arm: str, log_dir: Path, launch: int = 0, warmup: bool = False,
                  tag: str | None = None):
    """A fresh launcher for one launch of an arm (its own log file; `tag`: a launch outside the measured ones,
    e.g. a sweep's probes), or the ToolkitError of making one."""
    tag = "warmup" if warmup else tag
    try:
        kw = plan.launcher_kwargs(slot, arm, log_dir)
        kw = dataclasses.replace(kw, log_path=Path(log_dir) / (f"{arm}__{tag}.log" if tag else
                                                               f"{arm}{launch_suffix(launch)}.log"))
        return _launcher_for(plan, arm, kw)
    except ToolkitError as exc:
        return exc


def _launcher_for(plan: RunPlan, arm: str, kw: LaunchArgs):
    """The arm's launcher, as the target kind makes it (toolkit.targets)."""
    return plan.target.launcher(plan, arm, kw)


class ArmRunner:
    """One launch of one arm: start its server, run the launch's cells, stop it."""

    def __init__(self, plan: RunPlan, ledger: Ledger, slot: Slot, arm: str, launcher, launch: int = 0,
                 position: int | None = None):
        self.plan, self.ledger, self.slot, self.arm = plan, ledger, slot, arm
        self.launcher = launcher  # a toolkit.serve.Launcher, or the ToolkitError of making one
        self.launch, self.suffix = launch, launch_suffix(launch)
        self.record = LaunchRecord(arm=arm, launch=launch, position=position, started_at=time.time(), ok=True,
                                   cells=[c.key for c in plan.launch_todo(arm, launch)])

    def run(self, cells: list[Cell]) -> None:
        try:
            self._run(cells)
        finally:
            self.ledger.add_launch(self.record)

    def _run(self, cells: list[Cell]) -> None:
        if isinstance(self.launcher, ToolkitError):
            self.record.ok, self.record.error = False, self.launcher.message
            self.fail(cells, f"cannot launch arm {self.arm}: {self.launcher.message}", self.launcher.hint or "")
            return
        if not self._start(cells):
            return
        hardware = self.launcher.hardware or self.slot.hardware  # where a batch job's server came up
        self.record.machine = launch_machine(hardware, self.slot.name)
        window = Window(slot=self.slot.name, hardware=hardware, start=time.time(), end=None, arm=self.arm,
                        launch=self.launch)
        self.ledger.set_arm(self.arm, window=window, label=self.arm + self.suffix)
        try:
            self._run_cells(cells)
        finally:
            window.end = time.time()
            t0 = time.monotonic()
            self.launcher.stop()
            took = time.monotonic() - t0
            self.record.stop_s = took
            self.ledger.add_time("stop_s", self.arm, took)
            self._stopped()
            self._archive_log()

    def _start(self, cells: list[Cell]) -> bool:
        launcher, t0 = self.launcher, time.monotonic()
        try:
            if self.ledger.progress:
                self.ledger.progress.arm_starting(self.arm)
            launcher.start()
            for name, text in launcher.archive_files().items():  # e.g. a batch job's script
                self.ledger.write_file(name, text)
            self._note_job()  # e.g. a batch job's id, into the manifest the moment it exists
            cache = launcher.jit_cache  # toolkit.serve.jitcache: judged warm just before the start
            if cache is not None:
                self.record.warm_start, self.record.jit_cache = cache.warm, str(cache.folder)
            progress = self.ledger.progress
            launcher.wait_healthy(timeout_s=START_TIMEOUT_S, progress=(lambda text: progress.arm_waiting(
                self.arm, text)) if progress else None)
            took = time.monotonic() - t0
            if cache is not None:  # what the start compiled, counted before anything else can add kernels
                self.record.compiled_files = cache.compiled_since_prepare()
            self.ledger.set_arm(self.arm, info=self._server_facts())
            self._note_job()  # and the node it runs on
            self.record.startup_s = took
            self.ledger.add_time("launch_s", self.arm, took)
            return True
        except Exception as exc:  # noqa: BLE001 - a ToolkitError says why; anything else is named with its type
            took = time.monotonic() - t0
            message, hint = _reason(exc)
            self.record.ok, self.record.error, self.record.startup_s = False, message, None
            self.ledger.add_time("launch_failed_s", self.arm, took)
            self.fail(cells, f"{message} ({took:.1f} s after launch)", hint or launcher.log_tail(20))
            launcher.stop()
            self._stopped()
            self._archive_log()
            return False

    def _run_cells(self, cells: list[Cell]) -> None:
        for i, cell in enumerate(cells):
            if self.ledger.stopping.is_set():
                return
            try:
                self._run_cell(cell)
                self.launcher.check_alive(during=f"cell {cell.key}")
            except ToolFailure as exc:
                if self.launcher.exit_code() is None:  # the server lives (a load worker failed): this cell only
                    if not self.ledger.is_done(cell):
                        self.fail([cell], exc.message, exc.hint or "", records=getattr(exc, "records", []),
                                  workload_hash=self.plan.workloads[cell.domain].hash)
                    continue
                reason, tail = f"server died: {exc.message}", self.launcher.log_tail(20)
                self.record.ok, self.record.error = False, reason
                if not self.ledger.is_done(cell):
                    self.fail([cell], reason, tail, records=getattr(exc, "records", []),
                              workload_hash=self.plan.workloads[cell.domain].hash)
                self.fail(cells[i + 1:], reason, tail)
                return
            except Exception as exc:  # noqa: BLE001 - this cell fails with the reason; the next ones still run
                if not self.ledger.is_done(cell):
                    self.fail_unexpected([cell], exc)

    def _server_facts(self) -> ArmState:
        """The launcher's facts plus, for SGLang (launched or external), what the server says about itself:
        /server_info archived as servers/<arm>.json (servers/<arm>__l<launch>.json for later launches), its
        limits and speculative settings, and each preset flag it reports differently. The 48-request cap is
        read from the server, not assumed."""
        from toolkit.engines import get, preset_meaning, sglang
        from toolkit.serve.sglang import preset_mismatches

        info = self.launcher.info()
        env, name = self.plan.env_of(self.arm), self.plan.preset_name(self.arm)
        preset, meaning = env.servers[name], preset_meaning(env, name)
        info.add(external=not self.plan.target.starts_servers, speculative_algorithm=meaning.algorithm)
        eng = get(env.engine)
        if not eng.reports_server_info:
            return info
        # the /server_info the launcher read (kept whole as an extra), archived as a file of its own
        raw = info.model_extra.pop("server_info", None) or self.launcher.server_info()
        info.add_state(eng.server_state(raw))
        if raw and raw.get(sglang.SERVER_INFO_LOAD_FORMAT):
            # `dummy`: random weights, said by the server itself
            info.add(load_format=raw[sglang.SERVER_INFO_LOAD_FORMAT])
        if raw:
            from toolkit.scrub import scrub

            name = f"servers/{self.arm}{self.suffix}.json"
            self.ledger.write_file(name, _json(scrub(raw)))
            info.server_info_file = self.record.server_info_file = name
            info.add(preset_mismatches=preset_mismatches(preset, raw), max_running_requests_source="server_info")
        elif meaning.cap_implicit:
            # no /server_info: SGLang's documented behaviour, marked as assumed
            info.add(max_running_requests=info.max_running_requests or meaning.cap,
                     max_running_requests_source="assumed (no /server_info)")
        info.max_running_requests_implicit = meaning.cap_implicit
        log = self.launcher.log_text()
        if log:  # SGLang's own word on the cap, quoted by the methodology check
            from toolkit.scrub import scrub_text
            from toolkit.serve.logs import cap_line

            info.max_running_requests_log_line = cap_line(scrub_text(log))
        return info.add(speculative_algorithm=info.speculative_algorithm
                        or info.speculative.get("speculative_algorithm"), cells={})

    def _speculative(self) -> bool:
        info = self.ledger.arm_info.get(self.arm)
        return bool(info and info.speculative_algorithm)

    def _acceptance(self, cell: Cell, summary: CellSummary, probe) -> None:
        """Where the wire gave no steps per request, the cell's acceptance from the server's own counts
        (toolkit.bench.acceptance), labelled with its source; for SGLang also its server-wide figure since
        the flush, kept beside the cell's as a cross-check."""
        if summary.status == "ok" and "accept_length" not in summary.metrics:
            got = probe.result(summary.metrics["e2e_ms"].n if "e2e_ms" in summary.metrics else 0)
            if got is not None:
                from toolkit.schema.metrics import figure

                n = int(got.counts.get("requests", 0)) or summary.n_requests - summary.n_errors
                summary.metrics["accept_length"] = figure(got.value, n)
                summary.accept_source, summary.accept_counts = got.source, got.counts or None
        info = self.ledger.arm_info.get(self.arm)
        if info and info.server_info_read:
            from toolkit.serve.sglang import server_state

            st = server_state(self.launcher.server_info())
            self.ledger.cell_state(self.arm, cell.key, {"avg_spec_accept_length": st.avg_spec_accept_length})

    def _run_cell(self, cell: Cell) -> None:
        from toolkit.bench.acceptance import probe_for
        from toolkit.loadgen import run, run_cell
        from toolkit.loadgen.summary import summarize

        m, workload, launcher = self.plan.m, self.plan.workloads[cell.domain], self.launcher
        prompts, cell_load = self.plan.prompts(cell), self.plan.load(cell)
        flushed = self._flush()
        self.ledger.set_flushed(cell.arm, flushed is not False)
        probe = probe_for(launcher, self.plan.engine_of(cell.arm), speculative=self._speculative(), flushed=flushed,
                          warmup=cell_load.warmup)
        probe.start()
        on_record = self.ledger.progress.on_record(cell) if self.ledger.progress else None
        telemetry = _telemetry_start()
        step = launcher.cell_step  # e.g. a batch job's: the load generator runs beside its server
        # the host's load over the cell (a busy host is a methodology warning); not where the load generator
        # runs on another machine (a job step): sampling this one would judge the wrong host
        load = HostLoad().start() if step is None else None
        t0 = time.monotonic()
        who = dict(model=launcher.model, arm=cell.arm, domain=cell.domain, repeat=cell.repeat, on_record=on_record,
                   on_measure=probe.measured, check_alive=lambda: launcher.check_alive(during=f"cell {cell.key}"))
        try:
            records = (step(cell.key, cell_load, prompts, **who) if step is not None
                       else run(run_cell(launcher.base_url, cell_load, prompts, **who)))
        finally:
            host = load.stop() if load is not None else None
        self.ledger.cell_time(cell.arm, time.monotonic() - t0)
        samples = telemetry.stop() if telemetry else None
        records = _launched(records, cell.launch)
        summary = summarize(records, arm=cell.arm, domain=cell.domain, concurrency=cell.concurrency,
                            repeat=cell.repeat, launch=cell.launch, output_len=m.output_len, workload_hash=workload.hash,
                            sampling={**self.plan.sampling(), "workers": cell_load.processes},  # as run; diff ignores it
                            load=cell_load)
        summary.synthetic_acceptance = self.plan.synthetic_level(cell.arm)
        if cell_load.arrivals is not None:  # a trace's cell: which trace at which speed, not a seeded process
            summary.arrival = self.plan.trace_record(cell)
        if host is not None:
            summary.host = host
            summary.checked = [*summary.checked, "busy-host"]
            busy = busy_check(host)
            if busy is not None:
                summary.checks = [*summary.checks, busy]
        if samples:
            self.ledger.write_file(f"telemetry/{cell.key}.json", _json([dataclasses.asdict(s) for s in samples]))
        self._acceptance(cell, summary, probe)
        self.ledger.record(cell, summary, records)

    def _flush(self) -> bool | None:
        """Reset the server's cumulative counters before a cell: True when done, False when that failed (a
        methodology warning), None for a server with nothing to reset or one the toolkit leaves alone
        (external: it counts as fresh, but its cumulative figures span cells)."""
        try:
            return self.launcher.flush_cache()
        except Exception:  # noqa: BLE001 - reported as a methodology warning
            return False

    def fail(self, cells: list[Cell], reason: str, log_tail: str, records: list[RequestRecord] | None = None,
             workload_hash: str = "") -> None:
        """Archive cells that could not be measured (server would not start, or died): status failed,
        with the reason, the log tail and whatever requests did complete."""
        from toolkit.scrub import scrub_text

        for cell in cells:
            s = CellSummary(arm=self.arm, domain=cell.domain, concurrency=cell.concurrency, rate=cell.rate,
                            repeat=cell.repeat,
                            launch=cell.launch, output_len=self.plan.m.output_len, workload_hash=workload_hash, status="failed",
                            reason=reason, log_tail=scrub_text(log_tail)[-4000:] if log_tail else None,
                            sampling=self.plan.sampling(), n_requests=len([r for r in records or [] if not r.warmup]),
                            synthetic_acceptance=self.plan.synthetic_level(cell.arm))
            self.ledger.record(cell, s, _launched(records or [], cell.launch))

    def fail_unexpected(self, cells: list[Cell], exc: BaseException) -> None:
        """Archive cells an unexpected exception stopped: the reason names it, the log tail is its traceback."""
        import traceback

        message, hint = _reason(exc)
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        self.fail(cells, message, "\n".join(x for x in (hint, tb) if x))

    def _stopped(self) -> None:
        """How the stop went (signals sent, escalations) into the launch record; an escalation is also a
        warning on the arm (a methodology check)."""
        notes = self.launcher.stop_info()
        job = self.launcher.job_launch()  # a batch job's: where it ran and how it ended
        if job is not None:
            self.record.slurm = job
        self._note_job()
        if notes is not None:
            self.record.stop = notes
        if notes is not None and notes.warnings:
            self.ledger.stop_warnings(self.arm, notes.warnings)

    def _note_job(self) -> None:
        """The launch as it is now into the manifest, where the target kind records one (a Slurm job: submitted,
        running on its node, ended, in slurm.jobs)."""
        self.ledger.amend_manifest(lambda manifest: self.plan.target.note_launch(manifest, self.launcher, self.launch))

    def _archive_log(self) -> None:
        """The server's log: its start-up (to the first answered health check) and its last lines; where the
        start-up's time went, by SGLang's own marks in it."""
        from toolkit.serve.logs import TAIL_LINES, head_and_tail, startup_phases

        text = self.launcher.log_text()
        phases = startup_phases(text, self.record.started_at, self.record.startup_s) if text else None
        if phases:
            self.record.startup_phases = phases
        kept = head_and_tail(text) if text else self.launcher.log_tail(TAIL_LINES)
        if kept:
            from toolkit.scrub import scrub_text

            name = f"logs/{self.arm}{self.suffix}.log"
            self.ledger.write_file(name, scrub_text(kept) + "\n")
            self.record.log_file = name


def warm_up(plan: RunPlan, ledger: Ledger, slot: Slot, arm: str, launcher, cells: list[Cell],
            log: Callable[[str], None]) -> None:
    """The Matrix's `warmup_launch`: start the arm's server, run `cells` (the first measured launch's) and
    discard them, stop it. It fills the machine's kernel and JIT caches and warms the GPU, so the first
    measured launch is not the machine's first start (docs/results.md#launch-noise). Only the launch record
    is kept (Derived.warmup_launches); a warm-up that fails is recorded and the measured launches go on."""
    from toolkit.loadgen import run, run_cell

    record = LaunchRecord(arm=arm, launch=0, warmup=True, started_at=time.time(), ok=True,
                          cells=[c.key for c in cells], machine=launch_machine(slot.hardware, slot.name))
    t0 = time.monotonic()
    log(f"arm {arm}: warm-up launch (its {len(cells)} cell(s) run and are discarded)")
    try:
        if isinstance(launcher, ToolkitError):
            raise launcher
        launcher.start()
        launcher.wait_healthy(timeout_s=START_TIMEOUT_S)
        record.startup_s = time.monotonic() - t0
        for cell in cells:
            if ledger.stopping.is_set():
                break
            run(run_cell(launcher.base_url, plan.load(cell), plan.prompts(cell), model=launcher.model, arm=arm,
                         domain=cell.domain, repeat=cell.repeat,
                         check_alive=lambda c=cell: launcher.check_alive(during=f"warm-up of cell {c.key}")))
    except Exception as exc:  # noqa: BLE001 - the measured launches say what is wrong with the arm
        message, _ = _reason(exc)
        record.ok, record.error = False, message
        log(f"arm {arm}: the warm-up launch failed: {message}")
    finally:
        if not isinstance(launcher, ToolkitError):
            t1 = time.monotonic()
            launcher.stop()
            record.stop_s = time.monotonic() - t1
        ledger.add_time("warmup_launch_s", arm, time.monotonic() - t0)
        ledger.add_warmup(record)


def _launched(records: list[RequestRecord], launch: int) -> list[RequestRecord]:
    """The records with the launch that served them (the load generator knows cells, not launches)."""
    for r in records:
        r.launch = launch
    return records


def _reason(exc: BaseException) -> tuple[str, str | None]:
    """(reason, hint) of an exception: a ToolkitError's own words, anything else its type and message."""
    if isinstance(exc, ToolkitError):
        return exc.message, exc.hint
    return f"unexpected {type(exc).__name__} in the runner: {exc}", None


def _telemetry_start():
    try:
        from toolkit.gpu.telemetry import Telemetry, gpu_present
    except ImportError:
        return None
    if not gpu_present():
        return None
    t = Telemetry(interval_s=0.5)
    t.start()
    return t
