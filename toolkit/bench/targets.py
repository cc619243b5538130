"""Before a matrix runs: what its target needs, checked up front, and how its external servers are reached.

    prepare_target(load_spec("envs/matrices/gateway.yaml"))   # before run_matrix(...)

- the embedded engine (engine: transformers, target local) needs the `local` extra (torch, transformers,
  tokenizers); SGLang in containers needs the docker SDK and an engine that answers. Missing: a one-line
  error (exit 2) that names what to install, before any archive is made.
- an external target's URLs are registered with toolkit.endpoints: https:// verified against the system
  trust store or the spec's `ca_bundle`, and the key from the variable `api_key_env` names, sent as a Bearer
  header by the load generator and the health polls. An unset variable is an error naming it.
"""

from __future__ import annotations

from toolkit import endpoints
from toolkit.errors import ToolkitError
from toolkit.extras import require_extra, require_module
from toolkit.spec import LoadedSpec, load_spec
from toolkit.spec.matrix import Matrix


def external_endpoints(spec: LoadedSpec) -> list[endpoints.Endpoint]:
    """The endpoints of an external target, keys read from the environment (not registered)."""
    m: Matrix = spec.model
    t = m.target
    if t.kind != "external":
        return []
    ca = spec.path_of(("target", "ca_bundle"), t.ca_bundle) if t.ca_bundle else None
    urls = sorted({*([t.url] if t.url else []), *t.urls.values()})
    out = []
    for url in urls:
        ep = endpoints.Endpoint(url, ca_bundle=ca if url.startswith("https://") else None, api_key_env=t.api_key_env)
        try:
            ep = ep.with_key_from_env()
        except ToolkitError as exc:
            raise spec.error(("target", "api_key_env"), exc.message, exc.hint) from None
        if ep.tls:
            ep.ssl_context()  # a CA bundle that does not load fails here, before the run
        out.append(ep)
    return out


def prepare_target(spec: LoadedSpec) -> list[endpoints.Endpoint]:
    """Check what the run needs and register its external endpoints; returns them. Mistakes in the spec
    (the run plan's own checks) are reported before anything about this machine."""
    from toolkit.bench.plan import plan_slots

    m: Matrix = spec.model
    t = m.target
    env_spec = load_spec(spec.path_of(("environment",), m.environment), expect="Environment")
    env = env_spec.model
    plan_slots(spec, env.engine)
    if t.kind == "external":
        return [endpoints.register(ep) for ep in external_endpoints(spec)]
    if env.engine == "transformers":
        if env.model is None:
            raise env_spec.error(("engine",), "the embedded engine runs here (target local) and this environment "
                                 "names no model for it", hint="add `model: {dummy: {}}` (random weights) or "
                                 "`model: {path: DIR}`; a server of your own is a target of kind external")
        require_extra("local", "the embedded CPU engine (engine: transformers)")
    elif env.engine == "sglang" and not (t.kind == "local" and t.launcher == "process"):
        require_module("docker", "docker", "SGLang in containers (talking to the Docker engine)")
        if t.kind == "local":
            from toolkit.docker_api import client

            client(timeout=30)  # the local engine answers, or a one-line error now
    return []
