"""Target kind `slurm`: one batch job per arm (toolkit.slurm). The scheduler places them; the node each server
came up on is learnt when it starts (the launch record's `slurm`, the manifest's slurm.jobs)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar

from toolkit.schema.manifest import Hardware, Manifest, TargetRecord
from toolkit.targets.base import LaunchArgs, Slot, Target, deal, require_embedded


@dataclass(frozen=True)
class SlurmTarget:
    """Slurm batch jobs, one per arm. `loadgen`: where each cell's load generator runs, `job-step` (beside the
    server, in its job) or `submit-host` (this host)."""

    partition: str | None = None
    launcher: str = "process"
    loadgen: str = "job-step"
    kind: ClassVar[str] = "slurm"

    def record(self) -> TargetRecord:
        return TargetRecord(kind="slurm", launcher=self.launcher, loadgen=self.loadgen,
                            **({"partition": self.partition} if self.partition else {}))


def slurm_jobs_default(s, arms: int) -> int:
    """Jobs at once when the spec does not say: every arm where each job gets hardware of its own (GPUs, or
    whole nodes with --exclusive); else one at a time, since CPU jobs may share a node's cores."""
    own = bool(s.gpus_per_arm or s.gres or any(o.split("=")[0] == "--exclusive" for o in s.sbatch))
    return arms if own else 1


class Slurm(Target):
    kind = "slurm"

    def slots(self, spec, engine: str | None, hosts_spec) -> list[Slot]:
        """Each job has its own allocation: `hardware` names the job; the node and GPUs it got are the window's."""
        m = spec.model
        t = m.target
        target = SlurmTarget(t.slurm.partition, t.launcher, t.slurm.loadgen)
        n = min(t.slurm.jobs or slurm_jobs_default(t.slurm, len(m.arm_names)), len(m.arm_names))
        return deal([Slot(f"slurm-{i}", target, hardware=Hardware(host=f"slurm-job-{i}", gpus="all"))
                     for i in range(n)], m.arm_names)

    def check(self, spec, env_spec) -> None:
        from toolkit.slurm.render import check_slurm

        check_slurm(spec, env_spec)

    def preflight(self, plan) -> list:
        """The embedded engine's extra, and sbatch and friends answering here."""
        require_embedded(plan)
        from toolkit.slurm.tools import require_client

        require_client()  # sbatch and friends answer here, or a one-line error now
        return []

    def launcher_kwargs(self, plan, slot: Slot, arm: str, log_dir: Path) -> LaunchArgs:
        """The arm's rendered job script (toolkit.slurm.launcher.slurm_launcher takes it)."""
        from toolkit.slurm.render import render_jobs

        return LaunchArgs(Path(log_dir) / f"{arm}.log", kind="slurm",
                          job=render_jobs(plan.spec, plan.env_spec, [arm], served=plan.served)[0])

    def launcher(self, plan, arm: str, kw: LaunchArgs):
        from toolkit.slurm.launcher import slurm_launcher

        return slurm_launcher(plan.env_spec_of(arm), plan.preset_name(arm), job=kw.job, log_path=kw.log_path)

    def resume(self, run_dir: Path, manifest, log: Callable[[str], None]) -> None:
        """Jobs a killed run left behind: cancelled before any is resubmitted."""
        from toolkit.slurm.launcher import cancel_recorded

        for job_id in cancel_recorded(run_dir, manifest):
            log(f"cancelled Slurm job {job_id}, left running by the run being resumed")

    def manifest_record(self, plan, manifest: Manifest) -> Manifest:
        """The job scripts now; the jobs as they are submitted (note_launch)."""
        from toolkit.slurm.render import manifest_record

        return manifest.model_copy(update={"slurm": manifest_record(plan.spec, plan.env_spec, served=plan.served)})

    def note_launch(self, manifest, launcher, launch: int) -> tuple[str, Any] | None:
        """The job (SlurmJobRecord) into the manifest's slurm.jobs: when submitted (a toolkit killed with -9
        still names it, and --resume cancels it), again when it ran and ended."""
        from toolkit.schema.manifest import SlurmRecord

        new = launcher.job_record(launch)
        if new is None:
            return None
        rec = manifest.slurm or SlurmRecord(loadgen=launcher.job.loadgen)  # a run from before the field
        jobs = list(rec.jobs)
        at = next((i for i, j in enumerate(jobs) if j.job_id == new.job_id), len(jobs))
        jobs[at:at + 1] = [new]
        return "slurm", rec.model_copy(update={"jobs": jobs})


TARGET = Slurm()
