"""The report of one run: facts, the cells table, speedups, crossovers, what the servers said,
methodology checks, timing, server commands and (for `results report`) plots. Built from an archive
(`results show`, `results report`, the runner's report.md) or from a run's results before it is
archived (`from_result`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from toolkit import engines
from toolkit.results.archive import Archive
from toolkit.results.report.model import (Code, Facts, Heading, Image, Items, Para, Report, Table, fmt_centre,
                                          fmt_num, fmt_stat)
from toolkit.results.report.starts import starts_blocks
from toolkit.schema.keys import level_label, rate_text, synthetic_label
from toolkit.schema.manifest import ArmState, CommandError, Derived, SlurmRecord
from toolkit.schema.records import CellSummary, Stat
from toolkit.schema.slo import SloAnalysis
from toolkit.schema.sweep import SweepRecord

CELL_COLUMNS = ["arm", "domain", "c", "rep", "n", "err", "tok/s", "req/s", "TTFT p50", "TTFT p99", "TPOT p50",
                "ITL p50", "E2E p50", "E2E p99", "accept", "status"]
CELLS_NOTE = ("Latencies in ms. tok/s and req/s: the cell's throughput; ITL: per-chunk gap / tokens in the chunk, "
              "pooled over chunks; TPOT: (E2E - TTFT) / (tokens - 1) per request; accept: output tokens per "
              "verification step over the cell (where it came from: below). * marks a percentile from too few "
              "samples. status: `excluded: ...` no verdict uses the cell, `ok, ...` verdicts name it (why: below the "
              "table). Every metric, with CIs, is in `--json`; docs/results.md defines each.")
SPEEDUP_COLUMNS = ["arm", "domain", "c", "arm tok/s", "base tok/s", "throughput x", "paired x [95% CI]", "pairs",
                   "verdicts"]
SPEEDUP_NOTE = ("throughput x: the ratio of the cells' output tok/s. paired x: the ratio of per-prompt output rates "
                "(sum of tokens / sum of E2E) over the same prompts, 95% CI from a paired bootstrap. verdicts: "
                "`left out` (no crossover or advice uses the level), `named` (they use it and say so).")


@dataclass
class RunView:
    """What a run report is built from, whichever source it came from."""
    title: str
    facts: list[list[str]]
    cells: list[tuple[str, CellSummary, dict[str, Stat]]]  # key, summary, metrics read through the registry
    derived: Derived
    commands: list[str] = field(default_factory=list)
    description: str = ""
    data: dict = field(default_factory=dict)
    archive: Archive | None = None
    slo: SloAnalysis | None = None  # the run against its service-level objectives, when it has some
    noise: Any = None  # the launch noise the run can see (report/noise.py NoiseReport), two or more launches
    power: Any = None  # a one-launch run's minimum detectable effects (report/noise.py PowerReport)
    surface: dict | None = None  # the speed-up surface of synthetic-acceptance arms and its prediction (surface.py)
    represent: Any = None  # representativeness against real acceptance per domain (results/represent.py Represented)
    pairs: list["PairView"] = field(default_factory=list)  # `--pair ARM/REF`: speed-ups between any two arms
    arm_envs: list[dict] = field(default_factory=list)  # arms of other Environments: how each differs from the run's


@dataclass
class PairView:
    """The paired speed-ups of one arm over another of the same run (`results show/report --pair ARM/REF`),
    marked for verdicts, with the crossovers where ARM is speculative and REF is not."""
    arm: str
    ref: str
    speedups: list
    crossovers: list
    environments: str | None = None  # `ARM: its Environment; REF: its Environment` where the two differ


def status_text(status: str, why: str | None) -> str:
    """`partial (2 of 12 cells failed)`: the status with why it is not complete, as every renderer prints it."""
    return f"{status} ({why})" if why else status


def threshold_advice(derived: Derived, arm: str) -> str:
    """The one line of advice per speculative arm, as every renderer prints it (toolkit/results/verdicts.py)."""
    from toolkit.results.verdicts import advice_text

    return advice_text(derived.crossovers, arm)


def _arrival(spec: dict) -> str:
    a = spec.get("arrival") or {}
    process = a.get("process", "poisson")
    text = process + (f", burstiness {a.get('burstiness', 1.0):g}" if process == "gamma" else "")
    cap = spec.get("max_concurrency")
    return text + (f"; at most {cap} in flight" if cap else "; no cap on requests in flight")


def _traces(spec: dict) -> str | None:
    """`small: traces/small.jsonl x1, x2` per `trace:` workload (docs/bench.md#traces)."""
    out = []
    for w in spec.get("workloads") or []:
        if isinstance(w, dict) and w.get("trace"):
            speeds = w.get("speed", 1.0)
            speeds = speeds if isinstance(speeds, list) else [speeds]
            out.append(f"{w['name']}: {w['trace']} " + ", ".join(f"x{float(s):g}" for s in speeds))
    if not out:
        return None
    if not spec.get("rates"):  # the cap on requests in flight, said once (with rates: on the arrival row)
        out.append(_arrival(spec).split("; ", 1)[1])
    return "; ".join(out)


def _sweep(spec: dict, sweep: SweepRecord | None) -> str | None:
    """A sweep's line: its rates and how they were chosen (manifest `sweep`), or before they are known."""
    if not spec.get("sweep"):
        return None
    points = spec["sweep"].get("points")
    spacing = sweep.spacing if sweep is not None else spec["sweep"].get("spacing", "linear")
    how = " geometrically" if spacing == "geometric" else ""
    if sweep is None:
        return f"{points} points{how}, rates not chosen yet (the baseline's probes choose them)"
    where = "probes of " + sweep.arm if sweep.source == "probed" else f"the rates of {sweep.source}"
    return (f"{_rates(sweep.rates)}: {points} points{how} between synchronous {sweep.sync_rate:.3g} and saturation "
            f"{sweep.saturation_rate:.3g} req/s (c={sweep.probe_concurrency}; {where})"
            + (f"; {sweep.note}" if sweep.note else ""))


def _rates(rates: list[float]) -> str:
    return ", ".join(rate_text(r) for r in rates)


def arm_environments(m) -> str | None:
    """Each arm's engine and Environment, where arms come from several (a Matrix arm `{name, environment,
    preset}`); None where every arm is a preset of the run's own Environment."""
    if not any(info.environment is not None for info in m.arms.values()):
        return None
    own = m.environment.resolved or {}
    parts = []
    for arm, info in m.arms.items():
        e = info.environment
        name, engine, h = (e.name, e.engine, e.hash) if e is not None else \
            (m.environment.name or own.get("name"), own.get("engine"), m.environment.hash)
        parts.append(f"{arm}: {engine or '?'}, {name or '?'} ({(h or '-')[:12]})")
    return "; ".join(parts)


def _matrix_facts(spec: dict, sweep: SweepRecord | None = None) -> list[list[str]]:
    if not spec:
        return []
    dur = spec.get("duration_s")
    if isinstance(dur, dict):
        dur = ", ".join(f"c>={k}: {v:g} s" for k, v in sorted(dur.items(), key=lambda kv: int(kv[0])))
    per_cell = spec.get("requests") or (f"{dur:g} s" if isinstance(dur, (int, float)) else dur or None)
    arms = [a if isinstance(a, str) else f"{a['name']} ({a.get('preset') or a['name']} of {a['environment']})"
            for a in spec.get("arms") or []]  # an arm of another Environment: whose preset it is
    rows = [["arms", ", ".join(arms) + (f" (baseline: {spec['baseline']})" if spec.get("baseline") else "")],
            ["concurrency", ", ".join(str(c) for c in spec.get("concurrency") or [])],
            ["rates (req/s, open loop)", ", ".join(rate_text(r) for r in spec.get("rates") or [])],
            ["sweep (req/s, open loop)", _sweep(spec, sweep)],
            ["arrival", _arrival(spec) if spec.get("rates") or spec.get("sweep") else None],
            ["traces (open loop, at their times)", _traces(spec)],
            ["output length", spec.get("output_len")], ["requests per cell", per_cell],
            ["warmup / repeats / seed", " / ".join(str(spec.get(k, "-")) for k in ("warmup", "repeats", "seed"))],
            ["launches per arm", spec.get("launches") if (spec.get("launches") or 1) > 1 else None],
            ["api", spec.get("api")]]
    return [[k, str(v)] for k, v in rows if v not in (None, "", [])]


def weights_fact(env: dict | None) -> str | None:
    """What the run's weights were, from its Environment: random (a dummy model: the run proves a path, not an
    answer), or trained and pinned by sha256 (checked before every start); None where the spec says neither."""
    env = env or {}
    if (env.get("model") or {}).get("dummy") or env.get("dummy_models"):
        return "RANDOM (a dummy model): acceptance and speed-ups prove the path, not an answer"
    pins = env.get("weights") or {}
    if pins:
        return ("real (trained), pinned by sha256 and checked before each start: "
                + ", ".join(f"{name} {digest[:12]}" for name, digest in sorted(pins.items())))
    return None


def _derived(d: Derived | dict | None) -> Derived:
    return d if isinstance(d, Derived) else Derived.model_validate(d or {})


def archive_view(a: Archive, *, derived: Derived | dict | None = None, status: str | None = None,
                 why: str = "", acceptance_from: Archive | None = None,
                 training_data: Path | None = None, pairs: list[tuple[str, str]] = ()) -> RunView:
    """A run read back; `derived`, `status` and `why` stand in for summary.json while the runner finalizes.
    `acceptance_from`: the run whose real acceptance (and real speed-ups) the surface's prediction uses (default:
    this run's own). `training_data`: a sample of the drafter's training prompts the run's workloads are compared
    with now (default: the representativeness the run recorded). `pairs`: (arm, reference) pairs whose paired
    speed-ups are made now, beside those over the run's baseline (toolkit.results.speedups.pair_speedups)."""
    from toolkit.results.cells import CellReader
    from toolkit.results.facts import run_facts

    f, m = run_facts(a), a.manifest
    if status:
        f.status, f.why = status, why
    image = (m.build.id or m.build.image_id) if m.build else None
    spec = m.matrix.resolved
    facts = [["run", f"{f.matrix}/{f.run_id}"], ["status", status_text(f.status, f.why)],
             ["started / finished", f"{f.started_at or '-'} / {f.finished_at or '-'}"],
             ["environment", f"{f.environment or '-'} (hash {f.env_hash or '-'})"],
             *([["arms' environments", arm_environments(m)]] if arm_environments(m) else []),
             *([["weights", w]] if (w := weights_fact(m.environment.resolved if m.environment else None)) else []),
             ["image", image or "-"], ["host / GPU", f"{f.host or '-'} / {f.gpu or '-'}"],
             ["toolkit", f"{m.toolkit.version or '-'} {m.toolkit.git_sha or ''}".strip()],
             ["source", f.source]] + _matrix_facts(spec, m.sweep)
    if m.purpose:
        facts.insert(2, ["purpose", m.purpose])
    from toolkit.results.machines import run_machines

    machines = run_machines(a)
    if machines.spans:  # the run's launch variance includes the machine level: flagged where it is read
        facts.append(["machines", f"SPANS MACHINES: {machines.text()}: its launches differ by machine too, and "
                                  "arms on different machines differ by their machines"])
    from toolkit.results.slo import analyse, objectives_for

    from toolkit.results.verdicts import current, judged_cells

    derived = current(a, None if derived is None else _derived(derived))  # verdicts under the rule
    objectives = objectives_for(m, derived)
    slo = analyse(a, objectives, derived) if objectives is not None else None  # recomputed, like the metrics
    if slo is not None:
        derived = derived.model_copy(update={"slo": slo})
    reader = CellReader(a, objectives)
    cells = [(k, c, reader.cell(k)) for k, c in zip(a.cell_map, judged_cells(a))]
    commands = []
    for arm, info in m.arms.items():
        if info.command:
            cmd = info.command
            if isinstance(cmd, CommandError):  # no launcher could be made: printed as the manifest holds it
                cmd = cmd.model_dump(mode="json")
            commands.append(f"{arm}: {' '.join(map(str, cmd)) if isinstance(cmd, list) else cmd}")
        elif info.preset:
            commands.append(f"{arm}: " + " ".join(f"--{k} {v}" for k, v in info.preset.items()))
    from toolkit.results.report.noise import noise_data, power_data

    noise = noise_data(a, objectives)
    power = power_data(a, objectives) if noise is None else None
    if len(m.rounds) > 1:
        facts.append(["launch rounds (arm order)", " | ".join(", ".join(r) for r in m.rounds)])
    data = {"facts": asdict(f), "manifest": m.model_dump(mode="json"),
            "cells": {k: c.model_copy(update={"metrics": ms}).model_dump(mode="json") for k, c, ms in cells},
            "derived": derived.model_dump(mode="json")}
    if noise is not None:
        data["noise"] = asdict(noise)
    if power is not None:
        data["power"] = asdict(power)
    data["machines"] = {"source": machines.source, "spans": machines.spans, "text": machines.text()}
    surface = _surface(a, derived, cells, acceptance_from)
    if surface is not None:
        data["surface"] = surface
    represent = _represent(a, derived, cells, training_data)
    if represent is not None:
        data["representativeness_vs_acceptance"] = {k: v for k, v in asdict(represent).items() if v is not None}
    from toolkit.results.envdiff import arm_env_diff

    arm_envs = arm_env_diff(m)
    if arm_envs:
        data["arm_environments"] = arm_envs
    views = [pair_view(a, derived, arm, ref) for arm, ref in pairs]
    if views:
        data["pairs"] = [{"arm": p.arm, "ref": p.ref, "environments": p.environments,
                          "speedups": [r.model_dump(mode="json") for r in p.speedups],
                          "crossovers": [c.model_dump(mode="json") for c in p.crossovers]} for p in views]
    return RunView(title=f"Run {a.matrix_name}/{a.run_id}", facts=facts, cells=cells, derived=derived,
                   commands=commands, description=spec.get("description") or "", data=data, archive=a, slo=slo,
                   noise=noise, power=power, surface=surface, represent=represent, pairs=views, arm_envs=arm_envs)


def _arm_env_name(m, arm: str) -> str | None:
    info = m.arms.get(arm)
    e = info.environment if info is not None else None
    return e.name if e is not None else (m.environment.name if m.environment else None)


def pair_view(a: Archive, derived: Derived, arm: str, ref: str) -> PairView:
    """One `--pair ARM/REF`: its speed-ups (toolkit.results.speedups.pair_speedups) marked under the rule of
    what a verdict may use, and a crossover per domain where ARM is speculative and REF is not (speculation
    against a plain server; two speculative arms, or two plain ones, compare without one)."""
    from toolkit.results.speedups import pair_speedups
    from toolkit.results.verdicts import judged_cells, verdicts

    spec = set(derived.speculative_arms)
    judged = {arm} if arm in spec and ref not in spec else set()
    v = verdicts(pair_speedups(a, arm, ref), judged_cells(a), derived.arm_info, judged)
    ea, er = _arm_env_name(a.manifest, arm), _arm_env_name(a.manifest, ref)
    return PairView(arm, ref, v.speedups, v.crossovers, f"{arm}: {ea}; {ref}: {er}" if ea != er else None)


def _represent(a: Archive, derived: Derived, cells: list, training_data: Path | None) -> Any:
    """Representativeness against the real acceptance of this run's speculative arms (toolkit/results/
    represent.py): the distances the run recorded, or computed now from `training_data`."""
    from toolkit.results.represent import build, from_training
    from toolkit.results.surface import real_acceptance

    if training_data is not None:
        reps, notes = from_training(a, training_data)
        source = f"computed now from {training_data} and the run's workloads"
    else:
        reps, notes = list(derived.representativeness or []), []
        source = "recorded by the run (its Matrix's training_data)"
    out = build(reps, real_acceptance(cells, derived.baseline), source)
    if out is not None and notes:
        out.left_out = notes
    return out


# json-edge: report --json's surface
def _surface(a: Archive, derived: Derived, cells: list, acceptance_from: Archive | None) -> dict | None:
    """The run's speed-up surface (toolkit/results/surface.py) with the prediction from the real acceptance of
    `acceptance_from` (its cells and speed-ups), else of this run's own real speculative arms."""
    from toolkit.results.surface import build

    if not any(r.synthetic_acceptance is not None for r in derived.speedups):
        return None
    if acceptance_from is None:
        return build(derived.speedups, a.manifest.arms, cells, derived.speedups, None, derived.baseline,
                     (cells, derived.baseline))
    from toolkit.results.cells import CellReader
    from toolkit.results.verdicts import current

    reader = CellReader(acceptance_from)
    other = [(k, c, reader.cell(k)) for k, c in acceptance_from.cell_map.items()]
    from toolkit.results.systems import system_differences

    d = current(acceptance_from)
    differ = system_differences(a, acceptance_from)  # its speed-ups check a prediction for its own system only
    out = build(derived.speedups, a.manifest.arms, other, [] if differ else d.speedups,
                f"{acceptance_from.matrix_name}/{acceptance_from.run_id}", d.baseline, (cells, derived.baseline))
    if out is not None and differ:
        out["check_refused"] = ("not checked against that run's measured speed-ups: it measured another system ("
                                + "; ".join(differ) + "), so its speed-ups say nothing of this prediction's accuracy; to check "
                                "it, measure the surface on the run's own system: the same engine, GPU, target and "
                                "pinned weights (the Environment's `weights:`)")
    return out


def eligibility_of(cells: list[CellSummary], derived: Derived):
    """The rule of what a verdict may use, over these cells (toolkit/schema/eligibility.py)."""
    from toolkit.schema.eligibility import Eligibility

    return Eligibility(cells, derived.arm_info)


def eligibility_blocks(elig, failed_too: bool = False) -> list:
    """The cells verdicts leave out and the ones they name, each with why (failed cells only with
    failed_too: a run report lists them under Failed cells)."""
    out: list = []
    ex, qu = elig.lines(excluding=True, skip=() if failed_too else ("failed",)), elig.lines(excluding=False)
    if ex:
        out += [Heading("Cells no verdict uses"), Para("Left out of crossovers, threshold advice, capacity and SLO "
                                                       "advice (docs/results.md, what a verdict may use):"), Items(ex)]
    if qu:
        out += [Heading("Cells verdicts name"), Para("Used, and named beside every verdict that rests on them:"),
                Items(qu)]
    return out


def _status(c: CellSummary, elig) -> str:
    if c.status != "ok":
        return "FAILED"
    flags = elig.flags(c.arm, c.domain, c.level) if elig is not None else []
    ex = [f.code for f in flags if f.excludes]
    if ex:
        return "excluded: " + ", ".join(ex)
    return ", ".join(["ok"] + [f.code for f in flags])


def from_result(matrix, cells: list[CellSummary], derived: Derived | dict) -> RunView:
    """A run not yet archived (a Matrix spec, its cell summaries and derived results)."""
    from toolkit.results.cells import stored_stats

    derived = _derived(derived)
    view_cells = [(c.key, c, stored_stats(c)) for c in cells]
    spec = matrix.model_dump(mode="json") if hasattr(matrix, "model_dump") else dict(matrix)
    return RunView(title=f"Run {spec.get('name')}", facts=[["matrix", str(spec.get("name"))]] + _matrix_facts(spec),
                   cells=view_cells, derived=derived, description=spec.get("description") or "", slo=derived.slo,
                   data={"cells": {k: c.model_copy(update={"metrics": m}).model_dump(mode="json")
                                   for k, c, m in view_cells}, "derived": derived.model_dump(mode="json")})


def cells_table(cells: list[tuple[str, CellSummary, dict[str, Stat]]], elig=None) -> Table:
    """One row per cell; a `launch` column after `rep` when the run launched its arms more than once. status: ok,
    FAILED, `excluded: <why>` (no verdict uses the cell) or `ok, <why>` (verdicts name it)."""
    rows = []
    launched = any(c.launch for _, c, _ in cells)
    rated = any(c.rate is not None for _, c, _ in cells)
    for _, c, m in sorted(cells, key=lambda t: (t[1].arm, t[1].domain, t[1].level, t[1].launch, t[1].repeat)):
        level = ([rate_text(c.rate) if c.rate is not None else "-", fmt_num(c.achieved_rate)] if rated
                 else [str(c.concurrency)])
        head = [c.arm, c.domain, *level, str(c.repeat)] + ([str(c.launch)] if launched else []) \
            + [str(c.n_requests), str(c.n_errors)]
        if c.status != "ok":
            rows.append(head + ["-"] * 9 + ["FAILED"])
            continue
        rows.append(head + [fmt_stat(m.get("output_tok_s")), fmt_stat(m.get("request_s")),
                            fmt_stat(m.get("ttft_ms")), fmt_stat(m.get("ttft_ms"), "p99"), fmt_stat(m.get("tpot_ms")),
                            fmt_stat(m.get("itl_ms")), fmt_stat(m.get("e2e_ms")), fmt_stat(m.get("e2e_ms"), "p99"),
                            _accept(c, m), _status(c, elig)])
    cols = CELL_COLUMNS[:4] + ["launch"] + CELL_COLUMNS[4:] if launched else list(CELL_COLUMNS)
    if rated:  # open loop: the target rate and the rate the client achieved (docs/bench.md#open-loop-load)
        cols[2:3] = ["rate", "achieved"]
    return Table(cols, rows, align="ll" + "r" * (len(cols) - 3) + "l")


def _accept(c: CellSummary, m: dict[str, Stat]) -> str:
    """A cell's acceptance length; `(synthetic)` after one its server was forced to (never the drafter's)."""
    text = fmt_stat(m.get("accept_length"))
    return f"{text} (synthetic)" if c.synthetic_acceptance is not None else text


def synthetic_arm_label(arm: str, accept_len: float | None) -> str:
    """An arm as verdicts name it: `eagle3-synacc2 [synthetic acc 2]` when its acceptance was forced."""
    return f"{arm} [{synthetic_label(accept_len)}]" if accept_len is not None else arm


SYNTHETIC_NOTE = ("synthetic acc N: the arm's server was started with SGLANG_SIMULATE_ACC_LEN=N (the Matrix's "
                  "synthetic_acceptance, docs/bench.md#synthetic-acceptance): its acceptance was forced, so its "
                  "speed-ups are the system's at that acceptance length, not what its drafter achieves; they are "
                  "never compared with a real acceptance.")


def acceptance_sources(cells: list[tuple[str, CellSummary, dict[str, Stat]]],
                       arm_info: dict[str, ArmState] | None = None) -> Items | None:
    """Per arm, where its cells' acceptance lengths came from: per request from the wire, or one figure per
    cell from the server's own counts (toolkit.schema.metrics.ACCEPT_SOURCES; an engine's own counters where
    it names them, Engine.metrics_counters: vLLM's are not SGLang's)."""
    from toolkit.schema.metrics import ACCEPT_SOURCES

    def said(arm: str, src: str) -> str:
        info = (arm_info or {}).get(arm)
        eng = engines.lookup(info.engine) if info is not None and info.engine else None
        if src == "server-metrics" and eng is not None and eng.metrics_counters:
            return f"per cell, from the server: {eng.metrics_counters} over the measured phase"
        return ACCEPT_SOURCES.get(src, src)

    by: dict[tuple[str, str], int] = {}
    for _, c, m in cells:
        if "accept_length" in m:  # an archive written before sources were recorded had per-request ones only
            key = (c.arm, c.accept_source or "requests")
            if c.synthetic_acceptance is not None:
                key = (c.arm, f"synthetic: forced to {rate_text(c.synthetic_acceptance)} by SGLANG_SIMULATE_ACC_LEN "
                              f"(measured {ACCEPT_SOURCES.get(key[1], key[1])}), not the drafter's")
            by[key] = by.get(key, 0) + 1
    if not by:
        return None
    return Items([f"{arm}: {said(arm, src)} ({n} cell{'s' if n > 1 else ''})" for (arm, src), n in sorted(by.items())])


def speedup_table(derived: Derived) -> Table:
    rows = [[synthetic_arm_label(r.arm, r.synthetic_acceptance), r.domain, rate_text(r.rate) if r.rate is not None else str(r.concurrency), fmt_num(r.arm_tok_s), fmt_num(r.baseline_tok_s),
             fmt_num(r.throughput_ratio), fmt_centre(r.paired_ratio, r.ci_low, r.ci_high), str(r.n_pairs),
             "left out" if r.excluded else "named" if r.qualified else "used"]
            for r in derived.speedups]
    cols = list(SPEEDUP_COLUMNS)
    if any(r.rate is not None for r in derived.speedups):
        cols[2] = "rate"  # req/s, open loop
    return Table(cols, rows, align="ll" + "r" * 6 + "l")


def pair_blocks(p: PairView, d: Derived) -> list:
    """One `--pair ARM/REF` as the report prints it: its table (REF in the baseline's column), how its CIs were
    made, the two Environments where they differ, and its crossovers."""
    out: list = [Heading(f"Speed-up of {p.arm} over {p.ref}"),
                 speedup_table(Derived(speedups=p.speedups)) if p.speedups else Para("no cell of both arms")]
    how = sorted({r.ci_method for r in p.speedups if r.ci_method})
    note = (f"Made now from the run's records as the speed-ups over the baseline are (the same prompts, paired per "
            f"launch round; base tok/s: {p.ref}'s)" + (": " + "; ".join(how) if how else "") + ".")
    if p.environments:
        note += (f" The two arms come from different Environments ({p.environments}): "
                 "the ratio is the engines' (or builds') together with their presets.")
    out.append(Para(note))
    if p.crossovers:
        out.append(Items([f"{c.arm} / {c.domain}: {c.note}" for c in p.crossovers]))
    return out


def arm_env_blocks(rows: list[dict], own: str | None) -> list:
    """How each other Environment an arm comes from differs from the run's own, field by field: one table each."""
    if not rows:
        return []
    out: list = [Heading("How the arms' Environments differ"),
                 Para(f"Each other Environment against the run's own ({own or '-'}), as the run read them; the "
                      "server presets are the arms' commands (below).")]
    by: dict[str, list[dict]] = {}  # data-keyed: environment name
    for r in rows:
        by.setdefault(r["environment"], []).append(r)
    for name, rs in by.items():
        out += [Para(f"{name} (arms {', '.join(rs[0]['arms'])}):"),
                Table(["field", own or "run's own", name],
                      [[r["field"], "-" if r["own"] is None else r["own"], "-" if r["theirs"] is None else r["theirs"]]
                       for r in rs], align="lll")]
    return out


def _speedup_note(d: Derived) -> str:
    """How the paired CIs were made: the bootstrap (older archives), or per the launch noise (d.noise set)."""
    if d.noise is None:
        return SPEEDUP_NOTE
    how = sorted({r.ci_method for r in d.speedups if r.ci_method})
    refused = (d.noise.get("calibration_refused") if isinstance(d.noise, dict) else None) or []
    return ("throughput x: the ratio of the cells' output tok/s. paired x: the ratio of per-prompt output rates (sum "
            "of tokens / sum of E2E) over the same prompts, with a 95% CI whose unit is the server launch: "
            + "; ".join(how) + "." + "".join(f" {why}: the default launch CV used instead." for why in refused))


def _derived_blocks(d: Derived, slo: SloAnalysis | None, surface: dict | None = None,
                    pairs: list[PairView] = ()) -> list:
    out: list = []
    if d.speedups:
        out += [Heading(f"Speedup over the baseline ({d.baseline})"), speedup_table(d), Para(_speedup_note(d))]
        if any(r.synthetic_acceptance is not None for r in d.speedups):
            out.append(Para(SYNTHETIC_NOTE))
    forced = {r.arm: r.synthetic_acceptance for r in d.speedups if r.synthetic_acceptance is not None}
    advice = [f"{synthetic_arm_label(c.arm, forced.get(c.arm))} / {c.domain}: {c.note}" for c in d.crossovers]
    advice += [f"{synthetic_arm_label(arm, forced.get(arm))}: {threshold_advice(d, arm)}"
               for arm in d.recommended_disable_batch_threshold]
    if advice:
        out += [Heading("Crossover"), Items(advice)]
    for p in pairs:
        out += pair_blocks(p, d)
    if surface is not None:
        from toolkit.results.report.surface import surface_blocks

        out += surface_blocks(surface)
    if slo is not None:
        from toolkit.results.report.slo import slo_blocks

        out += slo_blocks(slo, {arm: threshold_advice(d, arm) for arm in d.recommended_disable_batch_threshold})
    servers = {a: i for a, i in d.arm_info.items() if getattr(engines.lookup(i.engine), "reports_server_info", False)}
    if servers:
        out += [Heading("What each server said (/server_info)"), Items([_server_line(a, i) for a, i in servers.items()])]
    out += [Heading("Methodology checks"), methodology_items(d)]
    if d.representativeness:
        out += [Heading("Representativeness of the workloads"),
                Items([f"{r.workload}: {r.verdict} (divergence {r.divergence or 0:.2f}) {r.reason}".rstrip()
                       for r in d.representativeness])]
    t = d.timing
    if t.wall_s:
        out += [Heading("Timing"), Para(
            f"Wall {t.wall_s:.1f} s; cells {t.cells_s:.1f} s; server starts "
            + (", ".join(f"{a} {s:.1f} s" for a, s in t.launch_s.items()) or "-")
            + "; server stops " + (", ".join(f"{a} {s:.1f} s" for a, s in t.stop_s.items()) or "-")
            + ("; warm-up launches (discarded) " + ", ".join(f"{a} {s:.1f} s" for a, s in t.warmup_launch_s.items())
               if t.warmup_launch_s else "")
            + (f"; overhead ratio {t.overhead_ratio:.3f}" if t.overhead_ratio else ""))]
        out += starts_blocks(d)
    return out


def methodology_items(d: Derived) -> Items:
    return Items([f"{c.severity} [{c.check}]: {c.message}" for c in d.methodology] or ["none raised"])


def methodology_blocks(d: Derived, elig) -> list:
    """The run's methodology section on its own (`results slo`): its checks and the cells verdicts leave
    out or name."""
    return [Heading("Methodology checks"), methodology_items(d)] + eligibility_blocks(elig, failed_too=True)


def _server_line(arm: str, i: ArmState) -> str:
    if not i.server_info_read:
        return f"{arm}: no /server_info"
    spec = ", ".join(f"{k.removeprefix('speculative_')}={v}" for k, v in i.speculative.items())
    return (f"{arm}: SGLang {i.engine_version}, max running requests {i.max_running_requests}"
            + (" (set by SGLang: flag unset)" if i.max_running_requests_implicit else "")
            + (f' ("{i.max_running_requests_log_line}")' if i.max_running_requests_log_line else "")
            + (f"; speculative: {spec}" if spec else "")
            + (f"; differs from the preset: {i.preset_mismatches}" if i.preset_mismatches else "")
            + (f" ({i.server_info_file})" if i.server_info_file else ""))


LOADGEN_PLACES = {"job-step": "a step of each arm's job, on its server's node (srun --overlap)",
                  "submit-host": "the host that submitted the jobs"}


def slurm_blocks(rec: SlurmRecord) -> list:
    """A Slurm run's jobs (manifest.json `slurm`): where the load generator ran, each job's id, node, GPUs and
    final state, the steps its cells ran as, and the rendered scripts it submitted."""
    rows = [[j.arm, str(j.launch), j.job_id, j.node or "-", j.gpus or "-", j.state or "-",
             ", ".join(sorted(set(j.steps.values()), key=lambda s: (len(s), s))) or "-"] for j in rec.jobs]
    scripts = ", ".join(f"{arm} ({len(text.splitlines())} lines)" for arm, text in rec.scripts.items())
    return [Heading("Slurm jobs"), Para(f"Load generator: {rec.loadgen}, {LOADGEN_PLACES.get(rec.loadgen, '?')}."),
            Table(["arm", "launch", "job", "node", "GPUs", "state", "cell steps"], rows, align="lrllll")
            if rows else Para("no job was submitted"),
            Para(f"Job scripts as submitted (manifest.json `slurm.scripts`, slurm/<arm>.sbatch): {scripts or '-'}.")]


def build_run_report(source: Archive | RunView, *, plots: bool = False, acceptance_from: Archive | None = None,
                     training_data: Path | None = None, pairs: list[tuple[str, str]] = ()) -> Report:
    v = source if isinstance(source, RunView) else archive_view(source, acceptance_from=acceptance_from,
                                                                training_data=training_data, pairs=pairs)
    r = Report(v.title, data=v.data)
    r.add(Heading(v.title, 1), Facts(v.facts))
    if v.description:
        r.add(Para(v.description))
    elig = eligibility_of([c for _, c, _ in v.cells], v.derived)
    r.add(Heading("Cells"), cells_table(v.cells, elig) if v.cells else Para("no cells"), Para(CELLS_NOTE))
    sources = acceptance_sources(v.cells, v.derived.arm_info)
    if sources is not None:
        r.add(Para("Acceptance length (accept), per arm:"), sources)
    failed = [f"{c.arm} {c.domain} {c.label} rep {c.repeat}" + (f" launch {c.launch}" if c.launch else "")
              + f": {c.reason}" for _, c, _ in v.cells if c.status != "ok"]
    if failed:
        r.add(Heading("Failed cells"), Items(failed))
    r.add(*eligibility_blocks(elig), *_derived_blocks(v.derived, v.slo, v.surface, v.pairs))
    if v.represent is not None:
        from toolkit.results.report.represent import represent_blocks

        r.add(*represent_blocks(v.represent))
    if v.noise is not None:
        from toolkit.results.report.noise import noise_blocks

        r.add(*noise_blocks(v.noise))
    if v.power is not None:
        from toolkit.results.report.noise import power_blocks

        r.add(*power_blocks(v.power))
    if v.arm_envs:
        r.add(*arm_env_blocks(v.arm_envs, v.archive.manifest.environment.name if v.archive is not None else None))
    if v.commands:
        r.add(Heading("Server commands"), Code("\n".join(v.commands)))
    if v.archive is not None and v.archive.manifest.slurm is not None:
        r.add(*slurm_blocks(v.archive.manifest.slurm))
    if plots and v.archive is not None:
        from toolkit.results.plots import all_plots

        images = all_plots([("", v.archive)])
        if v.slo is not None:
            from toolkit.results.plots import slo_plot

            images.append(("slo.png", "Goodput vs concurrency (filled: the objectives hold), and each objective "
                                      "against its limit (dashed line)", slo_plot(v.slo)))
        if v.surface is not None:
            from toolkit.results.plots import surface_plot

            images.append(("surface.png", "SYNTHETIC acceptance: speed-up over the baseline vs forced acceptance "
                                          "length, one line per load level, 95% CI bars; real acceptance per domain "
                                          "dotted", surface_plot(v.surface)))
        r.add(Heading("Plots"), *[Image(name, caption, png) for name, caption, png in images])
    elif v.archive is not None:
        r.add(Para(f"Plots: `toolkit results report {v.archive.path}`."))
    return r
