"""A Slurm matrix's job scripts, rendered from the specs through templates/slurm/job.sbatch.j2: one per arm,
deterministic (no time, no job id: the job finds those itself), readable and submittable by hand.

    jobs = render_jobs(matrix_spec, env_spec)     # toolkit.bench.plan.plan_target loads both
    jobs[0].text                                   # the sbatch script
    jobs[0].command                                # the preset's exact server command ("${PORT}": the job's port)

Each script carries the environment's spec hash, the NVLink-multicast-off variables, the preset's exact server
command, and writes "HOST PORT GPUS" to <workdir>/<job name>-<job id>.endpoint just before the server starts:
that is how the toolkit learns where the server came up.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from toolkit import __version__
from toolkit import engines
from toolkit.errors import ToolkitError
from toolkit.fsutil import write_atomic
from toolkit.gpu.probes import NO_MULTICAST
from toolkit.render import jinja_env, template_version
from toolkit.specs import LoadedSpec, spec_hash

PORT = "@PORT@"  # stands for the port the job picks; shlex leaves it unquoted, the script says "${PORT}"


@dataclass(frozen=True)
class JobScript:
    """One arm's job: its name, script text, the server command it runs and the folder it writes to."""

    arm: str
    job_name: str
    text: str
    command: list[str]  # the server command; PORT where the job's port goes (unless the preset fixes one)
    workdir: Path
    model: str | None  # the model name requests carry
    engine: str
    loadgen: str = "job-step"  # where the cells' load generator runs (the target's `slurm: {loadgen: ...}`)
    nodes: int = 1

    @property
    def filename(self) -> str:
        return f"{self.job_name}.sbatch"

    @property
    def command_line(self) -> str:
        return shell_line(self.command)


def shell_line(command: list[str]) -> str:
    return shlex.join(command).replace(PORT, '"${PORT}"')


def workdir_of(spec: LoadedSpec) -> Path:
    """The shared folder of a Slurm matrix's jobs: `slurm.workdir` (relative to the spec), or <cache>/slurm."""
    from toolkit.settings import settings

    t = spec.model.target
    if t.slurm is not None and t.slurm.workdir:
        path = spec.path_of(("target", "slurm", "workdir"), t.slurm.workdir, must_exist=False)
    else:
        path = settings().cache_dir / "slurm"
    path = path.absolute()
    if any(c.isspace() or c in "'\"$`\\," for c in str(path)):
        raise spec.error(("target", "slurm", "workdir"), f"{path}: #SBATCH lines cannot name a folder with spaces, "
                         "quotes, commas, $ or backslashes", hint="give `slurm: {workdir: ...}` a plain path on the shared "
                                                          "file system")
    return path


def check_slurm(spec: LoadedSpec, env_spec: LoadedSpec) -> Path:
    """The mistakes of a Slurm target that its job scripts would meet, each at its key's line; returns the
    jobs' shared folder. plan_target calls it (so `toolkit validate` and every run refuse them before
    anything starts), and render_jobs."""
    t, env = spec.model.target, env_spec.model
    eng = engines.get(env.engine)
    if t.slurm.nodes > 1 and not eng.spans_nodes:
        raise spec.error(("target", "slurm", "nodes"), "only SGLang spans nodes (--nnodes)",
                         hint=f"engine {eng.name!r} runs on one node: drop `nodes:`")
    if not eng.slurm_jobs:
        raise spec.error(("target", "kind"), f"a Slurm job cannot run engine {eng.name!r} yet: its server command "
                         "is not rendered into job scripts", hint="run it on a `local` target (launcher: process)")
    if not eng.supports_launcher(t.launcher):
        raise spec.error(("target", "launcher"), f"engine {eng.name!r} does not run under launcher {t.launcher!r} "
                         "in a job", hint=f"set `launcher:` to one of {', '.join(sorted(eng.launchers))}")
    return workdir_of(spec)


def server_command(spec: LoadedSpec, env_spec: LoadedSpec, arm: str) -> tuple[list[str], str | None, int | None]:
    """(the preset's server command as the job runs it, the model name requests carry, the preset's own port).
    The server listens on every interface (the load generator reaches it from the submitting host)."""
    t, env = spec.model.target, env_spec.model
    args = dict(env.servers[arm])
    if engines.get(env.engine).embedded:
        from toolkit.serve import model_dir_for
        from toolkit.serve.transformers import render_serve_args

        model_dir = str(model_dir_for(env_spec))
        device = [] if "device" in args else ["--device", "cpu"]
        python = t.python_of(env.engine) or sys.executable
        return ([python, "-m", "toolkit.serve._tserve", "serve", model_dir, *device, "--host", "0.0.0.0",
                 "--port", PORT, *render_serve_args(args)], model_dir, None)
    eng = engines.get(env.engine)  # its own command line (Engine.server_command): sglang, vllm
    own = int(args["port"]) if "port" in args else None
    args.setdefault("host", "0.0.0.0")
    args.setdefault("port", PORT)
    python = (t.python_of(env.engine) or sys.executable) if t.launcher == "process" else "python3"
    return eng.server_command(args, python), eng.served_name(args), own


