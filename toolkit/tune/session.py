"""A tune session: check the space, split the prompts, run the rungs of the search and the confirmation as
ordinary matrix runs, keep its state in `tune.json` so that Ctrl-C loses nothing and `--resume` goes on.

    session = TuneSession(load_spec("envs/matrices/quickstart.yaml"), "ngram", budget=6)
    result = session.run()          # dict: trials, best, winners, confirmation, runs (docs/tune.md)

    results/<matrix>-tune/<session-id>/
      tune.json                      plan and state (written atomically after every step), then the result
      prompts/ specs/                the prompt split and the specs of every run (toolkit.tune.specs)
      <matrix>-tune-r<k>/<run-id>/   rung k: a normal run archive, arms = baseline + trials
      <matrix>-tune-confirm/<run-id>/  the confirmation on held-out prompts
      report.md, report.html, plots/ the search, the winners and the confirmation
      logs/server.log                the shared server's log (request-level knobs)

Request-level knobs (the embedded engine's generation_config) change nothing on the server: all runs of the
session go to ONE server the session starts (the runs' target is that URL). Server-level knobs (SGLang
flags) need a launch per trial: the runs use the matrix's own target and the runner launches each arm.
"""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path
from typing import Any, Callable

from toolkit.errors import ToolkitError
from toolkit.fsutil import write_json
from toolkit.spec import LoadedSpec, load_spec, spec_hash
from toolkit.tune import search, specs
from toolkit.results.report.model import fmt_centre
from toolkit.tune.report import run_records
from toolkit.tune.space import Space, check_sglang_flags, check_space

FORMAT = "toolkit-tune-session"


def _run_trials(spec_path: Path, *, results_root: Path, resume: Path | None, progress: Any,
                log: Callable[[str], None], image_env: LoadedSpec) -> tuple[Path, str, dict]:
    """The one call into the matrix machinery: run (or resume) a generated Matrix whose arms are trials.
    Returns (run folder, status, derived); status `complete` when every cell ran (failed trials are results
    the ranking reads), `partial` when the run was interrupted. The runner looks an image up by the
    environment's spec hash; the trial presets change the hash but not the image, so the build of the user's
    environment is used."""
    from toolkit.bench.matrix import run_matrix
    from toolkit.bench.plan import find_build

    res = run_matrix(load_spec(spec_path, expect="Matrix"), results_root=results_root, resume=resume,
                     progress=progress, log=log, build=find_build(image_env))
    return res.path, "partial" if res.interrupted else "complete", res.derived.model_dump(mode="json")


def _run_status(run_dir: Path) -> str:
    """`complete` when the run finished (every cell ran, whatever its status), else `partial`."""
    from toolkit.results.archive import open_archive

    return "partial" if open_archive(run_dir).interrupted else "complete"


