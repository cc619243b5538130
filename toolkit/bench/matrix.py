"""The matrix runner: one server launch per arm, every (workload x concurrency x repeat) cell against
it, the same prompts in the same order for every arm, each cell archived as soon as it is done.

    result = run_matrix(load_spec("envs/matrices/quickstart.yaml"), results_root=Path("results"))
    result.path, result.status, result.cells, result.derived

Three parts: the plan (toolkit.bench.plan: cells, prompts, slots, launchers, manifest, launch rounds), one
ArmRunner per launch of an arm (toolkit.bench.arm: start, cells, stop), and this module, which runs the
slots side by side, handles interrupts, derives speedups and checks, finalizes the archive and returns a
MatrixResult. With `launches: N` each arm's server is launched N times, in rounds whose arm order is a
seeded shuffle (recorded in the manifest): every launch runs all of the arm's cells.

Arms are placed on *slots*: local engines (target.parallel), hosts of a Hosts group, or external URLs.
Arms on different slots run side by side (threads); arms on one slot run one after another.
"""

from __future__ import annotations

import shutil
import signal
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from toolkit.bench import derive
from toolkit.bench.arm import ArmRunner, command_of, make_launcher, make_launchers, warm_up
from toolkit.bench.hostload import active_run
from toolkit.bench.inputs import Origin, archive_run
from toolkit.bench.ledger import Ledger
from toolkit.bench.plan import RunPlan, plan_run, request_param_notes, run_manifest
from toolkit.bench.slots import Slot
from toolkit.engines import preset_meaning
from toolkit.results.archive import ArchiveWriter, open_archive
from toolkit.results.report import run_markdown
from toolkit.results.speedups import stage1_rounds
from toolkit.schema.keys import level_label, run_status
from toolkit.schema.manifest import AutoStop, BuildRecord, Check, Derived, Speedup, status_reason
from toolkit.schema.records import CellSummary
from toolkit.signals import catch, restore
from toolkit.specs import LoadedSpec


@dataclass
class MatrixResult:
    """What `toolkit bench matrix` prints: the run folder, its status, its cells and the derived results."""

    path: Path
    status: str  # toolkit.schema.keys.STATUSES: complete | partial | failed
    cells: list[CellSummary]
    derived: Derived
    interrupted: bool = False  # a signal stopped it: --resume completes it
    why: str = ""  # why it is not complete, in words

    @property
    def report(self) -> Path:
        return self.path / "report.md"


def run_matrix(spec: LoadedSpec, *, results_root: Path, resume: Path | None = None, progress: Any = None,
               log: Callable[[str], None] = print, origin: Origin | None = None,
               build: BuildRecord | None = None, purpose: str | None = None,
               round_seed: int | None = None) -> MatrixResult:
    """Run (or resume) a matrix and archive it under results_root/<matrix>/<run-id>/. `origin`: the run
    this one replays (toolkit.bench.reproduce), recorded in the manifest, with the image it runs.
    `build`: run this image instead of the one built from the environment's hash (bench tune's trials
    change the presets, hence the hash, not the image). `purpose`: recorded in the manifest
    (`noise-calibration`: toolkit.bench.noise). `round_seed`: the launch rounds' order seed (default: drawn
    afresh; a manifest's `round_seed` replays that run's orders)."""
    plan = plan_run(spec, round_seed=round_seed)  # the one reader of the spec: its Environment loaded once
    writer = _prepare(plan, resume, results_root, log)
    if build is not None:
        plan.build = build
    if origin is not None and origin.build is not None:
        plan.build = origin.build
    # Ctrl-C / SIGTERM from here to the end: once an archive exists, it is finalized (partial) whatever
    # phase the signal lands in (creating the archive, between cells, deriving); a second signal waits
    stopping, hold = threading.Event(), threading.Event()
    previous = _install_interrupts(stopping, hold)
    log_dir = Path(tempfile.mkdtemp(prefix="toolkit-logs-"))
    ledger = None
    try:
        try:
            probed = None
            if plan.m.sweep is not None and plan.sweep is None:  # a new sweep: its rates before any cell
                from toolkit.bench.sweep import choose_rates

                probed = choose_rates(plan, log_dir, log, origin)
            launchers = make_launchers(plan, log_dir)
            if writer is None:
                hold.set()  # a signal while the archive is being made only marks the run as stopping
                try:
                    writer = _new_archive(plan, launchers, results_root, origin, purpose, probed)
                finally:
                    hold.clear()
                if stopping.is_set():
                    raise KeyboardInterrupt
            ledger = Ledger(writer, progress, stopping)
            if resume:
                ledger.reload(open_archive(writer.path))
            with active_run(writer.path, plan.m.name):  # other runs on this host see this one while it runs
                interrupted, wall_s = _run_slots(plan, ledger, launchers, log, log_dir)
        except KeyboardInterrupt:
            if writer is None:
                raise  # nothing written yet
            log("interrupted: writing a partial run (resume with --resume)")
            interrupted, wall_s = True, None
            if ledger is None:
                ledger = Ledger(writer, None, stopping)
                if resume:
                    ledger.reload(open_archive(writer.path))
        finally:
            shutil.rmtree(log_dir, ignore_errors=True)  # their tails are archived under logs/
        return _finish(plan, ledger, writer, wall_s, interrupted)
    finally:
        restore(previous)


