"""The `slurm:` block of a Matrix target (`target: {kind: slurm, launcher: process, slurm: {...}}`;
docs/slurm.md): one batch job per arm, rendered from the specs (toolkit.slurm), submitted with sbatch.

Mistakes that involve two fields are listed by `SlurmJob.errors` (each at its own line); `launcher` left
unset on a Slurm target means `process`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from toolkit.specs.base import Hash, StrictModel

Word = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.:+@%-]+$", description="one word: no spaces or quotes, e.g. gpu")]
# the options the toolkit writes itself: a second value in `sbatch:` would silently win or lose
OWN_OPTIONS = ("--job-name", "-J", "--output", "-o", "--error", "-e", "--parsable", "--wrap", "--partition", "-p",
               "--account", "-A", "--time", "-t", "--nodes", "-N", "--gpus", "-G", "--gres", "--gpus-per-node",
               "--ntasks-per-node", "--cpus-per-task", "-c", "--mem")


class SlurmJob(StrictModel):
    """Where and how each arm's job runs on a Slurm cluster (a target of kind slurm)."""

    partition: Word | None = Field(None, description="the partition (sbatch "
                                                                      "--partition; default: the cluster's)")
    account: Word | None = Field(None, description="the account charged (--account)")
    time_limit: str | None = Field(
        None, pattern=r"^([0-9]+-)?[0-9]+(:[0-9]{1,2}){0,2}$",
        description="each job's time limit (--time: MINUTES, HH:MM:SS or DAYS-HH:MM:SS, e.g. '2:00:00'); a job "
                    "that reaches it ends, and the cells it had left fail with TIMEOUT")
    gpus_per_arm: int = Field(0, ge=0, description="GPUs of each arm's job (--gpus; "
                                                                    "--gpus-per-node with nodes > 1)")
    gres: str | None = Field(None, pattern=r"^[A-Za-z0-9_:.,-]+$", description=""
                                              "generic resources per node instead of gpus_per_arm, e.g. gpu:rtx6000:8")
    nodes: int = Field(1, ge=1, description="nodes of each arm's job (SGLang's "
                                                             "--nnodes; one server process per node)")
    cpus_per_task: int | None = Field(None, ge=1, description="--cpus-per-task")
    mem: str | None = Field(None, pattern=r"^[0-9]+[KMGT]?$", description="memory "
                                             "per node (--mem, e.g. 200G)")
    sbatch: list[Annotated[str, Field(pattern=r"^-[^\n]+$", description="one sbatch option as sbatch takes it, "
                                      "starting with - or --, on one line, e.g. '--qos=high'")]] = Field(
        default_factory=list, description="further sbatch options, one per item, e.g. "
                                          "['--qos=high', '--exclusive']")
    container_image: str | None = Field(
        None, description="launcher container: the image the job runs (pyxis: e.g. "
                          "registry#org/image:tag or a .sqsh file; apptainer: a .sif file or docker://...)")
    container_runtime: Literal["pyxis", "apptainer"] = Field(
        "pyxis", description="launcher container: enroot/pyxis (srun --container-image) or apptainer")
    mounts: list[Annotated[str, Field(pattern=r"^/[^\s,:]*:/[^\s,:]*(:ro|:rw)?$", description="SRC:DST[:ro|:rw], "
                                      "both absolute paths without spaces, commas or colons, e.g. "
                                      "/models:/models:ro")]] = Field(
        default_factory=list, description="launcher container: host folders the container sees, "
                                          "SRC:DST[:ro], e.g. /models:/models:ro")
    workdir: str | None = Field(
        None, description="a folder on the file system the nodes share, for job scripts, job logs "
                          "and the file each job says where its server listens in (relative to this file; "
                          "default: <cache>/slurm)")
    loadgen: Annotated[Literal["job-step", "submit-host"], Hash.omit_default(
        "added after Slurm targets: a spec that does not set it keeps its hash")] = Field(
        "job-step", description="where each cell's load generator runs: `job-step` (srun --overlap inside the "
                                "arm's allocation, on its server's node: no network hop is measured; the toolkit's "
                                "Python must be on the shared file system) or `submit-host` (this host, across "
                                "the network)")
    jobs: int | None = Field(None, ge=1, description="at most this many arm jobs at once (default: every arm "
                                                     "when each job has GPUs or --exclusive nodes of its own, else "
                                                     "one: CPU jobs may share a node)")

    def errors(self, launcher: str) -> list[tuple[tuple, str, str]]:
        """Mistakes across the fields (and with the target's `launcher`): (keypath under target, message, hint)."""
        out = []
        if self.gres and self.gpus_per_arm:
            out.append((("slurm", "gres"), "give `gpus_per_arm:` or `gres:`, not both", "keep one of them"))
        if self.nodes > 1 and self.gpus_per_arm % self.nodes:
            out.append((("slurm", "gpus_per_arm"), f"{self.gpus_per_arm} GPUs do not split evenly over "
                        f"{self.nodes} nodes", "give a multiple of `nodes:` (it is sent as --gpus-per-node)"))
        for i, opt in enumerate(self.sbatch):
            name = opt.split("=", 1)[0].split()[0]
            if name in OWN_OPTIONS:
                out.append((("slurm", "sbatch", i), f"{name} is set by the toolkit (or by a field of this block)",
                            "use the block's field for it (partition, account, time_limit, gpus_per_arm, gres, "
                            "nodes, cpus_per_task, mem), or drop it"))
        if launcher == "container" and not self.container_image:
            out.append((("launcher",), "`launcher: container` needs `slurm: {container_image: ...}`",
                        "name the image the job runs, e.g. registry#org/sglang:0.5.23 (pyxis) or /images/sglang.sif"))
        if launcher != "container":
            for name in ("container_image", "container_runtime", "mounts"):
                if name in self.model_fields_set:
                    out.append((("slurm", name), f"`{name}:` applies to `launcher: container`",
                                "set `launcher: container` in the target, or remove it"))
        return out
