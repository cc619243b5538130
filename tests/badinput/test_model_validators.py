"""Issue 43, a model's own checks: every error a spec model's validator raises (a SpecValueError: the key it is
about and a hint) is reported at the line of that key, with a hint, and `toolkit validate` exits 2 with no
traceback. One case per check (toolkit/specs/environment.py, hosts.py, matrix.py); the line each case means is
marked `# here`."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.helpers import TINY_ENV
from toolkit.errors import SpecError
from toolkit.specs import load_spec

ENV_HEAD = "kind: Environment\nname: e\n"
SGL = "engine: sglang\nbase_image: nvidia/cuda:13.0.1-devel-ubuntu24.04\nsglang: {version: 0.5.23}\n"
TRANS = "engine: transformers\nmodel: {path: m}\n"
MX_HEAD = "kind: Matrix\nname: t\nenvironment: env.yaml\narms: [baseline, ngram]\n"
MX = MX_HEAD + "workloads: [chat]\nrequests: 2\n"
TRACE = "workloads:\n  - {trace: tr.jsonl}  # here\n"

# name: (file text, words of the message, words of the hint)
CASES: dict[str, tuple[str, str, str]] = {
    # Environment: DummyModel
    "dummy heads do not divide hidden_size": (
        ENV_HEAD + "engine: transformers\nmodel:\n  dummy:\n    hidden_size: 30\n    heads: 4  # here\n",
        "heads (4) must divide hidden_size (30)", "choose heads among 1, 2, 3, 5"),
    "dummy head dimension odd": (
        ENV_HEAD + "engine: transformers\nmodel:\n  dummy:\n    hidden_size: 36\n    heads: 4  # here\n",
        "must be even", "choose heads among 1, 2, 3, 6, 9, 18"),
    # Environment: Model
    "model with path and dummy": (
        ENV_HEAD + "engine: transformers\nmodel:\n  path: m\n  dummy: {hidden_size: 32}  # here\n",
        "give exactly one of `path` or `dummy`", "remove one"),
    "model with neither": (ENV_HEAD + "engine: transformers\nmodel: {}  # here\n",
                           "give exactly one of `path` or `dummy`", "`dummy:` makes a small"),
    # Environment: DummyConfig
    "dummy_models heads": (
        ENV_HEAD + SGL + "dummy_models:\n  /models/t:\n    hidden_size: 30\n    heads: 4  # here\n",
        "heads (4) must divide hidden_size (30)", "choose heads among"),
    "dummy_models kv_heads": (
        ENV_HEAD + SGL + "dummy_models:\n  /models/t:\n    heads: 32\n    kv_heads: 5  # here\n",
        "kv_heads (5) must divide heads (32)", "1, 2, 4, 8, 16, 32"),
    # Environment: the whole
    "sglang without base_image": (ENV_HEAD + "engine: sglang  # here\nsglang: {version: 0.5.23}\n",
                                  "needs `base_image`", "add `base_image:`"),
    "sglang engine by default without base_image": ("kind: Environment  # here\nname: e\nsglang: {version: 0.5.23}\n",
                                                    "needs `base_image`", "engine: transformers"),
    "sglang without sglang section": (
        ENV_HEAD + "engine: sglang  # here\nbase_image: nvidia/cuda:13.0.1-devel-ubuntu24.04\n",
        "needs an `sglang:` section", "add `sglang: {version"),
    "request_params names no preset": (
        ENV_HEAD + TRANS + "servers:\n  baseline: {}\n  ngram: {}\nrequest_params:\n  ngarm:  # here\n"
        "    generation_config: {prompt_lookup_num_tokens: 4}\n",
        "request_params names preset 'ngarm'", "did you mean 'ngram'?"),
    "request_params no servers at all": (
        ENV_HEAD + TRANS + "request_params:\n  fast:  # here\n    generation_config: {do_sample: false}\n",
        "request_params names preset 'fast'", "add `fast:` under `servers:`"),
    "dummy_models relative path": (ENV_HEAD + SGL + "dummy_models:\n  models/t: {}  # here\n",
                                   "is not an absolute path", "/models/t"),
    "dummy_models draft_of without eagle3": (
        ENV_HEAD + SGL + "dummy_models:\n  /models/t: {}\n  /models/d:\n    eagle3_draft_of: /models/t  # here\n",
        "`eagle3_draft_of` goes with architecture llama-eagle3", "architecture: llama-eagle3"),
    "dummy_models eagle3 without draft_of": (
        ENV_HEAD + SGL + "dummy_models:\n  /models/d:\n    architecture: llama-eagle3  # here\n",
        "`eagle3_draft_of` goes with architecture llama-eagle3", "eagle3_draft_of: TARGET"),
    "dummy_models draft_of a missing folder": (
        ENV_HEAD + SGL + "dummy_models:\n  /models/target: {}\n  /models/d:\n    architecture: llama-eagle3\n"
        "    eagle3_draft_of: /models/targt  # here\n",
        "is not a llama folder of dummy_models", "did you mean '/models/target'?"),
    "dummy_models draft_of with no llama": (
        ENV_HEAD + SGL + "dummy_models:\n  /models/d:\n    architecture: llama-eagle3\n"
        "    eagle3_draft_of: /models/t  # here\n",
        "is not a llama folder of dummy_models", "add its target under dummy_models"),
    "dummy_models vocab differs": (
        ENV_HEAD + SGL + "dummy_models:\n  /models/t: {vocab_size: 32000}\n  /models/d:\n"
        "    architecture: llama-eagle3\n    eagle3_draft_of: /models/t\n    vocab_size: 4096  # here\n",
        "vocab_size 4096 differs from its target's 32000", "set `vocab_size: 32000`"),
    # Hosts
    "hosts defaults key": ("kind: Hosts\nname: h\ndefaults:\n  usr: root  # here\nhosts:\n  a: {address: 10.0.0.1}\n",
                           "`defaults` may set", "did you mean 'user'?"),
    "hosts defaults key far off": (
        "kind: Hosts\nname: h\ndefaults:\n  address: 10.0.0.9  # here\nhosts:\n  a: {address: 10.0.0.1}\n",
        "`defaults` may set", "set 'address' on each host"),
    # Matrix: Target
    "hosts target without hosts": (MX + "concurrency: [1]\ntarget:\n  kind: hosts  # here\n",
                                   "needs `hosts:`", "add `hosts: hosts.yaml`"),
    "external target without url": (MX + "concurrency: [1]\ntarget:\n  kind: external  # here\n",
                                    "needs `url:` or `urls:`", "urls: {ARM: URL}"),
    "ca_bundle on a local target": (MX + "concurrency: [1]\ntarget:\n  ca_bundle: ca.pem  # here\n",
                                    "apply to a target of kind external", "set `kind: external`"),
    "api_key_env on a local target": (MX + "concurrency: [1]\ntarget:\n  api_key_env: KEY  # here\n",
                                      "apply to a target of kind external", "set `kind: external`"),
    "url without scheme": (MX + "concurrency: [1]\ntarget:\n  kind: external\n  url: gateway:8443  # here\n",
                           "is not an http:// or https:// base URL", "http://127.0.0.1:30000"),
    "one of urls without scheme": (
        MX + "concurrency: [1]\ntarget:\n  kind: external\n  urls:\n    baseline: http://a:1\n"
        "    ngram: ftp://b:2  # here\n", "'ftp://b:2' is not an http:// or https://", "with its scheme"),
    "ca_bundle with http only": (
        MX + "concurrency: [1]\ntarget:\n  kind: external\n  url: http://a:1\n  ca_bundle: ca.pem  # here\n",
        "verifies https:// URLs", "remove `ca_bundle:`"),
    "slurm with docker": (MX + "concurrency: [1]\ntarget:\n  kind: slurm\n  launcher: docker  # here\n",
                          "not docker", "`launcher: process` or `launcher: container`"),
    "container launcher on local": (MX + "concurrency: [1]\ntarget:\n  launcher: container  # here\n",
                                    "`launcher: container` applies to a target of kind slurm", "`kind: slurm`"),
    "gpus on hosts target": (MX + "concurrency: [1]\ntarget:\n  kind: hosts\n  hosts: h.yaml\n  gpus: ['0']  # here\n",
                             "`gpus:` and `launcher: process` apply", "remove them"),
    "process launcher on external": (
        MX + "concurrency: [1]\ntarget:\n  kind: external\n  url: http://a:1\n  launcher: process  # here\n",
        "`gpus:` and `launcher: process` apply", "remove them"),
    "slurm block on local": (MX + "concurrency: [1]\ntarget:\n  slurm: {jobs: 2}  # here\n",
                             "`slurm:` applies to a target of kind slurm", "set `kind: slurm`"),
    "gpus on slurm": (MX + "concurrency: [1]\ntarget:\n  kind: slurm\n  gpus: ['0']  # here\n",
                      "a Slurm job's GPUs are", "gpus_per_arm"),
    "parallel on slurm": (MX + "concurrency: [1]\ntarget:\n  kind: slurm\n  parallel: 2  # here\n",
                          "`parallel:` applies to kind local", "slurm: {jobs: N}"),
    "gpu set twice": (MX + "concurrency: [1]\ntarget:\n  gpus:\n    - '0,1'\n    - '0,1'  # here\n",
                      "each GPU set may appear once", "remove the second '0,1'"),
    "gpu sets overlap": (MX + "concurrency: [1]\ntarget:\n  gpus:\n    - '0,1'\n    - '1,2'  # here\n",
                         "appear in two sets of `gpus:`", "its own GPUs"),
    # Matrix: Workload
    "speed without trace": (MX_HEAD + "requests: 2\nconcurrency: [1]\nworkloads:\n  - {name: mine, path: w.jsonl,\n"
                            "     speed: 2}  # here\n", "`speed:` scales a trace's times", "add `trace: FILE`"),
    "max_hours without trace": (MX_HEAD + "requests: 2\nconcurrency: [1]\nworkloads:\n  - name: mine\n    path: w.jsonl\n"
                                "    max_hours: 2  # here\n", "`max_hours:` bounds a trace's replay",
                                "remove `max_hours:`"),
    "trace with path": (MX_HEAD + "workloads:\n  - trace: tr.jsonl\n    path: w.jsonl  # here\n",
                        "a `trace:` workload sends the trace's own requests", "a workload of its own"),
    "trace with no speed": (MX_HEAD + "workloads:\n  - trace: tr.jsonl\n    speed: []  # here\n",
                            "`speed:` names no speed", "[1, 2, 4]"),
    "trace speed twice": (MX_HEAD + "workloads:\n  - trace: tr.jsonl\n    speed:\n      - 1\n      - 1  # here\n",
                          "lists a speed twice", "remove the second 1"),
    # Matrix: Arrival, Bounds, Slo
    "burstiness without gamma": (MX + "rates: [1]\narrival:\n  process: constant\n  burstiness: 2  # here\n",
                                 "`burstiness` shapes `process: gamma`", "set `process: gamma`"),
    "empty bounds": (MX + "concurrency: [1]\nslo:\n  ttft_ms: {}  # here\n", "give a percentile", "{p90: 50}"),
    "no objective": (MX + "concurrency: [1]\nslo:  # here\n  attainment: 0.9\n", "name at least one objective",
                     "tpot_ms: {p90: 50}"),
    # Matrix: the load axis and sizes
    "sweep and concurrency": (MX + "concurrency: [1]  # here\nsweep: {points: 3}\n", "give exactly one of",
                              "remove `sweep:` or the `concurrency:` list"),
    "sweep and a trace": (MX_HEAD + "workloads:\n  - chat\n  - {trace: tr.jsonl}  # here\nrequests: 2\n"
                          "sweep: {points: 3}\n", "not at rates probes choose", "a matrix of its own"),
    "sweep with per-level durations": (MX_HEAD + "workloads: [chat]\nsweep: {points: 3}\nduration_s: {1: 5}  # here\n",
                                       "names concurrency levels", "duration_s: 30"),
    "sweep with batch warmup": (MX + "sweep: {points: 3}\nwarmup: concurrency  # here\n",
                                "`warmup: concurrency` sends one full batch", "warmup: 4"),
    "trace with concurrency": (MX_HEAD + "workloads:\n  - chat\n  - {trace: tr.jsonl}\nrequests: 2\n"
                               "concurrency: [1]  # here\n", "a `trace:` workload is sent open loop",
                               "replace `concurrency:` with `rates:"),
    "requests and duration": (MX + "concurrency: [1]\nduration_s: 10  # here\n",
                              "give exactly one of `requests` (per cell) or `duration_s`", "remove `duration_s:`"),
    "neither requests nor duration": (MX_HEAD + "workloads: [chat]  # here\nconcurrency: [1]\n",
                                      "give exactly one of `requests`", "add `requests: N`"),
    "concurrency and rates": (MX + "concurrency: [1]  # here\nrates: [1]\n", "give exactly one of `concurrency`",
                              "remove `rates:` or `concurrency:`"),
    "arrival without rates": (MX + "concurrency: [1]\narrival: {process: gamma}  # here\n",
                              "`arrival:` shapes the open-loop cells", "remove `arrival:`"),
    "max_concurrency closed loop": (MX + "concurrency: [1]\nmax_concurrency: 4  # here\n",
                                    "`max_concurrency:` caps open-loop cells", "already its requests in flight"),
    "per-level durations with rates": (MX_HEAD + "workloads: [chat]\nrates: [1]\nduration_s: {1: 5}  # here\n",
                                       "names concurrency levels: with `rates:`", "duration_s: 30"),
    "batch warmup with rates": (MX + "rates: [1]\nwarmup: concurrency  # here\n",
                                "`warmup: concurrency` sends one full batch", "warmup: 4"),
    "baseline misspelt": (MX + "concurrency: [1]\nbaseline: ngarm  # here\n", "baseline 'ngarm' is not one of the arms",
                          "did you mean 'ngram'?"),
    "baseline far off": (MX + "concurrency: [1]\nbaseline: other  # here\n", "baseline 'other' is not one of the arms",
                         "name one of the arms: baseline, ngram"),
    "synthetic acceptance on external": (
        MX + "concurrency: [1]\nsynthetic_acceptance: [2.0]  # here\ntarget: {kind: external, url: 'http://a:1'}\n",
        "`synthetic_acceptance:` sets the environment", "kind local or hosts"),
    "match-training without training data": (MX_HEAD + "requests: 2\nconcurrency: [1]\nworkloads:\n  - chat\n"
                                             "  - match-training  # here\n", "draws the domain mix",
                                             "add `training_data: FILE`"),
    "launches_auto with one launch": (MX + "concurrency: [1]\nlaunches_auto: {halfwidth_pct: 5, max: 4}  # here\n",
                                      "needs `launches: 2` or more", "set `launches: 2`"),
    "launches_auto max too low": (MX + "concurrency: [1]\nlaunches: 4\nlaunches_auto:\n  halfwidth_pct: 5\n"
                                  "  max: 3  # here\n", "must exceed `launches`", "set `max:` to 5 or more"),
    "launches_auto with one arm": ("kind: Matrix\nname: t\nenvironment: env.yaml\narms: [baseline]\n"
                                   "workloads: [chat]\nrequests: 2\nconcurrency: [1]\nlaunches: 2\n"
                                   "launches_auto: {halfwidth_pct: 5, max: 4}  # here\n",
                                   "give two arms or more", "add an arm to `arms:`"),
    "only traces with requests": (MX_HEAD + TRACE.replace("  # here", "") + "requests: 2  # here\n",
                                  "would size nothing", "drop it"),
    "only traces with an axis and a size": (MX_HEAD + TRACE.replace("  # here", "") + "rates: [1]  # here\n"
                                            "duration_s: 5\n", "`rates`, `duration_s` would size nothing", "drop them"),
}


def _write(tmp: Path, name: str) -> tuple[Path, int]:
    text, _, _ = CASES[name]
    (tmp / "env.yaml").write_text(TINY_ENV)
    (tmp / "tr.jsonl").write_text('{"timestamp": 0, "input_length": 4, "output_length": 4}\n')
    (tmp / "w.jsonl").write_text('{"prompt": "hi"}\n')
    f = tmp / f"{abs(hash(name)) % 10**8}.yaml"
    f.write_text(textwrap.dedent(text))
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if "# here" in ln)
    return f, line


@pytest.mark.parametrize("name", list(CASES))
def test_a_models_own_check_is_at_its_keys_line_with_a_hint(tmp_path: Path, name: str) -> None:
    f, line = _write(tmp_path, name)
    _, says, hint = CASES[name]
    with pytest.raises(SpecError) as info:
        load_spec(f)
    e = info.value
    assert says in e.message, (name, str(e))
    assert (str(e.file), e.line) == (str(f), line), (name, line, str(e))
    assert e.hint and hint in e.hint, (name, str(e))


def test_validate_exits_2_for_each_with_its_line_and_hint_and_no_traceback(tmp_path: Path) -> None:
    """Every case through the real CLI, in one `toolkit validate` call (it checks every file given)."""
    files = {}
    for name in CASES:
        d = tmp_path / str(len(files))
        d.mkdir()
        files[name] = _write(d, name)
    res = run_cli("validate", "--json", *(str(f) for f, _ in files.values()))
    assert res.returncode == 2 and "Traceback" not in res.stdout + res.stderr
    out = {r["path"]: r for r in json.loads(res.stdout)}
    for name, (f, line) in files.items():
        r = out[str(f)]
        assert not r["ok"] and r["line"] == line and r["hint"] and CASES[name][2] in r["hint"], (name, r)


def test_every_model_validator_of_a_spec_raises_a_spec_value_error() -> None:
    """A new model check must say where and how to fix: a plain ValueError in a spec model's validator would
    reach the user with no hint and at the whole mapping's line."""
    import ast

    import toolkit.specs as specs

    plain = []
    for f in sorted(Path(specs.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.FunctionDef) and any(
                    "model_validator" in ast.unparse(d) for d in node.decorator_list):
                plain += [f"{f.name}:{r.lineno}" for r in ast.walk(node) if isinstance(r, ast.Raise) and r.exc
                          is not None and ast.unparse(r.exc).startswith("ValueError(")]
    assert not plain, f"raise SpecValueError(message, key=..., hint=...) instead: {plain}"