def _prepare(plan: RunPlan, resume: Path | None, results_root: Path, log: Callable[[str], None]) -> ArchiveWriter | None:
    """What the target needs before a server starts; a resumed run's archive (its plan narrowed to the cells it
    lacks, what a killed run left behind cleaned up), or for a new run what it can find (its power)."""
    from toolkit.bench.targets import prepare_target

    prepare_target(plan)  # extras and engines the target needs; https and API keys of external URLs
    if resume:
        writer = ArchiveWriter.resume(resume)
        plan.resume(writer.manifest, writer.done_cells())
        plan.target.resume(writer.path, writer.manifest, log)  # e.g. Slurm jobs a killed run left behind
        return writer
    from toolkit.bench.power import plan_power  # docs/results.md#power-before-spending

    log(plan_power(plan.hashes.get("environment"), plan.m.planned_launches, plan.m.requests, results_root,
                   env_name=plan.env_spec.model.name))
    return None


def _new_archive(plan: RunPlan, launchers: dict, results_root: Path, origin: Origin | None, purpose: str | None,
                 probed: Any) -> ArchiveWriter:
    """The run's archive with its manifest (the plan written down, the arms' commands, the target's record)
    and inputs/; a sweep's probes (`probed`) archived into it."""
    commands = {arm: command_of(launchers.get(arm)) for arm in plan.m.arm_names}
    manifest = run_manifest(plan, commands)
    if purpose:
        manifest = manifest.model_copy(update={"purpose": purpose})
    manifest = plan.target.manifest_record(plan, manifest)  # e.g. job scripts
    writer = archive_run(results_root, plan, manifest, origin)  # + inputs/
    if probed is not None:
        probed.archive(writer)
    return writer


def _finish(plan: RunPlan, ledger: Ledger, writer: ArchiveWriter, wall_s: float | None,
            interrupted: bool) -> MatrixResult:
    """The run's status, its derived results, the archive finalized."""
    # failed cells are results too (archived with their reason), but not a complete run: README "Exit codes"
    ok = sum(c.status == "ok" for c in ledger.cells)
    failed, missing = len(ledger.cells) - ok, plan.cells_planned - len(ledger.cells)
    status = run_status(ok, failed, missing, interrupted)
    why = status_reason(status, interrupted, ok, failed, missing, plan.cells_planned)
    ledger.close()  # a slot thread outliving the interrupt's join must not change the manifest from here on
    derived = derive_results(plan, ledger, wall_s)
    writer.finalize(status, derived, lambda: run_markdown(writer.path, None, status, why),
                    interrupted=interrupted)
    return MatrixResult(writer.path, status, list(ledger.cells), derived, interrupted, why)