class TuneSession:
    def __init__(self, mspec: LoadedSpec, arm: str, *, budget: int | None = None, results_root: Path = Path("results"),
                 resume: Path | None = None, console=None, log: Callable[[str], None] = print):
        self.mspec, self.m, self.arm, self.log, self.console = mspec, mspec.model, arm, log, console
        self.results_root, self.resume_dir = Path(results_root), resume
        self.env_spec = load_spec(mspec.path_of(("environment",), self.m.environment), expect="Environment")
        self.space: Space = check_space(mspec, self.env_spec, arm)
        t = self.m.tune
        self.budget = budget or t.budget
        if budget is not None and budget < 2:
            raise ToolkitError(f"--budget {budget}: a search needs at least 2 trials", hint="give --budget 2 or more")
        self.first = t.first_requests or max(2, (self.m.requests or 8) // 4)
        self.confirm_requests = t.confirm_requests or self.m.requests or 32
        self.warnings: list[str] = list(self.space.notes)
        if self.space.level == "server" and self.m.target.kind == "external":
            raise mspec.error(("target",), f"tuning {', '.join(self.space.knobs)} restarts the server for every "
                              "trial, and an external target's servers were started by someone else",
                              hint="tune server flags on a target the toolkit launches (local or hosts)")
        if self.space.engine == "sglang":
            self.warnings += check_sglang_flags(mspec, self.env_spec, self.space, log=log)
        from toolkit.bench.targets import prepare_target

        prepare_target(mspec)  # extras and engines the target needs, before anything is written
        self.server = None

    # -- state
    def _new_state(self) -> dict:
        picked = search.choose_trials(self.space.candidates, self.budget, self.m.seed)
        if len(picked) < 2:
            raise self.mspec.error(("tune", "space", self.arm), f"the space holds {len(picked)} setting(s) SGLang "
                                   "would run differently: nothing to compare", hint="give a knob more values")
        from toolkit.results.archive import new_run_id

        parent = self.results_root / f"{self.m.name}-tune"
        parent.mkdir(parents=True, exist_ok=True)
        while True:
            sid = new_run_id()
            try:
                os.mkdir(parent / sid)
                break
            except FileExistsError:
                continue
        self.folder = parent / sid
        split = specs.split_prompts(self.mspec, self.folder, self.m.tune.holdout)
        trials = {f"t{i:02d}": p for i, p in enumerate(picked)}
        sizes = search.schedule(len(trials), self.m.tune.eta)
        return {"format": FORMAT, "version": 1, "id": sid, "status": "running",
                "matrix": {"name": self.m.name, "path": str(self.mspec.path), "hash": self._hash()},
                "environment": str(self.env_spec.path), "arm": self.arm, "baseline": self.m.baseline_arm,
                "engine": self.space.engine, "level": self.space.level, "tune": self.m.tune.model_dump(mode="json"),
                "budget": self.budget, "candidates": len(self.space.candidates), "notes": self.space.notes,
                "incumbent": self.space.base, "trials": trials, "schedule": sizes, "first_requests": self.first,
                "confirm_requests": self.confirm_requests, "split": split, "server": None, "again": self.again,
                "seed": self.m.seed, "knobs": self.space.knobs,
                "rungs": [{"index": 0, "trials": list(trials), "requests": self.first}], "confirmation": None}

    def _hash(self) -> str:
        from toolkit.render import template_version

        return spec_hash(self.mspec, template_version())

    def _load_state(self) -> dict:
        import json

        self.folder = Path(self.resume_dir)
        f = self.folder / "tune.json"
        if not f.is_file():
            raise ToolkitError(f"no tune session at {self.folder} (tune.json is missing)",
                               hint="give the folder `toolkit bench tune` printed, results/<matrix>-tune/<id>")
        state = json.loads(f.read_text())
        if state.get("format") != FORMAT:
            raise ToolkitError("tune.json is not a tune session's state", file=f)
        if state.get("status") in ("complete", "failed"):
            raise ToolkitError(f"tune session {state['id']} is {state['status']}", file=f, hint="start a new one")
        changed = [what for what, old, new in (
            ("the arm", state["arm"], self.arm), ("the matrix", state["matrix"]["hash"], self._hash()),
            ("the tune block", state["tune"], self.m.tune.model_dump(mode="json")))
            if old != new]
        if changed or (self.budget != state["budget"]):
            raise ToolkitError(f"{', '.join(changed) or 'the budget'} changed since session {state['id']} started",
                               hint=f"resume with the same matrix, --arm {state['arm']} and --budget {state['budget']}, "
                                    "or start a new session", file=self.mspec.path)
        return state

    def _save(self) -> None:
        write_json(self.folder / "tune.json", self.state)

    # -- servers and specs
    def _shared(self) -> bool:
        env = self.env_spec.model
        return (self.space.level == "request" and self.m.target.kind == "local" and env.engine == "transformers"
                and env.servers[self.m.baseline_arm] == env.servers[self.arm])

    def _target(self, arms: list[str]) -> dict:
        if self._shared():
            url = self._server_url()
            return {"kind": "external", "urls": {a: url for a in arms}}
        t = specs.user_target(self.mspec)
        if t.get("kind") == "external":  # request-level knobs on someone else's server: the arm's URL
            urls = dict(self.m.target.urls) or {a: self.m.target.url for a in self.m.arms}
            t.pop("url", None)
            t["urls"] = {a: urls.get(a, urls.get(self.arm)) for a in arms}
        return t

    def _server_url(self) -> str:
        from toolkit.serve import free_port, launcher_for

        if self.server is None:
            info = self.state.get("server") or {}
            port = info.get("port") if info.get("port") and _port_free(info["port"]) else free_port()
            import tempfile

            self.server = launcher_for(self.env_spec, self.arm, port=port,
                                       log_path=Path(tempfile.mkdtemp(prefix="toolkit-tune-")) / "server.log")
            self.state["server"] = {"port": port, "command": shlex.join(self.server.command),
                                    "shared_by": "every run of this session (request-level knobs)"}
            self._save()
            self.log(f"starting the shared server: {self.state['server']['command']}")
            self.server.start()
            self.server.wait_healthy(timeout_s=600)
        return self.server.base_url

    def _keep_log(self) -> None:
        """The shared server's log tail (as the runner keeps an arm's), scrubbed, under logs/."""
        import shutil

        from toolkit.fsutil import write_atomic
        from toolkit.scrub import scrub_text

        tail = self.server.log_tail(400)
        if tail:  # a resumed session's server gets a file of its own
            n = len(list((self.folder / "logs").glob("server*.log"))) if (self.folder / "logs").is_dir() else 0
            write_atomic(self.folder / "logs" / (f"server.{n}.log" if n else "server.log"), scrub_text(tail) + "\n")
        shutil.rmtree(Path(self.server.log_path).parent, ignore_errors=True)

    def _write_env(self) -> None:
        env = specs.trial_environment(self.env_spec, self.arm, self.m.baseline_arm, self.space.level,
                                      self.state["trials"], again=self.again)
        specs.write_yaml(self.folder / "specs" / "environment.yaml", env,
                         f"tune session {self.state['id']}: {self.env_spec.path} with one preset per trial")

    def _execute(self, name: str, matrix: dict, header: str) -> tuple[Path, str, dict | None]:
        """Run (or resume) one generated matrix; an earlier complete run of it is reused as it is."""
        path = self.folder / "specs" / f"{name}.yaml"
        runs = sorted(p for p in (self.folder / name).glob("*") if (p / "manifest.json").is_file())
        done = [p for p in runs if _run_status(p) == "complete"]
        if done:
            self.progress.reused(matrix["arms"], len(matrix["workloads"]) * len(matrix["concurrency"]) * matrix["repeats"])
            return done[-1], "complete", None
        specs.write_yaml(path, matrix, header)
        resume = None
        if runs:
            import json

            old = json.loads((runs[-1] / "manifest.json").read_text()).get("matrix", {}).get("hash")
            from toolkit.render import template_version

            if old == spec_hash(load_spec(path, expect="Matrix"), template_version()):
                resume = runs[-1]
            else:
                self.log(f"{runs[-1]} was measured on another server URL: this run starts again")
        return _run_trials(path, results_root=self.folder, resume=resume, progress=self.progress, log=self.log,
                           image_env=self.env_spec)

    # -- the search
    def run(self) -> dict:
        self.state = self._load_state() if self.resume_dir else self._new_state()
        self._save()
        self._write_env()
        t0 = time.monotonic()
        from toolkit.tune.progress import TuneProgress
        from toolkit.console import err

        sizes = self.state["schedule"]
        total = sum(n + 1 + bool(self.again) for n in sizes) + 3 + bool(self.again)
        self.progress = TuneProgress(self.console or err, total)
        self.log(f"tune {self.m.name}/{self.arm}: session {self.folder}")
        self.log(f"{len(self.state['trials'])} trials of {self.state['candidates']} candidates; rungs of "
                 f"{', '.join(map(str, sizes))} trials with {self.first} requests per cell first, "
                 f"x{self.m.tune.eta} per rung; confirmation: {self.confirm_requests} held-out requests per cell")
        try:
            status = self._search()
            if status == "complete":
                status = self._confirm()
        except KeyboardInterrupt:
            status = "partial"
        finally:
            if self.server is not None:
                self.server.stop()
                self._keep_log()
            self.progress.finish()
        self.state["status"] = "complete" if status == "complete" else "partial"
        self.state["wall_s"] = round(self.state.get("wall_s", 0.0) + time.monotonic() - t0, 1)
        from toolkit.tune.report import result, write_tune_report

        self.state["result"] = result(self.state, self.folder)
        if self.state["status"] == "complete":
            self.state["result"]["report"] = str(write_tune_report(self.state, self.folder))
        self._save()
        from toolkit.checksums import write_sums

        write_sums(self.folder)  # the session's own files; each run archive in it keeps its own SHA256SUMS
        return self.state["result"]

    @property
    def again(self) -> str | None:
        """The baseline once more after the trials (an A/A check and the far side of the bracket): runs on the
        shared server only, where it costs requests, not a launch."""
        return f"{self.m.baseline_arm}-again" if self._shared() else None

    def _units(self, stem: str, trials: list[str], workloads: dict[str, dict]) -> list[tuple[str, list, dict, list]]:
        """The runs of one rung (or the confirmation): (name, arms, workloads, concurrency levels). On a shared
        server one run per cell, arms back to back (baseline, trials in an order rotated per cell, baseline
        again), so that load drifting over minutes falls between cells, not between arms; otherwise one run
        for all cells (every trial is a launch)."""
        baseline = self.m.baseline_arm
        if not self.again:
            return [(stem, [baseline, *trials], workloads, list(self.m.concurrency))]
        units = []
        for i, (w, c) in enumerate((w, c) for w in workloads for c in self.m.concurrency):
            r = i % len(trials)
            units.append((f"{stem}-{w}-c{c}", [baseline, *trials[r:], *trials[:r], self.again], {w: workloads[w]}, [c]))
        return units

    def _run_units(self, units, *, requests: int, seed: int, repeats: int, what: str) -> tuple[str, list[str], dict]:
        names, records = [], {}
        for name, arms, workloads, conc in units:
            matrix = specs.run_matrix(
                self.mspec, name=name, arms=arms, baseline=self.m.baseline_arm,
                workloads=[{"name": w, **wl} for w, wl in workloads.items()], requests=requests, seed=seed,
                repeats=repeats, target=self._target(arms), description=f"tune session {self.state['id']}: {what}")
            matrix["concurrency"] = conc
            run_dir, status, _ = self._execute(name, matrix, f"tune session {self.state['id']}: {what}")
            names.append(os.path.relpath(run_dir, self.folder))
            if status != "complete":
                return "partial", names, records
            records.update(run_records(run_dir))
        return "complete", names, records

    def _search(self) -> str:
        baseline, rungs = self.m.baseline_arm, self.state["rungs"]
        tune_w = {w: {"path": f"../{s['files']['tune']}"} for w, s in self.state["split"].items()}
        records: list[dict] = []
        k = 0
        while k < len(rungs):
            rung = rungs[k]
            self.progress.set_stage(f"rung {k + 1}/{len(self.state['schedule'])}")
            units = self._units(f"{self.m.name}-tune-r{k}", rung["trials"], tune_w)
            self.progress.begin(units, len(self.m.concurrency))
            status, rung["runs"], recs = self._run_units(
                units, requests=rung["requests"], seed=self.m.seed + k, repeats=1,
                what=f"rung {k}: trials of preset {self.arm} against {baseline} on the tune sample")
            rung["status"] = status
            self._save()
            if status != "complete":
                return "partial"
            records.append(recs)
            per = {t: search.pooled_cells(records, t, baseline, self.again, seed=self.m.seed) for t in rung["trials"]}
            scores = {t: search.score(cells) for t, cells in per.items()}
            rung["scores"] = {t: vars(s) for t, s in scores.items()}
            if all(s.geomean is None for s in scores.values()):
                self._fail(f"rung {k}: no trial could be measured against {baseline}", rung["runs"])
            order = search.ranking(scores)
            lead = scores[order[0]]
            self.progress.set_best(f"{order[0]} {fmt_centre(lead.geomean, lead.low, lead.high)} x")
            sizes = self.state["schedule"]
            if k + 1 < len(sizes) and not search.settled(scores):
                if len(rungs) == k + 1:
                    rungs.append({"index": k + 1, "trials": search.survivors(scores, sizes[k + 1]),
                                  "requests": search.rung_requests(self.first, self.m.tune.eta, k + 1)})
            else:
                if k + 1 < len(sizes):
                    rung["stopped_early"] = "the leader's interval lies above every other trial's"
                    self.progress.skip(sum(n + 1 + bool(self.again) for n in sizes[k + 1:]))
                self.state["best"] = order[0]
            self._save()
            k += 1
        return "complete"

    def _confirm(self) -> str:
        best = self.state["best"]
        self.progress.set_stage("confirmation")
        held = {w: {"path": f"../{s['files']['all']}", "holdout": f"../{s['files']['tune']}"}
                for w, s in self.state["split"].items()}
        units = self._units(f"{self.m.name}-tune-confirm", [self.arm, best], held)
        self.progress.begin(units, len(self.m.concurrency))
        status, runs, _ = self._run_units(
            units, requests=self.confirm_requests, seed=self.m.seed, repeats=self.m.repeats,
            what=f"the winner {best} and the preset {self.arm} as it was, against {self.m.baseline_arm}, on "
                 "prompts the search never saw")
        self.state["confirmation"] = {"runs": runs, "status": status, "trials": [self.arm, best],
                                      "requests": self.confirm_requests}
        self._save()
        pairs = search.pooled_cells([run_records(self.folder / r) for r in runs], best, self.m.baseline_arm)
        if status == "complete" and not any(r["ratio"] for r in pairs.values()):
            self._fail(f"the confirmation measured no pair of {best} and {self.m.baseline_arm}", runs)
        return status

    def _fail(self, what: str, runs: list[str]) -> None:
        """Nothing to rank: say why (the first failed cell's reason), mark the session failed (not resumable)."""
        from toolkit.errors import ToolFailure
        from toolkit.results.archive import open_archive

        reasons = [c.reason for r in runs for c in open_archive(self.folder / r).cells if c.status == "failed"]
        self.state["status"] = "failed"
        self.state["error"] = what
        self._save()
        raise ToolFailure(f"{what}: {reasons[0] if reasons else 'every request failed'}",
                          hint=f"the runs are in {self.folder}; fix the cause and start a new session")


def _port_free(port: int) -> bool:
    import socket

    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server will: a port in TIME_WAIT is free
        try:
            s.bind(("127.0.0.1", int(port)))
            return True
        except OSError:
            return False
