"""What a tune session found, read back from its state and its run archives: the result (the JSON of
`bench tune --json`), and the report (report.md, report.html, plots/) built once as blocks and rendered by
toolkit.results.report like every other report.

    result(state, folder)          # TuneResult: trials, best, winners, confirmation, runs
    write_tune_report(res, folder)

The verdict's words are toolkit.tune.verdict's (the CLI's --out note reads the same split of cells).
"""

from __future__ import annotations

from pathlib import Path

from toolkit.results.report.model import Facts, Heading, Image, Items, Para, Report, Table, fmt_centre, fmt_num
from toolkit.schema.manifest import Speedup
from toolkit.schema.tune import (Best, CellRatio, Confirmation, ConfirmedCell, Decision, Ratio, Trial, TrialScore,
                                 TuneResult, TuneState, Winner)
from toolkit.tune import search
from toolkit.tune.search import PairedRatio
from toolkit.tune.verdict import verdict


def _params(p: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in p.items())


def _cell_rows(cells: dict[tuple[str, int], PairedRatio]) -> list[CellRatio]:
    return [CellRatio(domain=d, concurrency=c, speedup=r.ratio, ci_low=r.ci_low, ci_high=r.ci_high,
                      n_pairs=r.n_pairs) for (d, c), r in cells.items()]


def _ratio(r: PairedRatio | None) -> Ratio:
    return Ratio(speedup=r.ratio, ci_low=r.ci_low, ci_high=r.ci_high) if r is not None else \
        Ratio(speedup=None, ci_low=None, ci_high=None)


def run_records(run_dir: Path) -> dict[tuple, list]:  # data-keyed: cell
    """(arm, domain, concurrency) -> every record of a run's cells (repeats together)."""
    from toolkit.results.archive import open_archive

    arch = open_archive(run_dir)
    out: dict[tuple, list] = {}
    for c in arch.cells:
        out.setdefault((c.arm, c.domain, c.concurrency), []).extend(
            arch.iter_records(c.key))
    return out


def rung_noise(folder: Path, runs: list[str], again: str | None):
    """arm -> Noise where trials ran on servers of their own (no baseline measured again on one shared server):
    the launch is the unit, as in the runner's speed-ups; None on a shared server or with no run."""
    return _noise_and_source(folder, runs, again)[0]


def _noise_and_source(folder: Path, runs: list[str], again: str | None) -> tuple[object, str]:
    """rung_noise and, in words, where one launch's noise comes from: a calibration of this machine (its run
    id) or the default launch CV (toolkit.results.speedups.speedup_noise, asked for one launch)."""
    from toolkit.bench import derive

    if again or not runs:
        return None, ""
    noise, note = derive.speedup_noise(folder / runs[0], 1)
    if note.get("source") == "calibration":
        return noise, f"the calibration {note['calibration']} of this machine"
    return noise, f"the default launch CV {note.get('launch_cv', 0):.0%} (no calibration of this machine)"


def run_launches(folder: Path, runs: list[str]) -> int:
    """The launch rounds per arm of a confirmation's runs (the fewest, where they differ): 1 when each arm was
    launched once (or all shared one server)."""
    from toolkit.results.archive import open_archive

    return max(1, min((open_archive(folder / r).manifest.launches or 1 for r in runs), default=1))


def _merged(folder: Path, runs: list[str]) -> dict[tuple, list]:  # data-keyed: cell
    out: dict[tuple, list] = {}
    for r in runs:
        out.update(run_records(folder / r))
    return out


