"""A tune session: check the space, split the prompts, run the rungs of the search and the confirmation as
ordinary matrix runs, keep its state in `tune.json` so that Ctrl-C loses nothing and `--resume` goes on.

    session = TuneSession(load_spec("envs/matrices/quickstart.yaml"), "ngram", budget=6)
    res = session.run(progress=TuneProgress(err))   # TuneResult: trials, best, winners, confirmation, runs

    results/<matrix>-tune/<session-id>/
      tune.json                      plan and state (written atomically after every step), then the result
      prompts/ specs/                the prompt split and the specs of every run (toolkit.tune.specs)
      <matrix>-tune-r<k>/<run-id>/   rung k: a normal run archive, arms = baseline + trials
      <matrix>-tune-confirm/<run-id>/  the confirmation on held-out prompts
      report.md, report.html, plots/ the search, the winners and the confirmation
      logs/server.log                the shared server's log (request-level knobs)

The parts: toolkit.tune.state (tune.json: new, resume, save), toolkit.tune.loop (the rungs and the
confirmation as matrix runs), toolkit.tune.servers (one shared server, or a launch per trial). The progress
display is the caller's (toolkit.tune.progress.SearchProgress: every call a no-op unless it draws).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from toolkit import engines
from toolkit.errors import ToolkitError
from toolkit.schema.tune import SharedServer, TuneResult, TuneState
from toolkit.specs import LoadedSpec, load_spec
from toolkit.tune import specs
from toolkit.tune.loop import SearchLoop, evaluations
from toolkit.tune.progress import SearchProgress
from toolkit.tune.servers import Servers, again_arm, shares_one_server
from toolkit.tune.space import Space, check_sglang_flags, check_space
from toolkit.tune.state import new_state, resume_state, save_state


class TuneSession:
    def __init__(self, mspec: LoadedSpec, arm: str, *, budget: int | None = None, results_root: Path = Path("results"),
                 resume: Path | None = None, log: Callable[[str], None] = print):
        self.mspec, self.m, self.arm, self.log = mspec, mspec.model, arm, log
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
        if engines.get(self.space.engine).flag_check == "build":  # flags checked against its pinned source
            self.warnings += check_sglang_flags(mspec, self.env_spec, self.space, log=log)
        from toolkit.bench.targets import prepare_target

        prepare_target(mspec)  # extras and engines the target needs, before anything is written
        self.shared = shares_one_server(mspec, self.env_spec, arm, self.space.level)
        self.folder: Path | None = None
        self.state: TuneState | None = None

    def _save(self) -> None:
        save_state(self.folder, self.state)

    def _remember_server(self, record: SharedServer) -> None:
        self.state.server = record
        self._save()

    def _start(self) -> None:
        if self.resume_dir:
            self.folder = Path(self.resume_dir)
            self.state = resume_state(self.folder, self.mspec, self.arm, self.budget)
        else:
            self.folder, self.state = new_state(
                self.mspec, self.env_spec, self.space, self.arm, budget=self.budget, first=self.first,
                confirm_requests=self.confirm_requests, again=again_arm(self.mspec, self.shared),
                results_root=self.results_root)
        self._save()
        env = specs.trial_environment(self.env_spec, self.arm, self.m.baseline_arm, self.space.level,
                                      self.state.trials, again=self.state.again)
        specs.write_yaml(self.folder / "specs" / "environment.yaml", env,
                         f"tune session {self.state.id}: {self.env_spec.path} with one preset per trial")

    def run(self, progress: SearchProgress | None = None) -> TuneResult:
        """Run (or resume) the session; the result is also in tune.json. `progress`: the caller's display."""
        progress = progress if progress is not None else SearchProgress()
        self._start()
        st, t0 = self.state, time.monotonic()
        servers = Servers(self.mspec, self.env_spec, self.arm, shared=self.shared, previous=st.server,
                          remember=self._remember_server, log=self.log)
        loop = SearchLoop(self.mspec, self.env_spec, self.arm, self.folder, st, servers=servers, progress=progress,
                          save=self._save, log=self.log)
        progress.begin_session(evaluations(st.schedule, st.again))
        self.log(f"tune {self.m.name}/{self.arm}: session {self.folder}")
        self.log(f"{len(st.trials)} trials of {st.candidates} candidates; rungs of "
                 f"{', '.join(map(str, st.schedule))} trials with {st.first_requests} requests per cell first, "
                 f"x{self.m.tune.eta} per rung; confirmation: {st.confirm_requests} held-out requests per cell")
        try:
            status = loop.rungs()
            if status == "complete":
                status = loop.confirm()
        except KeyboardInterrupt:
            status = "partial"
        finally:
            servers.stop(self.folder)
            progress.finish()
        return self._finish(status, time.monotonic() - t0)

    def _finish(self, status: str, wall_s: float) -> TuneResult:
        from toolkit.checksums import write_sums
        from toolkit.results.compact import finish
        from toolkit.signals import signals_held
        from toolkit.tune.report import result, write_tune_report

        st = self.state
        st.status = "complete" if status == "complete" else "partial"
        st.wall_s = round((st.wall_s or 0.0) + wall_s, 1)
        st.result = result(st, self.folder)
        if st.status == "complete":
            st.result.report = str(write_tune_report(st.result, self.folder))
        with signals_held():  # tune.json and its sums together
            self._save()
            write_sums(self.folder)  # the session's own files; each run archive in it keeps its own SHA256SUMS
            if st.status == "complete":  # a partial session is resumed: left plain
                finish(self.folder)
        return st.result
