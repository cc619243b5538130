"""The matrix runner: one server launch per arm, every (workload x concurrency x repeat) cell against
it, the same prompts in the same order for every arm, each cell archived as soon as it is done.

    run = MatrixRunner(load_spec("envs/matrices/quickstart.yaml"), results_root=Path("results"))
    run_dir = run.run()

Arms are placed on *slots*: local engines (target.parallel), hosts of a Hosts group, or external URLs.
Arms on different slots run side by side (threads); arms on one slot run one after another.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Callable

from toolkit.bench import derive
from toolkit.bench.plan import Cell, Slot, cell_prompts, cell_seed, plan_cells, plan_slots
from toolkit.schema.keys import cell_key
from toolkit.schema.records import CellSummary, RequestRecord
from toolkit.errors import SpecError, ToolFailure, ToolkitError
from toolkit.spec import LoadedSpec, load_spec, spec_hash
from toolkit.spec.matrix import Matrix


class MatrixRunner:
    def __init__(self, spec: LoadedSpec, *, results_root: Path, resume: Path | None = None,
                 progress: Any = None, log: Callable[[str], None] = print):
        if not isinstance(spec.model, Matrix):
            raise SpecError(f"{spec.path} is a {spec.kind} spec; bench matrix needs a Matrix", file=spec.path)
        self.spec = spec
        self.m: Matrix = spec.model
        self.results_root = results_root
        self.resume_dir = resume
        self.progress = progress  # toolkit.bench.progress.MatrixProgress or None
        self.log = log
        from toolkit.bench.targets import prepare_target

        prepare_target(spec)  # extras and engines the target needs; https and API keys of external URLs
        self.env_spec = load_spec(spec.path_of(("environment",), self.m.environment), expect="Environment")
        missing = [a for a in self.m.arms if a not in self.env_spec.model.servers]
        if missing:
            raise spec.error(("arms",), f"arm(s) {missing} are not server presets of {self.m.environment}",
                             hint=f"presets there: {', '.join(self.env_spec.model.servers)}")
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.cells: list[CellSummary] = []
        self.records: dict[tuple, list[RequestRecord]] = {}
        self.arm_info: dict[str, dict] = {}
        self.flushed: dict[str, bool] = {}
        self.timing: dict[str, Any] = {"launch_s": {}, "stop_s": {}, "cells_s": 0.0, "arm_cells_s": {}}
        self.windows: dict[str, dict] = {}  # arm -> when it was measured (epoch s) and on what hardware

    # -- inputs
    def load_workloads(self) -> dict:
        from toolkit.workloads import load_workload

        out = {}
        training = (self.spec.path_of(("training_data",), self.m.training_data) if self.m.training_data else None)
        for i, ref in enumerate(self.m.workloads):
            try:
                w = load_workload(ref, base_dir=self.spec.path.parent, seed=self.m.seed, training=training)
            except ToolkitError as exc:
                if exc.file is None:
                    raise self.spec.error(("workloads", i), exc.message, exc.hint) from None
                raise
            out[w.name] = w
        return out

    def manifest(self, workloads: dict, slots: list[Slot]) -> dict:
        from toolkit.bench.hostinfo import host_fingerprint
        from toolkit.render import template_version

        env = self.env_spec.model
        tv = template_version()
        env_hash = spec_hash(self.env_spec, tv)
        return {  # the archive adds schema version, run id, start time and toolkit {version, git_sha}
            "matrix": {"name": self.m.name, "path": str(self.spec.path), "hash": spec_hash(self.spec, tv),
                       "resolved": self.m.model_dump(mode="json")},
            "environment": {"name": env.name, "path": str(self.env_spec.path), "hash": env_hash,
                            "resolved": env.model_dump(mode="json")},
            "build": self.build_record,
            "arms": {a: {"preset": env.servers[a], "request_params": env.request_params.get(a, {}),
                         "command": self._command_of(a)} for a in self.m.arms},
            "baseline": self.m.baseline_arm,
            "slots": [{"name": s.name, "arms": s.arms, "hardware": s.hardware,
                       "target": {k: v for k, v in s.target.items() if k != "spec"}} for s in slots],
            "workloads": {n: {"hash": w.hash, "n_prompts": len(w.prompts), "source": str(w.source)}
                          for n, w in workloads.items()},
            "host": host_fingerprint(slots),
        }

    def _find_build(self) -> dict | None:
        """The build record of this environment's image (`toolkit build env`), if one was made here."""
        if self.env_spec.model.engine != "sglang":
            return None
        from toolkit.image.records import find_build_record
        from toolkit.render import template_version

        return find_build_record(spec_hash(self.env_spec, template_version()))

    def _command_of(self, arm: str) -> str | dict:
        launcher = self.launchers.get(arm)
        if isinstance(launcher, ToolkitError):
            return {"error": launcher.message}
        import shlex

        return shlex.join(launcher.command) if launcher is not None and launcher.command else None

    def _make_launchers(self, slots: list[Slot], todo: dict) -> None:
        """Every arm's launcher is made (not started) up front: the manifest records the exact command."""
        from toolkit.serve import launcher_for

        self.launchers: dict[str, Any] = {}
        for slot in slots:
            for arm in slot.arms:
                if not todo.get(arm, True):
                    continue
                try:
                    self.launchers[arm] = launcher_for(self.env_spec, arm, **self._launcher_kwargs(slot, arm))
                except ToolkitError as exc:
                    self.launchers[arm] = exc

    # -- the run
    def run(self) -> Path:
        from toolkit.results.archive import ArchiveWriter

        workloads = self.load_workloads()
        slots = plan_slots(self.spec, self.env_spec.model.engine)
        self.representativeness = self._representativeness(workloads)
        import tempfile

        self._tmp_logs = tempfile.mkdtemp(prefix="toolkit-logs-")
        domains = list(workloads)
        if self.resume_dir:
            writer = ArchiveWriter.resume(self.resume_dir)
            from toolkit.render import template_version

            old = writer.manifest.get("matrix", {}).get("hash")
            if old and old != spec_hash(self.spec, template_version()):
                raise ToolkitError(f"the matrix spec changed since run {self.resume_dir.name} started",
                                   hint="resume with the same spec, or start a new run", file=self.spec.path)
            self.build_record = writer.manifest.get("build")
            done = writer.done_cells()
            todo = {arm: [c for c in plan_cells(self.m, domains, arm) if c.key not in done] for arm in self.m.arms}
            self._make_launchers(slots, todo)
            self._reload_done(writer)
        else:
            self.build_record = self._find_build()
            todo = {arm: plan_cells(self.m, domains, arm) for arm in self.m.arms}
            self._make_launchers(slots, todo)
            writer = ArchiveWriter.create(self.results_root, self.m.name, self.manifest(workloads, slots))
        self.writer = writer
        self._slot_arms = [s.arms for s in slots]
        if self.progress:
            self.progress.start(todo, self.m)
        t0 = time.monotonic()
        status = "complete"
        previous = self._install_interrupts()
        threads = [threading.Thread(target=self._run_slot, args=(s, todo, workloads), name=s.name, daemon=True)
                   for s in slots]
        try:
            for t in threads:
                t.start()
            while any(t.is_alive() for t in threads):
                for t in threads:
                    t.join(0.2)
        except (KeyboardInterrupt, SystemExit):
            status = "partial"
            self._stop.set()
            self.log("interrupted: stopping servers and writing a partial run (resume with --resume)")
            from toolkit.serve.base import _stop_all

            _stop_all()
            for t in threads:
                t.join(30)
        finally:
            self._restore_interrupts(previous)
            if self.progress:
                self.progress.stop()
        self.timing["wall_s"] = time.monotonic() - t0
        import shutil

        shutil.rmtree(self._tmp_logs, ignore_errors=True)  # their tails are archived under logs/
        # a run with failed cells is still complete: failed cells are results too, named in the summary
        derived = self.derive()
        from toolkit.bench.report import markdown_report

        writer.finalize(status, derived, markdown_report(self.m, self.cells, derived))
        self.status = status
        self.derived = derived
        return writer.path

    def _install_interrupts(self) -> dict:
        """SIGINT/SIGTERM: mark the run as stopping *before* servers go down, so that requests failing
        because of the stop are not archived as failed cells (resume reruns those cells)."""
        import signal

        if threading.current_thread() is not threading.main_thread():
            return {}

        def interrupt(signum, frame):  # noqa: ARG001
            self._stop.set()
            raise KeyboardInterrupt

        previous = {}
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.getsignal(sig)
            signal.signal(sig, interrupt)
        return previous

    @staticmethod
    def _restore_interrupts(previous: dict) -> None:
        import signal

        for sig, handler in previous.items():
            signal.signal(sig, handler)

    def _reload_done(self, writer) -> None:
        from toolkit.results.archive import open_archive

        arch = open_archive(writer.path)
        for c in arch.cells:
            self.cells.append(c)
            recs = list(arch.iter_records(derive_key(c)))
            self.records[(c.arm, c.domain, c.concurrency)] = self.records.get((c.arm, c.domain, c.concurrency), []) + recs

    def _representativeness(self, workloads: dict) -> list[dict]:
        if not self.m.training_data:
            return []
        from toolkit.workloads.loader import read_prompts
        from toolkit.workloads.represent import representativeness

        train = read_prompts(self.spec.path_of(("training_data",), self.m.training_data))
        out = []
        for w in workloads.values():
            rep = representativeness(train, w.prompts, train_name=self.m.training_data, workload_name=w.name,
                                     workload_hash=w.hash)
            out.append({"workload": w.name, "verdict": rep.verdict, "divergence": rep.score, "reason": rep.reason,
                        "report": rep.model_dump(mode="json")})
        return out

    def _run_slot(self, slot: Slot, todo: dict, workloads: dict) -> None:
        for arm in slot.arms:
            if self._stop.is_set():
                return
            cells = todo[arm]
            if not cells:
                continue
            self._run_arm(arm, slot, cells, workloads)

    def _run_arm(self, arm: str, slot: Slot, cells: list[Cell], workloads: dict) -> None:
        t0 = time.monotonic()
        launcher = self.launchers[arm]
        if isinstance(launcher, ToolkitError):
            self._fail_cells(arm, cells, f"cannot launch arm {arm}: {launcher.message}", launcher.hint or "")
            return
        try:
            if self.progress:
                self.progress.arm_starting(arm)
            launcher.start()
            launcher.wait_healthy(timeout_s=600)
            info = self._arm_info(arm, slot, launcher)
            with self._lock:
                self.arm_info[arm] = info
                self.timing["launch_s"][arm] = time.monotonic() - t0
        except ToolkitError as exc:
            took = time.monotonic() - t0
            with self._lock:
                self.timing.setdefault("launch_failed_s", {})[arm] = took
            self._fail_cells(arm, cells, f"{exc.message} ({took:.1f} s after launch)", exc.hint or launcher.log_tail(20))
            launcher.stop()
            self._archive_log(arm, launcher)
            return
        window = {"slot": slot.name, "hardware": slot.hardware, "start": time.time(), "end": None}
        with self._lock:
            self.windows[arm] = window
        try:
            for i, cell in enumerate(cells):
                if self._stop.is_set():
                    return
                try:
                    self._run_cell(cell, launcher, workloads[cell.domain])
                    launcher.check_alive(during=f"cell {cell.key}")
                    self._cell_server_state(arm, cell)
                except ToolFailure as exc:
                    reason = f"server died: {exc.message}"
                    tail = launcher.log_tail(20)
                    if cell.key not in self.writer.done_cells():
                        self._fail_cells(arm, [cell], reason, tail, records=getattr(exc, "records", []),
                                         workload_hash=workloads[cell.domain].hash)
                    self._fail_cells(arm, cells[i + 1:], reason, tail)
                    return
        finally:
            window["end"] = time.time()
            t_stop = time.monotonic()
            launcher.stop()
            with self._lock:
                self.timing["stop_s"][arm] = time.monotonic() - t_stop
            self._archive_log(arm, launcher)

    def _arm_info(self, arm: str, slot: Slot, launcher) -> dict:
        """The launcher's facts plus, for SGLang (launched or external), what the server says about itself:
        /server_info archived as servers/<arm>.json, its limits and speculative settings, and each preset flag
        it reports differently. The 48-request cap is read from the server, not assumed."""
        from toolkit.serve.sglang import preset_mismatches, server_info, server_state

        info = launcher.info()
        preset = self.env_spec.model.servers[arm]
        info["external"] = slot.target["kind"] == "external"
        speculative = "speculative-algorithm" in preset
        if self.env_spec.model.engine != "sglang":
            return info
        raw = info.pop("server_info", None) or server_info(launcher.base_url)
        info.update(server_state(raw))
        if raw:
            from toolkit.bench.hostinfo import scrub

            self.writer.write_file(f"servers/{arm}.json", _json(scrub(raw)))
            info["server_info_file"] = f"servers/{arm}.json"
            info["preset_mismatches"] = preset_mismatches(preset, raw)
            info["max_running_requests_source"] = "server_info"
        elif speculative and "max-running-requests" not in preset:
            # no /server_info: SGLang's documented behaviour, marked as assumed
            info["max_running_requests"] = info.get("max_running_requests") or 48
            info["max_running_requests_source"] = "assumed (no /server_info)"
        info["max_running_requests_implicit"] = speculative and "max-running-requests" not in preset
        info["cells"] = {}
        return info

    def _cell_server_state(self, arm: str, cell: Cell) -> None:
        """After a cell, SGLang's server-wide acceptance since the flush before it (a cross-check of the
        per-request figures)."""
        info = self.arm_info.get(arm)
        if not info or not info.get("server_info_read"):
            return
        from toolkit.serve.sglang import server_info, server_state

        st = server_state(server_info(self.launchers[arm].base_url))
        with self._lock:
            info["cells"][cell.key] = {"avg_spec_accept_length": st.get("avg_spec_accept_length")}

    def _launcher_kwargs(self, slot: Slot, arm: str) -> dict:
        """How the slot's target becomes a launcher: local engine, external URL, or a host's Docker engine."""
        t = slot.target
        kw: dict = {"log_path": Path(self._tmp_logs) / f"{arm}.log"}
        if t["kind"] == "external":
            return {**kw, "kind": "external", "url": t["urls"][arm]}
        target = self.m.target
        if self.env_spec.model.engine == "sglang" and target.launcher == "process":
            env = dict(target.env)
            if t.get("gpus"):
                env["CUDA_VISIBLE_DEVICES"] = t["gpus"]
            return {**kw, "kind": "process", "python": target.python, "env": env}
        if self.env_spec.model.engine == "sglang":
            build = self.build_record or {}
            image = (build.get("tags") or [None])[0] or build.get("image_id")
            kw.update(kind="docker", image=image)
            if t.get("gpus"):
                kw["gpus"] = t["gpus"].split(",")
            if t["kind"] == "hosts":
                h = t["spec"]
                user = f"{h['user']}@" if h.get("user") else ""
                kw.update(address=h["address"], docker_url=f"ssh://{user}{h['address']}:{h.get('port', 22)}")
        return kw

    def _archive_log(self, arm: str, launcher) -> None:
        tail = launcher.log_tail(400)
        if tail:
            from toolkit.bench.hostinfo import scrub_text

            self.writer.write_file(f"logs/{arm}.log", scrub_text(tail) + "\n")

    def _fail_cells(self, arm: str, cells: list[Cell], reason: str, log_tail: str,
                    records: list[RequestRecord] | None = None, workload_hash: str = "") -> None:
        """Archive cells that could not be measured (server would not start, or died): status failed,
        with the reason, the log tail and whatever requests did complete."""
        from toolkit.bench.hostinfo import scrub_text

        for cell in cells:
            s = CellSummary(arm=arm, domain=cell.domain, concurrency=cell.concurrency, repeat=cell.repeat,
                            output_len=self.m.output_len, workload_hash=workload_hash, status="failed",
                            reason=reason, log_tail=scrub_text(log_tail)[-4000:] if log_tail else None,
                            sampling=self.sampling(), n_requests=len([r for r in records or [] if not r.warmup]))
            self._record(cell, s, records or [])

    def sampling(self) -> dict:
        return {"api": self.m.api, "temperature": self.m.temperature, "output_len": self.m.output_len,
                "seed": self.m.seed, "warmup": self.m.warmup, "requests": self.m.requests,
                "duration_s": self.m.duration_s}

    def _run_cell(self, cell: Cell, launcher, workload) -> None:
        from toolkit.bench.loadgen import run, run_cell
        from toolkit.bench.metrics import summarize

        n = self.m.warmup + (self.m.requests or max(len(workload.prompts), 1))
        prompts = cell_prompts(workload.prompts, n, cell_seed(self.m.seed, cell.domain, cell.concurrency, cell.repeat))
        flushed = self._flush(launcher)
        with self._lock:
            self.flushed[cell.arm] = self.flushed.get(cell.arm, True) and flushed
        on_record = self.progress.on_record(cell) if self.progress else None
        telemetry = self._telemetry_start()
        t0 = time.monotonic()
        records = run(run_cell(
            launcher.base_url, self.m.api, prompts, concurrency=cell.concurrency, requests=self.m.requests,
            duration_s=self.m.duration_s, warmup=self.m.warmup, output_len=self.m.output_len,
            temperature=self.m.temperature, request_params=self.env_spec.model.request_params.get(cell.arm, {}),
            arm=cell.arm, domain=cell.domain, repeat=cell.repeat, seed=self.m.seed, model=launcher.model,
            on_record=on_record, check_alive=lambda: launcher.check_alive(during=f"cell {cell.key}"),
            workers=self.m.workers))
        elapsed = time.monotonic() - t0
        samples = telemetry.stop() if telemetry else None
        summary = summarize(records, arm=cell.arm, domain=cell.domain, concurrency=cell.concurrency,
                            repeat=cell.repeat, output_len=self.m.output_len, workload_hash=workload.hash,
                            sampling=self.sampling())
        with self._lock:
            self.timing["cells_s"] += elapsed
            self.timing["arm_cells_s"][cell.arm] = self.timing["arm_cells_s"].get(cell.arm, 0.0) + elapsed
        if samples:
            self.writer.write_file(f"telemetry/{cell.key}.json", _json(samples))
        self._record(cell, summary, records)

    def _flush(self, launcher) -> bool:
        flush = getattr(launcher, "flush_cache", None)
        if flush is None:
            return True
        try:
            return bool(flush())
        except Exception:  # noqa: BLE001 - reported as a methodology warning
            return False

    def _telemetry_start(self):
        try:
            from toolkit.gpu.telemetry import Telemetry, gpu_present
        except ImportError:
            return None
        if not gpu_present():
            return None
        t = Telemetry(interval_s=0.5)
        t.start()
        return t

    def _record(self, cell: Cell, summary: CellSummary, records: list[RequestRecord]) -> None:
        with self._lock:
            if self._stop.is_set():
                return  # interrupted: this cell is not archived, and --resume runs it again
            self.writer.write_cell(summary, records)
            self.cells.append(summary)
            key = (cell.arm, cell.domain, cell.concurrency)
            self.records[key] = self.records.get(key, []) + records
        if self.progress:
            self.progress.cell_done(cell, summary)

    def _dummy(self, arm: str) -> bool:
        env = self.env_spec.model
        if env.engine == "sglang":
            return env.servers.get(arm, {}).get("load-format") == "dummy"
        return env.model is not None and env.model.dummy is not None

    # -- derived results
    def derive(self) -> dict:
        rows = derive.speedups(self.cells, self.records, self.m.baseline_arm, seed=self.m.seed)
        spec_arms = {a for a in self.m.arms if a != self.m.baseline_arm
                     and derive.is_speculative(self.env_spec.model, a)}
        cross = derive.crossovers(rows, spec_arms)
        checks = derive.methodology_checks(matrix=self.m, cells=self.cells, records=self.records,
                                           arm_info=self.arm_info, flushed=self.flushed,
                                           representativeness=self.representativeness, windows=self.windows,
                                           dummy_arms=[a for a in self.m.arms if self._dummy(a)])
        planned = len(self.m.arms) * len(self.m.workloads) * len(self.m.concurrency) * self.m.repeats
        timing = dict(self.timing, arms=self.windows)
        if timing.get("wall_s"):
            timing["overhead_ratio"] = derive.overhead_ratio(timing, self._slot_arms)
        return {
            "baseline": self.m.baseline_arm,
            "speedups": rows,
            "crossovers": cross,
            "speculative_arms": sorted(spec_arms),
            "recommended_disable_batch_threshold": {a: derive.recommended_threshold(cross, a)
                                                    for a in sorted(spec_arms)},
            "never_pays_off": sorted(a for a in spec_arms if derive.never_pays_off(cross, a)),
            "methodology": checks,
            "representativeness": self.representativeness,
            "arm_info": self.arm_info,
            "timing": timing,
            "cells_planned": planned,
            "cells_done": len(self.cells),
        }


def derive_key(c: CellSummary) -> str:

    return cell_key(c.arm, c.domain, c.concurrency, c.repeat)


def _json(obj: Any) -> str:
    import json

    return json.dumps(obj, indent=1, sort_keys=True, default=str)
