"""Before a matrix runs: what its target needs, checked up front (the target kind's preflight, toolkit.targets).

    prepare_target(plan_run(load_spec("envs/matrices/gateway.yaml")))   # as run_matrix does, before the archive

- the embedded engine (engine: transformers) needs the `local` extra (torch, transformers, tokenizers); SGLang
  in containers needs the docker SDK and, on this machine, an engine that answers; a Slurm target sbatch and
  friends. Missing: a one-line error (exit 2) that names what to install, before any archive is made.
- an external target's URLs are registered with toolkit.endpoints (toolkit/targets/external.py).
"""

from __future__ import annotations

from toolkit import endpoints
from toolkit.bench.plan import RunPlan, plan_target
from toolkit.specs import LoadedSpec

__all__ = ["prepare_target"]


def prepare_target(plan: RunPlan | LoadedSpec) -> list[endpoints.Endpoint]:
    """Check what the run needs and register its external endpoints; returns them. `plan`: the run's plan
    (its spec mistakes were found when it was made), or a Matrix spec, planned here as far as its target
    (bench tune, before it plans its runs)."""
    if isinstance(plan, LoadedSpec):
        plan = plan_target(plan)
    return plan.target.preflight(plan)