def _run_slots(plan: RunPlan, ledger: Ledger, launchers: dict, log: Callable[[str], None],
               log_dir: Path | None = None) -> tuple[bool, float]:
    """Every slot in its own thread; on a slot, launch round by launch round, the round's arms one after
    another in the round's order (plan.rounds). Returns (interrupted, wall seconds)."""
    lost: list[str] = []  # cells that could not even be archived as failed: the run says they are missing
    at_round = {"r": 0, "stop": False}
    # launches_auto: the slots meet after every round, and the last to arrive applies the stopping rule
    barrier = threading.Barrier(len(plan.slots), action=lambda: _auto_round_safely(plan, ledger, at_round, log)) \
        if plan.m.launches_auto is not None else None

    def run_slot(slot: Slot) -> None:
        try:
            _slot_rounds(plan, ledger, slot, launchers, log, log_dir, barrier, at_round, lost)
        finally:
            if barrier is not None:
                barrier.abort()  # a slot that ends early (stopping, or done) never leaves the others waiting

    if ledger.progress:
        ledger.progress.start(plan.todo, plan.m)
    t0 = time.monotonic()
    threads = [threading.Thread(target=run_slot, args=(s,), name=s.name, daemon=True) for s in plan.slots]
    try:
        interrupted = _join_slots(threads, ledger, barrier, log)
    finally:
        if ledger.progress:
            ledger.progress.stop()
    for line in lost:
        log(line)
    if ledger.stopping.is_set():
        interrupted = True  # a signal landed between the slots' end and here
    return interrupted, time.monotonic() - t0


def _join_slots(threads: list[threading.Thread], ledger: Ledger, barrier: threading.Barrier | None,
                log: Callable[[str], None]) -> bool:
    """Start the slots' threads and wait for them; on a signal, stop every server and wait a little for the
    threads. Returns whether a signal stopped them."""
    try:
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(0.2)
    except (KeyboardInterrupt, SystemExit):
        ledger.stopping.set()
        if barrier is not None:
            barrier.abort()
        log("interrupted: stopping servers and writing a partial run (resume with --resume)")
        from toolkit.serve.base import stop_all

        stop_all()
        for t in threads:
            t.join(30)
        return True
    return False


def _slot_rounds(plan: RunPlan, ledger: Ledger, slot: Slot, launchers: dict, log: Callable[[str], None],
                 log_dir: Path | None, barrier: threading.Barrier | None, at_round: dict, lost: list[str]) -> None:
    """One slot's launches: its warm-up launches, then round by round its arms in the round's order; with
    launches_auto, the slots meet at `barrier` after each round (`at_round`: the round, and the rule's stop)."""
    if plan.m.warmup_launch:
        _warm_up_slot(plan, ledger, slot, log, log_dir)
    for launch, order in enumerate(plan.rounds):
        for position, arm in enumerate(order):
            if ledger.stopping.is_set():
                return
            cells = plan.launch_todo(arm, launch) if arm in slot.arms else []
            if not cells:
                continue
            launcher = launchers.pop(arm, None) or make_launcher(plan, slot, arm, log_dir, launch)
            runner = ArmRunner(plan, ledger, slot, arm, launcher, launch, position)
            try:
                runner.run(cells)
            except Exception as exc:  # noqa: BLE001 - a bug fails the launch's cells, never the slot's thread
                try:
                    runner.fail_unexpected([c for c in cells if not ledger.is_done(c)], exc)
                except Exception as again:  # noqa: BLE001 - e.g. the disk is full: say so, go on
                    lost.append(f"arm {arm} launch {launch}: {type(exc).__name__}: {exc}; archiving its cells "
                                f"as failed failed too: {type(again).__name__}: {again}")
        if barrier is not None:
            at_round["r"] = launch
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                return
            if at_round["stop"]:
                return


def _warm_up_slot(plan: RunPlan, ledger: Ledger, slot: Slot, log: Callable[[str], None], log_dir: Path | None) -> None:
    """`warmup_launch`, before the first round, in its order: the slot's arms with cells left to measure."""
    for arm in plan.rounds[0] if plan.rounds else []:
        first = next((plan.launch_todo(arm, n) for n in range(len(plan.rounds)) if plan.launch_todo(arm, n)), [])
        if arm in slot.arms and first and not ledger.stopping.is_set():
            warm_up(plan, ledger, slot, arm, make_launcher(plan, slot, arm, log_dir, warmup=True), first, log)