def sbatch_options(spec: LoadedSpec, job_name: str, workdir: Path) -> list[str]:
    """The #SBATCH lines: the toolkit's own (name, log), then the target's fields, then its `sbatch:` extras."""
    s = spec.model.target.slurm
    opts = [f"--job-name={job_name}", f"--output={workdir}/%x-%j.out", f"--nodes={s.nodes}", "--ntasks-per-node=1"]
    for flag, value in (("--partition", s.partition), ("--account", s.account), ("--time", s.time_limit),
                        ("--gres", s.gres), ("--cpus-per-task", s.cpus_per_task), ("--mem", s.mem)):
        if value is not None:
            opts.append(f"{flag}={value}")
    if s.gpus_per_arm:
        opts.append(f"--gpus-per-node={s.gpus_per_arm // s.nodes}" if s.nodes > 1 else f"--gpus={s.gpus_per_arm}")
    return opts + list(s.sbatch)


def render_jobs(spec: LoadedSpec, env_spec: LoadedSpec, arms: list[str] | None = None,
                served: Callable[[str], tuple[LoadedSpec, str]] | None = None) -> list[JobScript]:
    """The job script of every arm (or of `arms`), in the matrix's order. `served`: arm -> (its Environment,
    its preset) where arms come from several Environments (default: env_spec's preset of the arm's name)."""
    m = spec.model
    t = m.target
    if t.kind != "slurm":
        raise spec.error(("target", "kind"), f"render slurm needs a target of kind slurm, this one is {t.kind}",
                         hint="set `target: {kind: slurm, slurm: {...}}` (docs/slurm.md)")
    served = served or (lambda a: (env_spec, a))
    workdir = check_slurm(spec, env_spec)
    template = jinja_env().get_template("slurm/job.sbatch.j2")
    out, hashes = [], {}
    for arm in arms or m.arm_names:
        arm_env, preset = served(arm)
        env = arm_env.model
        if arm_env.path not in hashes:
            check_slurm(spec, arm_env)
            hashes[arm_env.path] = spec_hash(arm_env, template_version())
        env_hash = hashes[arm_env.path]
        job_name = f"tk-{m.name}-{arm}"
        command, model, port = server_command(spec, arm_env, preset)
        job_env = {**env.env, **engines.get(env.engine).job_env, **t.env_of(env.engine)}
        text = template.render(
            arm=arm, matrix=m.name, matrix_path=str(spec.path), env_name=env.name, env_hash=env_hash,
            engine=env.engine, launcher=t.launcher, runtime=t.slurm.container_runtime, version=__version__,
            job_name=job_name, workdir=str(workdir), sbatch=sbatch_options(spec, job_name, workdir),
            no_multicast=NO_MULTICAST, env=job_env, port=port, nodes=t.slurm.nodes, command=shell_line(command),
            image=t.slurm.container_image, mounts=t.slurm.mounts)
        out.append(JobScript(arm, job_name, text, command, workdir, model, env.engine, t.slurm.loadgen, t.slurm.nodes))
    return out


def manifest_record(spec: LoadedSpec, env_spec: LoadedSpec, served: Callable[[str], tuple[LoadedSpec, str]] | None = None):
    """What the manifest says of a Slurm run before any job exists (toolkit.schema.manifest.SlurmRecord): where
    the load generator runs and every arm's script as it will be submitted (an arm whose script cannot be
    rendered has none: its cells fail with the reason)."""
    from toolkit.schema.manifest import SlurmRecord

    scripts = {}
    for arm in spec.model.arm_names:
        try:
            scripts[arm] = render_jobs(spec, env_spec, [arm], served)[0].text
        except ToolkitError:
            continue
    return SlurmRecord(loadgen=spec.model.target.slurm.loadgen, scripts=scripts, jobs=[])


def write_jobs(jobs: list[JobScript], out_dir: Path) -> list[Path]:
    """Each job's script into out_dir (made if missing), executable."""
    if out_dir.exists() and not out_dir.is_dir():
        raise ToolkitError(f"{out_dir} is a file: -o names the folder the job scripts are written to",
                           hint="give a folder (new, or one to overwrite the scripts in)")
    return [write_atomic(out_dir / job.filename, job.text, mode=0o755) for job in jobs]