def result(state: TuneState | dict, folder: Path) -> TuneResult:
    """The result of a session as its state and its run archives stand (a tune.json as read: mapped)."""
    if isinstance(state, dict):
        state = TuneState.model_validate(state)
    baseline, again, seed = state.baseline, state.again, state.seed
    done = [r for r in state.rungs if r.status == "complete"]
    records = [_merged(folder, r.runs) for r in done]
    decided = {t: sc for r in done for t, sc in r.scores.items()}  # the last rung's score of each trial
    trials, per = [], {}
    for name in state.trials:
        ran = [r for r in done if name in r.trials]
        if not ran:
            continue
        cells = search.pooled_cells(records, name, baseline, again, seed=seed)
        per[name] = cells
        # the score its rung was decided on (with the launches' noise where trials had servers of their own);
        # sessions from before rungs kept their scores: from the cells, requests only
        d = decided.get(name) or search.score(cells)
        s = TrialScore(geomean=d.geomean, ci_low=d.low, ci_high=d.high)
        trials.append(Trial(name=name, params=state.params(name), rungs=len(ran),
                            requests_per_cell=sum(r.requests for r in ran), score=s, cells=_cell_rows(cells)))
    trials.sort(key=lambda t: (-t.rungs, t.score.geomean is None, -(t.score.geomean or 0.0), t.name))
    out = TuneResult(
        session=str(folder), status=state.status, matrix=state.matrix.name, arm=state.arm, baseline=baseline,
        engine=state.engine, level=state.level, budget=state.budget, candidates=state.candidates, notes=state.notes,
        space={k: state.tune["space"][state.arm][k] for k in state.knobs}, incumbent=state.incumbent,
        server=state.server, split=state.split, trials=trials,
        winners=[Winner(**w) for w in search.cell_winners(per)], best=None, confirmation=None,
        noise=_cell_rows(search.pooled_cells(records, again, baseline, seed=seed)) if again else None,
        runs=[str(folder / r) for rung in done for r in rung.runs], wall_s=state.wall_s)
    if state.best:
        score = next(t.score for t in trials if t.name == state.best)
        out.best = Best(trial=state.best, params=state.params(state.best), score=score)
    if state.confirmation is not None and state.confirmation.status == "complete":
        out.confirmation = _confirmation(state, folder, state.confirmation.runs, state.best)
        out.decision = out.confirmation.decision.says
        out.runs = out.runs + out.confirmation.runs
    return out


def _confirmation(state: TuneState, folder: Path, runs: list[str], best: str) -> Confirmation:
    """The winner and the arm as it was against the baseline on held-out prompts; the A/A check of the
    baseline against itself where the runs have one; the disable threshold by the crossover rule, over the
    cells a verdict may use (toolkit/schema/eligibility.py: a DRIFT cell is one it may not)."""
    from toolkit.results.archive import open_archive
    from toolkit.results.verdicts import advice_text, crossovers, judged_cells, recommended_threshold, never_pays_off

    baseline, again, arm, seed = state.baseline, state.again, state.arm, state.seed
    recs = [_merged(folder, runs)]
    noise = _noise_and_source(folder, runs, again)
    launches = run_launches(folder, runs)

    def cells_of(a: str, b: str) -> dict:  # data-keyed: cell
        if launches >= 2 and noise[0] is not None:  # launch rounds: the launch is the unit, from the rounds
            return search.round_cells(recs, a, b, seed=seed)
        return search.pooled_cells(recs, a, b, again if b == baseline else None, seed=seed, noise=noise[0])

    mine, inc = cells_of(best, baseline), cells_of(arm, baseline)
    aa = search.pooled_cells(recs, again, baseline, seed=seed) if again else {}
    head = cells_of(best, arm)  # the winner against the preset it replaces
    elig = _eligibility([open_archive(folder / r) for r in runs], judged_cells)
    cells = []
    for (d, c), r in mine.items():
        n = aa.get((d, c))
        drift = bool(n and n.ci_low is not None and (n.ci_low > 1 or n.ci_high < 1))
        flags = {a: elig.flags(a, d, c) for a in (best, arm, baseline)}
        unequal = [f"{a}: {f.text()}" for a, b in ((best, baseline), (arm, baseline), (best, arm))
                   if (f := elig.work_flag(a, b, d, c)) is not None]  # a speed-up of unlike work (eligibility.py)
        cells.append(ConfirmedCell(
            domain=d, concurrency=c, speedup=r.ratio, ci_low=r.ci_low, ci_high=r.ci_high,
            n_pairs=r.n_pairs, ci_method=r.ci_method or "paired bootstrap over the requests (one shared server)",
            incumbent=_ratio(inc.get((d, c))), noise=_ratio(n) if n else None,
            vs_incumbent=_ratio(head.get((d, c))), drift=drift,
            excluded=([f"{baseline}: drift (measured twice, it differs from itself: A/A)"] if drift else [])
            + [f"{a}: {f.text()}" for a, fs in flags.items() for f in fs if f.excludes] + unequal,
            qualified=[f"{a}: {f.text()}" for a, fs in flags.items() for f in fs if not f.excludes]))
    rows = [Speedup(arm=best, domain=x.domain, concurrency=x.concurrency, throughput_ratio=x.speedup,
                    ci_low=x.ci_low, ci_high=x.ci_high, excluded=x.excluded, qualified=x.qualified) for x in cells]
    cross = crossovers(rows, {best})
    errors = sorted({c.message for r in runs for c in open_archive(folder / r).derived.errors()})
    errors += [f"{x.domain} c={x.concurrency}: the baseline measured twice differs (A/A "
               f"{x.noise.speedup:.2f}x [{x.noise.ci_low:.2f}, {x.noise.ci_high:.2f}]): the machine's "
               "load changed during the cell, so its speedups are not a claim" for x in cells if x.drift]
    decision = _decision(state, folder, runs, recs, best, [(x.domain, x.concurrency) for x in cells if not x.excluded],
                         noise, launches)
    return Confirmation(
        decision=decision,
        runs=[str(folder / r) for r in runs], prompts="held-out (never seen by the search)",
        verdict=verdict(cells, best, arm), held_out={w: s.held_out for w, s in state.split.items()},
        requests=state.confirmation.requests, cells=cells, crossovers=cross,
        recommended_disable_batch_threshold=recommended_threshold(cross, best),
        never_pays_off=never_pays_off(cross, best), advice=advice_text(cross, best), methodology=errors,
        **({"launches": launches} if launches > 1 else {}))


