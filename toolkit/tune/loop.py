"""The search loop: the rungs of successive halving and the confirmation, each run an ordinary matrix run of
a generated spec (toolkit.tune.specs) through one adapter into the matrix runner. The decisions are
toolkit.tune.search's (numbers only); the state is saved after every step, so an interrupted session
resumes where it stopped and a run that finished before is reused as it is."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from toolkit.results.report.model import fmt_centre
from toolkit.schema.tune import ConfirmationPlan, Rung, RungScore, TuneState
from toolkit.specs import LoadedSpec, load_spec
from toolkit.tune import search, specs
from toolkit.tune.progress import SearchProgress
from toolkit.tune.report import rung_noise, run_records
from toolkit.tune.servers import Servers
from toolkit.tune.state import matrix_hash


def evaluations(schedule: list[int], again: str | None) -> int:
    """Trial evaluations a session plans (the progress bar's total): every rung's arms with the baseline
    (and its A/A twin), then the confirmation's three (four with the twin)."""
    return sum(n + 1 + bool(again) for n in schedule) + 3 + bool(again)


def _run_trials(spec_path: Path, *, results_root: Path, resume: Path | None, progress: SearchProgress,
                log: Callable[[str], None], image_env: LoadedSpec) -> tuple[Path, str]:
    """The one call into the matrix machinery: run (or resume) a generated Matrix whose arms are trials.
    Returns (run folder, status); status `complete` when every cell ran (failed trials are results the
    ranking reads), `partial` when the run was interrupted. The runner looks an image up by the
    environment's spec hash; the trial presets change the hash but not the image, so the build of the user's
    environment is used."""
    from toolkit.bench.matrix import run_matrix
    from toolkit.bench.plan import find_build

    res = run_matrix(load_spec(spec_path, expect="Matrix"), results_root=results_root, resume=resume,
                     progress=progress, log=log, build=find_build(image_env))
    return res.path, "partial" if res.interrupted else "complete"


def _run_status(run_dir: Path) -> str:
    """`complete` when the run finished (every cell ran, whatever its status), else `partial`."""
    from toolkit.results.archive import open_archive

    return "partial" if open_archive(run_dir).interrupted else "complete"


class SearchLoop:
    def __init__(self, mspec: LoadedSpec, env_spec: LoadedSpec, arm: str, folder: Path, state: TuneState, *,
                 servers: Servers, progress: SearchProgress, save: Callable[[], None],
                 log: Callable[[str], None]) -> None:
        self.mspec, self.m, self.env_spec, self.arm = mspec, mspec.model, env_spec, arm
        self.folder, self.state, self.servers = folder, state, servers
        self.progress, self.save, self.log = progress, save, log

    # -- the runs
    def _units(self, stem: str, trials: list[str], workloads: dict[str, dict]) -> list[tuple[str, list, dict, list]]:
        """The runs of one rung (or the confirmation): (name, arms, workloads, concurrency levels). On a shared
        server one run per cell, arms back to back (baseline, trials in an order rotated per cell, baseline
        again), so that load drifting over minutes falls between cells, not between arms; otherwise one run
        for all cells (every trial is a launch)."""
        baseline, again = self.m.baseline_arm, self.state.again
        if not again:
            return [(stem, [baseline, *trials], workloads, list(self.m.concurrency))]
        units = []
        for i, (w, c) in enumerate((w, c) for w in workloads for c in self.m.concurrency):
            r = i % len(trials)
            units.append((f"{stem}-{w}-c{c}", [baseline, *trials[r:], *trials[:r], again], {w: workloads[w]}, [c]))
        return units

    def _execute(self, name: str, matrix: dict, header: str, fresh: bool = False) -> tuple[Path, str]:
        """Run (or resume) one generated matrix; an earlier complete run of it is reused as it is. `fresh`: a
        new run whatever ran before (the confirmation's sitting: earlier runs are neither reused nor resumed)."""
        path = self.folder / "specs" / f"{name}.yaml"
        runs = [] if fresh else sorted(p for p in (self.folder / name).glob("*") if (p / "manifest.json").is_file())
        done = [p for p in runs if _run_status(p) == "complete"]
        if done:
            self.progress.reused(matrix["arms"], len(matrix["workloads"]) * len(matrix["concurrency"]) * matrix["repeats"]
                                 * matrix.get("launches", 1))
            return done[-1], "complete"
        specs.write_yaml(path, matrix, header)
        resume = None
        if runs:
            from toolkit.results.archive import open_archive

            if open_archive(runs[-1]).manifest.matrix.hash == matrix_hash(load_spec(path, expect="Matrix")):
                resume = runs[-1]
            else:
                self.log(f"{runs[-1]} was measured on another server URL: this run starts again")
        return _run_trials(path, results_root=self.folder, resume=resume, progress=self.progress, log=self.log,
                           image_env=self.env_spec)

    def _run_units(self, units, *, requests: int, seed: int, repeats: int, what: str,
                   fresh: bool = False, launches: int = 1) -> tuple[str, list[str], dict]:
        names, records = [], {}
        for name, arms, workloads, conc in units:
            matrix = specs.run_matrix(
                self.mspec, name=name, arms=arms, baseline=self.m.baseline_arm,
                workloads=[{"name": w, **wl} for w, wl in workloads.items()], requests=requests, seed=seed,
                repeats=repeats, target=self.servers.target(arms), description=f"tune session {self.state.id}: {what}",
                launches=launches)
            matrix["concurrency"] = conc
            run_dir, status = self._execute(name, matrix, f"tune session {self.state.id}: {what}", fresh=fresh)
            names.append(os.path.relpath(run_dir, self.folder))
            if status != "complete":
                return "partial", names, records
            records.update(run_records(run_dir))
        return "complete", names, records

    # -- the search
    def rungs(self) -> str:
        """Run the rungs from the first not complete; `complete` once a winner is chosen, else `partial`."""
        st, baseline = self.state, self.m.baseline_arm
        tune_w = {w: {"path": f"../{s.files.tune}"} for w, s in st.split.items()}
        records: list[dict] = []
        k = 0
        while k < len(st.rungs):
            rung = st.rungs[k]
            self.progress.set_stage(f"rung {k + 1}/{len(st.schedule)}")
            units = self._units(f"{self.m.name}-tune-r{k}", rung.trials, tune_w)
            self.progress.begin(units, len(self.m.concurrency))
            status, rung.runs, recs = self._run_units(
                units, requests=rung.requests, seed=self.m.seed + k, repeats=1,
                what=f"rung {k}: trials of preset {self.arm} against {baseline} on the tune sample")
            rung.status = status
            self.save()
            if status != "complete":
                return "partial"
            records.append(recs)
            self._decide(k, records)
            self.save()
            k += 1
        return "complete"

    def _decide(self, k: int, records: list[dict]) -> None:
        """After rung k: score its trials on every rung so far; the survivors make rung k+1, or the leader wins."""
        st, rung, baseline = self.state, self.state.rungs[k], self.m.baseline_arm
        per = {t: search.pooled_cells(records, t, baseline, st.again, seed=self.m.seed) for t in rung.trials}
        noise = rung_noise(self.folder, rung.runs, st.again)
        ran = {t: sum(any(a == t for a, _, _ in recs) for recs in records) for t in rung.trials}
        scores = {t: search.score(cells, search.launch_var(noise, t, baseline, ran[t])) for t, cells in per.items()}
        rung.scores = {t: RungScore(**vars(s)) for t, s in scores.items()}
        rung.stopped_early, st.best = None, None  # decided afresh (a resumed session may be judged by newer rules)
        if all(s.geomean is None for s in scores.values()):
            self._fail(f"rung {k}: no trial could be measured against {baseline}", rung.runs)
        order = search.ranking(scores)
        lead = scores[order[0]]
        self.progress.set_best(f"{order[0]} {fmt_centre(lead.geomean, lead.low, lead.high)} x")
        sizes = st.schedule
        if k + 1 < len(sizes) and not search.settled(scores):
            if len(st.rungs) == k + 1:
                st.rungs = [*st.rungs, Rung(index=k + 1, trials=search.survivors(scores, sizes[k + 1]),
                                            requests=search.rung_requests(st.first_requests, self.m.tune.eta, k + 1))]
        else:
            if k + 1 < len(sizes):
                rung.stopped_early = "the leader's interval lies above every other trial's"
                self.progress.skip(sum(n + 1 + bool(st.again) for n in sizes[k + 1:]))
            st.best = order[0]

    def confirm(self) -> str:
        """The winner and the arm as it was, against the baseline, on the held-out prompts, in one sitting: a
        confirmation that completed is reused as it is; one that was interrupted (or chose another winner) runs
        every arm again in new runs, so that no comparison mixes arms measured in two sittings (on two
        machines, hours apart: issue 42). The interrupted runs stay as they were, listed under `abandoned`."""
        st, best = self.state, self.state.best
        prev = st.confirmation
        if prev is not None and prev.status == "complete" and prev.trials == [self.arm, best]:
            return self._confirmed(prev.runs, "complete")
        self.progress.set_stage("confirmation")
        on_disk = [os.path.relpath(p.parent, self.folder)
                   for p in self.folder.glob(f"{self.m.name}-tune-confirm*/*/manifest.json")]
        earlier = sorted({*on_disk, *(prev.abandoned if prev else []), *(prev.runs if prev else [])})
        if prev is not None or earlier:
            self.log(f"the confirmation did not complete in an earlier sitting ({', '.join(earlier) or 'no run'}): "
                     "every arm of it runs again in this sitting")
        st.confirmation = ConfirmationPlan(
            runs=[], status="partial", trials=[self.arm, best], requests=st.confirm_requests,
            sitting=(prev.sitting + 1) if prev is not None else int(bool(earlier)), abandoned=earlier)
        self.save()
        held = {w: {"path": f"../{s.files.all}", "holdout": f"../{s.files.tune}"} for w, s in st.split.items()}
        units = self._units(f"{self.m.name}-tune-confirm", [self.arm, best], held)
        # the session's recorded tune block (`--resume` checked it against the matrix); > 1 only for server flags
        launches = int(st.tune.get("confirm_launches", 1))
        self.progress.begin(units, len(self.m.concurrency), launches)
        status, runs, _ = self._run_units(
            units, requests=st.confirm_requests, seed=self.m.seed, repeats=self.m.repeats, fresh=True,
            launches=launches,
            what=f"the winner {best} and the preset {self.arm} as it was, against {self.m.baseline_arm}, on "
                 "prompts the search never saw")
        return self._confirmed(runs, status)

    def _confirmed(self, runs: list[str], status: str) -> str:
        from toolkit.tune.integrity import confirmation_machines, spliced

        st, best = self.state, self.state.best
        plan = st.confirmation
        plan.runs, plan.status = runs, status
        if status == "complete":
            plan.machines = confirmation_machines([self.folder / r for r in runs])
            why = spliced(plan.machines)
            if why:
                self.log(f"the confirmation's arms ran on more than one machine ({why}): it is no claim")
        st.confirmation = plan
        self.save()
        pairs = search.pooled_cells([run_records(self.folder / r) for r in runs], best, self.m.baseline_arm)
        if status == "complete" and not any(r.ratio for r in pairs.values()):
            self._fail(f"the confirmation measured no pair of {best} and {self.m.baseline_arm}", runs)
        return status

    def _fail(self, what: str, runs: list[str]) -> None:
        """Nothing to rank: say why (the first failed cell's reason), mark the session failed (not resumable)."""
        from toolkit.errors import ToolFailure
        from toolkit.results.archive import open_archive

        reasons = [c.reason for r in runs for c in open_archive(self.folder / r).cells if c.status == "failed"]
        self.state.status = "failed"
        self.state.error = what
        self.save()
        raise ToolFailure(f"{what}: {reasons[0] if reasons else 'every request failed'}",
                          hint=f"the runs are in {self.folder}; fix the cause and start a new session")
