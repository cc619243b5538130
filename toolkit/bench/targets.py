"""Before a matrix runs: what its target needs, checked up front, and how its external servers are reached.

    prepare_target(plan_run(load_spec("envs/matrices/gateway.yaml")))   # as run_matrix does, before the archive

- the embedded engine (engine: transformers, target local) needs the `local` extra (torch, transformers,
  tokenizers); SGLang in containers needs the docker SDK and an engine that answers. Missing: a one-line
  error (exit 2) that names what to install, before any archive is made.
- an external target's URLs are registered with toolkit.endpoints: https:// verified against the system
  trust store or the spec's `ca_bundle`, and the key from the variable `api_key_env` names, sent as a Bearer
  header by the load generator and the health polls. An unset variable is an error naming it.
"""

from __future__ import annotations

from toolkit import engines
from toolkit import endpoints
from toolkit.bench.plan import RunPlan, plan_target
from toolkit.errors import ToolkitError
from toolkit.extras import require_extra, require_module
from toolkit.specs import LoadedSpec


def external_endpoints(plan: RunPlan, keys: bool = True) -> list[endpoints.Endpoint]:
    """The endpoints of an external target, keys read from the environment (not registered; `keys=False`:
    not read, for `toolkit validate`, which may run where the run's secrets are not set)."""
    t = plan.m.target
    if t.kind != "external":
        return []
    ca = plan.paths.ca_bundle
    urls = sorted({*([t.url] if t.url else []), *t.urls.values()})
    out = []
    for url in urls:
        ep = endpoints.Endpoint(url, ca_bundle=ca if url.startswith("https://") else None, api_key_env=t.api_key_env)
        try:
            ep = ep.with_key_from_env() if keys else ep
        except ToolkitError as exc:
            raise plan.spec.error(("target", "api_key_env"), exc.message, exc.hint) from None
        if ep.tls:
            ep.ssl_context()  # a CA bundle that does not load fails here, before the run
        out.append(ep)
    return out


def prepare_target(plan: RunPlan | LoadedSpec) -> list[endpoints.Endpoint]:
    """Check what the run needs and register its external endpoints; returns them. `plan`: the run's plan
    (its spec mistakes were found when it was made), or a Matrix spec, planned here as far as its target
    (bench tune, before it plans its runs)."""
    if isinstance(plan, LoadedSpec):
        plan = plan_target(plan)
    t, env_spec = plan.m.target, plan.env_spec
    env = env_spec.model
    eng = engines.get(env.engine)
    if t.kind == "external":
        return [endpoints.register(ep) for ep in external_endpoints(plan)]
    if eng.embedded:
        if env.model is None:
            raise env_spec.error(("engine",), "the embedded engine runs here (target local) and this environment "
                                 "names no model for it", hint="add `model: {dummy: {}}` (random weights) or "
                                 "`model: {path: DIR}`; a server of your own is a target of kind external")
        require_extra("local", "the embedded CPU engine (engine: transformers)")
    if t.kind == "slurm":
        from toolkit.slurm.tools import require_client

        require_client()  # sbatch and friends answer here, or a one-line error now
        return []
    if eng.supports_launcher("docker") and not (t.kind == "local" and t.launcher == "process"):
        require_module("docker", "docker", "SGLang in containers (talking to the Docker engine)")
        if t.kind == "local":
            from toolkit.docker_api import client

            client(timeout=30)  # the local engine answers, or a one-line error now
    return []