def _decision(state: TuneState, folder: Path, runs: list[str], recs: list, best: str, usable: list, noise: tuple,
              launches: int) -> Decision:
    """The winner's ratio to the preset and to the baseline over the usable held-out cells, launch-aware, and
    what follows from it (toolkit.tune.integrity.decide). Two or more launch rounds per arm: the launch is the
    unit, a t-interval over the rounds (toolkit.tune.search.round_score); one launch per arm: request noise
    across cells plus both launches' noise once (search.score with launch_var: a calibration, else the default
    launch CV); one shared server: the requests alone."""
    from toolkit.tune.integrity import confirmation_machines, decide

    baseline, again, arm, seed = state.baseline, state.again, state.arm, state.seed
    per_launch, source = noise
    rounds = launches >= 2 and per_launch is not None

    def geo(a: str, b: str) -> tuple[Ratio, search.Score, bool]:
        """(the ratio, its score, whether the launch rounds made it)"""
        s = search.round_score(recs, a, b, usable) if rounds else None
        by_rounds = s is not None
        if s is None:
            cells = search.pooled_cells(recs, a, b, again if b == baseline else None, seed=seed)
            s = search.score({k: v for k, v in cells.items() if k in usable},
                             search.launch_var(per_launch, a, b, 1))
        return Ratio(speedup=s.geomean, ci_low=s.low, ci_high=s.high), s, by_rounds

    vs_preset, score, by_rounds = geo(best, arm)
    machines = (state.confirmation.machines if state.confirmation and state.confirmation.machines else
                confirmation_machines([folder / r for r in runs]))
    d = decide(score, best, arm, machines)
    how = "geometric mean over the usable held-out cells; 95 % interval "
    if per_launch is None:
        how += "from the cells' request bootstrap (one shared server: no launch between the arms)"
    elif by_rounds:
        how += (f"over {launches} launches per arm, the launch as the unit (a t-interval over the launch rounds' "
                f"geometric means, their own variance, df {launches - 1})")
    else:
        how += ("from the cells' request bootstrap plus both sides' launch noise once ("
                + (f"{launches} launches per arm, fewer than two measured every usable cell: " if rounds else
                   "one launch per arm: ") + f"{source})")
    return Decision(adopt=d.adopt, says=d.says, reason=d.reason, vs_preset=vs_preset,
                    vs_baseline=geo(best, baseline)[0], preset_vs_baseline=geo(arm, baseline)[0],
                    cells=score.cells, interval=how, machines=machines)