def _auto_round_safely(plan: RunPlan, ledger: Ledger, at_round: dict, log: Callable[[str], None]) -> None:
    try:
        _auto_round(plan, ledger, at_round, log)
    except Exception as exc:  # noqa: BLE001 - the rule failing must not break the barrier: the run goes on
        log(f"launches_auto: the stopping rule failed after round {at_round['r'] + 1} ({type(exc).__name__}: {exc}); "
            "going on to the next round")


@dataclass(frozen=True, slots=True)
class AutoDecision:
    """`launches_auto`'s rule after a round: stop (narrow, or at the most rounds), why (`stopped`: narrow | max |
    None), and the widest speed-up CI (±percent, None: not known yet) with its cell."""

    stop: bool
    stopped: str | None
    widest_pct: float | None
    widest: str


def auto_decision(rows: list[Speedup], halfwidth_pct: float, rounds: int, first: int,
                  most: int) -> AutoDecision | None:
    """`launches_auto`'s rule, after `rounds` rounds, on speed-up rows whose CIs are Stein's two-stage intervals
    (speedups with `stage1=first`): None before `first` rounds; else an AutoDecision. The variance of the first `first` rounds is fixed once they
    ran, so "every CI within ±halfwidth_pct" first holds at Stein's N = (t s0 / log(1 + h))^2 rounds, and the
    interval reported there covers at its level whatever the stop
    (docs/results.md#sequential-launches-launches_auto). A row with fewer rounds than `first` (a cell that failed
    in a round) has no such CI yet: not narrow."""
    if rounds < first:
        return None
    widths = [(derive.halfwidth_pct(r) if r.rounds >= first else None,
               f"{r.arm} {r.domain} {level_label(r.concurrency, r.rate)}") for r in rows]
    known = [w for w in widths if w[0] is not None]
    widest = max(known, default=(None, ""))
    narrow = bool(rows) and len(known) == len(widths) and widest[0] <= halfwidth_pct
    stop = narrow or rounds >= most
    return AutoDecision(stop, ("narrow" if narrow else "max") if stop else None, widest[0], widest[1])


def _auto_round(plan: RunPlan, ledger: Ledger, at_round: dict, log: Callable[[str], None]) -> None:
    """`launches_auto`, after round r (0-based) of every slot: Stein's two-stage rule (auto_decision). From
    stage1_rounds(launches) rounds on, stop when every paired speed-up's 95% CI (the mean of every round, the
    variance of the first stage's rounds) is within ±halfwidth_pct of its ratio; at `max`, stop whatever they
    are. Stopping on the CIs' width, never on their verdicts, keeps the rule blind to where the intervals lie;
    judging the width with the first stage's variance, never the latest rounds', keeps it from stopping because
    the variance happened to come out low (the old rule's intervals covered 89-92 %). Recorded as
    Derived.launches_auto."""
    auto, rounds = plan.m.launches_auto, at_round["r"] + 1
    first = stage1_rounds(plan.m.launches)
    if rounds < first:
        if rounds >= plan.m.launches:
            log(f"launches_auto: after round {rounds}, the first stage runs {first} rounds (the variance the rule "
                "judges the width with)")
        return
    rows = derive.speedups(ledger.cells, ledger.records, plan.m.baseline_arm, seed=plan.m.seed, stage1=first)
    d = auto_decision(rows, auto.halfwidth_pct, rounds, first, auto.max)
    widest = (d.widest_pct, d.widest)
    narrow = d.stopped == "narrow"
    if d.stop:
        at_round["stop"] = True
        plan.stopped_after = rounds
        ledger.auto = AutoStop(halfwidth_pct=auto.halfwidth_pct, max=auto.max, rounds_run=rounds, stopped=d.stopped,
                               widest_pct=widest[0], widest=widest[1], rule="stein-two-stage", stage1_rounds=first)
    log(f"launches_auto: after round {rounds}, the widest speed-up CI is "
        + (f"±{widest[0]:.1f}% ({widest[1]})" if widest[0] is not None else "not known yet")
        + (f": within ±{auto.halfwidth_pct:g}%, stopping" if narrow else
           f": the most rounds ({auto.max}), stopping" if rounds >= auto.max else
           f": wider than ±{auto.halfwidth_pct:g}%, one more round"))


