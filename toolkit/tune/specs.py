"""The files a tune session writes before it runs anything: the prompt split and the specs of its runs.

    <session>/prompts/<workload>.all.jsonl     the matrix's workload as it loads (sample, holdout applied)
    <session>/prompts/<workload>.tune.jsonl    a seeded sample of it: the only prompts the search sees
    <session>/specs/environment.yaml           the environment with one preset per trial (t00, t01, ...)
    <session>/specs/<matrix>-tune-r<k>.yaml    rung k: arms = baseline + the trials still in the race
    <session>/specs/<matrix>-tune-confirm.yaml the confirmation on held-out prompts: the workload's
                                               `holdout:` drops every prompt of the tune sample

Every run is an ordinary Matrix run of these files, so `toolkit results` reads its archive, and the spec
hash of a run names exactly what it measured.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml

from toolkit.fsutil import write_atomic
from toolkit.schema.tune import SplitFiles, WorkloadSplit
from toolkit.specs import LoadedSpec
from toolkit.specs.matrix import Target as TargetSpec


# data-keyed: workload
def split_prompts(mspec: LoadedSpec, folder: Path, share_held: float) -> dict[str, WorkloadSplit]:
    """Write each workload's prompts and its tune sample; returns workload -> its split (tune.json's `split`)."""
    from toolkit.bench.plan import load_workloads
    from toolkit.workloads.loader import sample

    m = mspec.model
    out = {}
    for i, w in enumerate(load_workloads(mspec).values()):  # in the matrix's order: i is its workloads index
        n = len(w.prompts)
        n_tune = n - max(1, round(n * share_held))
        if n_tune < 1:
            raise mspec.error(("workloads", i), f"workload {w.name!r} has {n} prompt(s): too few to keep some out "
                              "of the search for the confirmation", hint="give the workload more prompts")
        tune = sample(w.prompts, n_tune, m.seed, f"{w.name} (tune sample)")
        files = SplitFiles(all=f"prompts/{w.name}.all.jsonl", tune=f"prompts/{w.name}.tune.jsonl")
        write_atomic(folder / files.all, _jsonl(w.prompts))
        write_atomic(folder / files.tune, _jsonl(tune))
        out[w.name] = WorkloadSplit(all=n, tune=n_tune, held_out=n - n_tune, files=files, source=w.source)
    return out


def _jsonl(prompts) -> str:
    return "".join(json.dumps(p.model_dump(exclude_none=True), sort_keys=True, ensure_ascii=False) + "\n"
                   for p in prompts)


def _abs_paths(env: dict, env_spec: LoadedSpec) -> dict:  # json-edge: an Environment document (YAML)
    """The environment's relative paths made absolute: its copy lives in another folder. (path_of is relative
    to the working directory when the spec was named by a relative path: resolved here, or a spec loaded as
    `benchmarks/x/../../envs/e.yaml` would name its patch relative to a folder the copy is not in.)"""
    env = copy.deepcopy(env)
    m = env_spec.model

    def absolute(at: tuple, path: str) -> str:
        if path.startswith("toolkit:"):  # a folder the toolkit ships: the same wherever the spec is written
            return path
        return str(Path(env_spec.path_of(at, path)).resolve())

    if m.sglang:
        for i, p in enumerate(m.sglang.patches):
            env["sglang"]["patches"][i]["path"] = absolute(("sglang", "patches", i, "path"), p.path)
    if m.ca_bundle:
        env["ca_bundle"]["path"] = absolute(("ca_bundle", "path"), m.ca_bundle.path)
    if m.model and m.model.path:
        env["model"]["path"] = absolute(("model", "path"), m.model.path)
    return env


# json-edge: an Environment document (YAML)
def trial_environment(env_spec: LoadedSpec, arm: str, baseline: str, level: str,
                      trials: dict[str, dict[str, Any]], again: str | None = None) -> dict:
    """The environment whose presets are the baseline (and, as `again`, its twin measured after the trials),
    the arm as it is, and one preset per trial."""
    env = env_spec.model
    data = _abs_paths(env.model_dump(mode="json"), env_spec)
    servers = {baseline: env.servers[baseline], arm: env.servers[arm]}
    rp = {a: env.request_params[a] for a in (baseline, arm) if a in env.request_params}
    if again:
        servers[again] = env.servers[baseline]
        if baseline in env.request_params:
            rp[again] = copy.deepcopy(env.request_params[baseline])
    for name, params in trials.items():
        if level == "request":
            servers[name] = dict(env.servers[arm])
            own = copy.deepcopy(env.request_params.get(arm) or {})
            own["generation_config"] = {**(own.get("generation_config") or {}), **params}
            rp[name] = own
        else:
            servers[name] = {**env.servers[arm], **params}
            if arm in env.request_params:
                rp[name] = copy.deepcopy(env.request_params[arm])
    data.update(servers=servers, request_params=rp,
                description=f"{env.description} [tune trials of preset {arm}]".strip())
    return data


# json-edge: a Matrix document (YAML)
def run_matrix(mspec: LoadedSpec, *, name: str, arms: list[str], baseline: str, workloads: list[dict],
               requests: int, seed: int, repeats: int, target: TargetSpec, description: str,
               launches: int = 1) -> dict:
    """A Matrix like the user's (api, concurrency, output length, warmup, temperature), for one tune run;
    `launches` > 1 (the confirmation's `confirm_launches`): launch rounds, as a Matrix's `launches:`."""
    m = mspec.model
    data = {"kind": "Matrix", "name": name, "description": description, "environment": "environment.yaml",
            "arms": arms, "baseline": baseline, "target": target.model_dump(mode="json", exclude_defaults=True),
            "workloads": workloads, "api": m.api,
            "concurrency": list(m.concurrency), "output_len": m.output_len, "requests": requests,
            "warmup": m.warmup, "repeats": repeats, "seed": seed, "temperature": m.temperature}
    if launches > 1:  # written only then: a one-launch run's spec (and hash) is what it was
        data["launches"] = launches
    if m.training_data:
        data["training_data"] = str(mspec.path_of(("training_data",), m.training_data))
    return data


def user_target(mspec: LoadedSpec) -> TargetSpec:
    """The matrix's own target with its relative paths made absolute."""
    t = mspec.model.target
    paths = {f: str(mspec.path_of(("target", f), getattr(t, f))) for f in ("hosts", "ca_bundle") if getattr(t, f)}
    return t.model_copy(update=paths)


def write_yaml(path: Path, data: dict, header: str) -> Path:
    body = yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True, width=4096)
    return write_atomic(path, "".join(f"# {line}\n" for line in header.splitlines()) + body)