def _eligibility(archives: list, judged):
    """The rule over the cells of several runs (the confirmation is one run per cell on a shared server)."""
    from toolkit.schema.eligibility import Eligibility

    cells = [c for a in archives for c in judged(a)]
    info = {arm: s for a in archives for arm, s in a.derived.arm_info.items()}
    return Eligibility(cells, info)


def heatmap(res: TuneResult) -> bytes | None:
    """Trial x cell: each trial's pooled paired speedup over the baseline (the search's own data)."""
    from toolkit.results.plots import _png
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import TwoSlopeNorm

    trials = res.trials
    cells = sorted({(c.domain, c.concurrency) for t in trials for c in t.cells})
    if not trials or not cells:
        return None
    grid = np.full((len(trials), len(cells)), np.nan)
    for y, t in enumerate(trials):
        for c in t.cells:
            if c.speedup is not None:
                grid[y, cells.index((c.domain, c.concurrency))] = c.speedup
    lo, hi = np.nanmin(grid) if np.isfinite(grid).any() else 1, np.nanmax(grid) if np.isfinite(grid).any() else 1
    norm = TwoSlopeNorm(vcenter=1.0, vmin=min(lo, 0.99), vmax=max(hi, 1.01))
    fig, ax = plt.subplots(figsize=(1.6 + 1.25 * len(cells), 1.0 + 0.42 * len(trials)))
    im = ax.imshow(grid, cmap="RdYlGn", norm=norm, aspect="auto")
    best = res.best.trial if res.best else None
    for y, t in enumerate(trials):
        for x in range(len(cells)):
            if np.isfinite(grid[y, x]):
                dark = abs(float(norm(grid[y, x])) - 0.5) > 0.35
                ax.text(x, y, f"{grid[y, x]:.2f}", ha="center", va="center", fontsize=8,
                        color="white" if dark else "black", fontweight="bold" if t.name == best else None)
    ax.set_xticks(range(len(cells)), [f"{d}\nc={c}" for d, c in cells], fontsize=8)
    ax.set_yticks(range(len(trials)), [f"{t.name}{' *' if t.name == best else ''}: {_params(t.params)} "
                                       f"({t.requests_per_cell} req)" for t in trials], fontsize=8)
    ax.set_title(f"paired speedup over {res.baseline}, pooled over each trial's rungs (* = chosen)", fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.046)
    return _png(fig)


def _ci(x) -> str:
    """A Ratio or CellRatio as `1.23 [1.01, 1.45]`."""
    return fmt_centre(x.speedup, x.ci_low, x.ci_high)