# data-keyed: signal (signals.catch)
def _install_interrupts(stopping: threading.Event, hold: threading.Event | None = None) -> dict:
    """SIGINT/SIGTERM: mark the run as stopping *before* servers go down, so that requests failing
    because of the stop are not archived as failed cells (resume reruns those cells)."""
    def interrupt(signum, frame):  # noqa: ARG001
        if stopping.is_set():
            return  # already stopping: the partial run is being written
        stopping.set()
        if hold is None or not hold.is_set():  # while `hold` is set, the caller checks `stopping` itself
            raise KeyboardInterrupt

    return catch((signal.SIGINT, signal.SIGTERM), interrupt)


def shared_server(plan: RunPlan) -> set[str]:
    """Arms served by the baseline's own server (external URLs equal to the baseline's, e.g. bench tune's shared
    server): they and the baseline are one launch, so their speed-ups carry no launch noise between them."""
    urls = {a: u for s in plan.slots for a, u in plan.target.served_urls(s).items()}
    base = urls.get(plan.m.baseline_arm)
    return {a for a, u in urls.items() if base is not None and u == base and a != plan.m.baseline_arm}


def derive_results(plan: RunPlan, ledger: Ledger, wall_s: float | None = None) -> Derived:
    """Speedups, crossovers, threshold advice and methodology checks of what the ledger holds; with an slo
    block, goodput, capacity and the advice within the objectives (toolkit/results/slo.py)."""
    m = plan.m
    from toolkit.results.verdicts import verdicts

    measured = any(c.status == "ok" for c in ledger.cells)  # no cell succeeded: no advice from zero data
    shared = shared_server(plan)
    noise, noise_note = derive.speedup_noise(ledger.writer.path, m.launches, shared)
    rows = derive.speedups(ledger.cells, ledger.records, m.baseline_arm, seed=m.seed, noise=noise, shared=shared,
                           stage1=stage1_rounds(m.launches) if m.launches_auto is not None else None) \
        if measured else []
    spec_arms = ({a for a in m.arm_names if a != m.baseline_arm and preset_meaning(plan.env_of(a), plan.preset_name(a)).speculative}
                 if measured else set())
    v = verdicts(rows, ledger.cells, ledger.arm_info, spec_arms)  # crossovers and advice over usable levels
    checks = derive.methodology_checks(matrix=m, cells=ledger.cells, records=ledger.records,
                                       arm_info=ledger.arm_info, flushed=ledger.flushed,
                                       representativeness=plan.representativeness, windows=ledger.windows,
                                       dummy_arms=[a for a in m.arm_names if plan.is_dummy(a, ledger.arm_info.get(a))])
    checks += [Check(check="request-param-dropped", severity="warning", message=n) for n in request_param_notes(plan)]
    if m.launches > 1 and not plan.target.starts_servers:
        checks.append(Check(check="launches-of-external-servers", severity="warning",
                            message=f"launches: {m.launches} against external servers: the toolkit does not start "
                                    "them, so their launches are not relaunches and the launch noise is not sampled"))
    timing = ledger.timing.model_copy()
    timing.arms = ledger.windows
    if wall_s is not None:
        timing.wall_s = wall_s
        timing.overhead_ratio = derive.overhead_ratio(timing, [s.arms for s in plan.slots])
    derived = Derived(baseline=m.baseline_arm, **v._asdict(), speculative_arms=sorted(spec_arms), methodology=checks,
                      representativeness=plan.representativeness, arm_info=ledger.arm_info, timing=timing,
                      cells_planned=plan.cells_planned, cells_done=len(ledger.cells), launches=ledger.launches,
                      warmup_launches=ledger.warmups, launches_auto=ledger.auto, noise=noise_note)
    if m.slo is not None:  # from the archived cells, as `results slo` recomputes it
        from toolkit.results.archive import open_archive
        from toolkit.results.slo import analyse

        derived.slo = analyse(open_archive(ledger.writer.path), m.slo.objectives(), derived)
    return derived