def build_tune_report(res: TuneResult) -> Report:
    """The session's report in the one report model (toolkit/results/report): rendered as report.md,
    HTML and terminal text like every other report."""
    best, best_params = (res.best.trial, res.best.params) if res.best else (None, {})
    facts = [["session", res.session], ["matrix / arm", f"{res.matrix} / {res.arm} (baseline {res.baseline})"],
             ["engine / knobs", f"{res.engine} / " + ("request-level: every trial on one server"
                                                     if res.level == "request" else
                                                     "server flags: one launch per trial and rung")],
             ["space", f"{res.candidates} candidate(s); {len(res.trials)} trial(s) (budget {res.budget})"],
             ["prompts", "; ".join(f"{w}: {s.tune} to tune, {s.held_out} held out" for w, s in res.split.items())],
             ["wall time", f"{fmt_num(res.wall_s)} s"], ["status", res.status]]
    if res.server:
        facts.append(["shared server", res.server.command or "-"])
    out: list = [Facts(facts), Heading("Search space"),
                 Table(["knob", "values", f"{res.arm} now"],
                       [[k, ", ".join(map(str, v)), "unset" if res.incumbent.get(k) is None else str(res.incumbent[k])]
                        for k, v in res.space.items()], align="lll")]
    if res.notes:
        out.append(Items(res.notes))
    out += [Heading("Trials"),
            Table(["trial", "params", "rungs", "req/cell", "speedup geomean [95% CI]"],
                  [[t.name + (" (chosen)" if t.name == best else ""), _params(t.params), str(t.rungs),
                    str(t.requests_per_cell), fmt_centre(t.score.geomean, t.score.ci_low, t.score.ci_high)]
                   for t in res.trials], align="llrrr")]
    if res.level == "server" and not res.server:
        out.append(Para("Each trial's interval is the one its last rung was decided on: every trial had a server "
                        "of its own, so the launches' noise is in it beside the requests' (docs/tune.md, Score)."))
    png = heatmap(res)
    if png:
        out.append(Image("tune-heatmap.png", "Trial x cell: paired speedup over the baseline on the tune sample", png))
    if res.noise:
        out += [Para(f"Noise floor of the search: {res.baseline} measured again after the trials of each cell, "
                     "against itself (A/A; 1.00 means no drift): " + "; ".join(
                         f"{n.domain} c={n.concurrency} {_ci(n)}" for n in res.noise)
                     + ". The reference of every speedup is the mean of both measurements.")]
    out += [Heading("Winner per domain and concurrency (tune sample)"),
            Table(["domain", "c", "trial", "params", "speedup [95% CI]", "pairs", "advice"],
                  [[w.domain, str(w.concurrency), w.trial, _params(res.params(w.trial)), _ci(w), str(w.n_pairs),
                    "speculation off: even the best trial is significantly slower" if w.speculation_off else ""]
                   for w in res.winners], align="lrllrrl"),
            Para("A trial stopped in an early rung has fewer requests behind its figures; only the chosen "
                 "setting is confirmed and written back.")]
    if res.confirmation is not None:
        out += _confirmation_blocks(res, best, best_params)
    out += [Heading("Runs"), Items(res.runs),
            Para("Each is a normal run archive: `toolkit results show|report|diff RUN`.")]
    return Report(f"Tune {res.matrix} / {res.arm}", out, res.dump())


def _confirmation_blocks(res: TuneResult, best: str | None, best_params: dict) -> list:
    conf = res.confirmation
    out = [Heading("Confirmation on held-out prompts"),
           Para(f"{best} ({_params(best_params)}) and {res.arm} as it was, against {res.baseline}, {conf.requests} "
                "requests per cell" + (f" in each of {conf.launches} launches per arm (rounds interleaved; each cell's "
                                       "interval a t-interval over them)" if conf.launches > 1 else "")
                + " on prompts the search never saw "
                f"({', '.join(f'{w}: {n}' for w, n in conf.held_out.items())})."),
           Table(["domain", "c", f"{best} x [95% CI]", f"{res.arm} now x [95% CI]", f"{best} / {res.arm} now",
                  f"A/A {res.baseline} x [95% CI]", "pairs"],
                 [[c.domain, str(c.concurrency), _ci(c), _ci(c.incumbent), _ci(c.vs_incumbent),
                   (_ci(c.noise) if c.noise else "-") + (" DRIFT" if c.drift else ""), str(c.n_pairs)]
                  for c in conf.cells], align="lrrrrrr"),
           Para(f"Against the preset it would replace: {conf.verdict}."),
           *_decision_blocks(res, best, conf.decision),
           Para(f"Advice for {best}: {conf.advice}."),
           Items([f"{c.domain}: {c.note}" for c in conf.crossovers])]
    if conf.methodology:
        out.append(Items([f"methodology error: {m}" for m in conf.methodology]))
    return out


def _decision_blocks(res: TuneResult, best: str | None, d: Decision | None) -> list:
    if d is None:
        return []
    rows = [[f"{best} / {res.arm} as it was", _ci(d.vs_preset)], [f"{best} / {res.baseline}", _ci(d.vs_baseline)],
            [f"{res.arm} as it was / {res.baseline}", _ci(d.preset_vs_baseline)]]
    return [Heading("Decision"),
            Para(f"**{d.says}**: {d.reason}." + ("" if d.adopt else " Nothing is written back.")),
            Table(["ratio (geometric mean over held-out cells)", "x [95% CI]"], rows, align="lr"),
            Para(f"{d.cells} cell(s); {d.interval}.")]


def write_tune_report(res: TuneResult, folder: Path) -> Path:
    from toolkit.results.report import write_report

    write_report(build_tune_report(res), folder)
    return folder / "report.md"
