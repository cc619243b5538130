"""Engines as arms (issue 45): a Matrix whose arms come from more than one Environment, `{name, environment,
preset}` beside the presets of its own `environment:`. The plan asks each arm for its Environment, preset and
engine; one run interleaves them on the same prompts; the manifest names a foreign arm's Environment, inputs/
archives every Environment file, and `results reproduce` replays the run from the archive alone. Bad entries
are refused at their line (exit 2). End to end on the embedded CPU engine (two copies of envs/local-cpu.yaml),
and with the fake SGLang and fake vLLM of tests/data as four arms of one matrix."""

from __future__ import annotations

import json
import re
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli
from tests.helpers import FAKE_SGLANG
from toolkit.results import compact

MATRIX = """\
kind: Matrix
name: two-envs
environment: local-cpu.yaml
arms:
  - baseline
  - ngram
  - {name: other-ngram, environment: other/local-cpu-b.yaml, preset: ngram}
workloads: [coding]
concurrency: [1]
output_len: 8
requests: 10
warmup: 1
"""


def write_specs(tmp: Path, matrix: str = MATRIX) -> Path:
    """envs/local-cpu.yaml and a renamed copy of it in a folder of its own (other/local-cpu-b.yaml), and the
    matrix beside the first."""
    shutil.copy(ROOT / "envs" / "local-cpu.yaml", tmp / "local-cpu.yaml")
    (tmp / "other").mkdir(exist_ok=True)
    text = (ROOT / "envs" / "local-cpu.yaml").read_text()
    (tmp / "other" / "local-cpu-b.yaml").write_text(text.replace("name: local-cpu\n", "name: local-cpu-b\n"))
    (tmp / "m.yaml").write_text(matrix)
    return tmp / "m.yaml"


def test_the_plan_asks_each_arm_for_its_environment(tmp_path: Path) -> None:
    from toolkit.bench.inputs import collect
    from toolkit.bench.plan import plan_run, run_manifest
    from toolkit.specs import load_spec, spec_hash

    plan = plan_run(load_spec(write_specs(tmp_path)))
    assert plan.m.arm_names == ["baseline", "ngram", "other-ngram"] and set(plan.todo) == set(plan.m.arm_names)
    assert [plan.env_of(a).name for a in plan.m.arm_names] == ["local-cpu", "local-cpu", "local-cpu-b"]
    assert plan.preset_name("other-ngram") == "ngram" and plan.engine_of("other-ngram") == "transformers"
    assert plan.request_params("other-ngram")["generation_config"]["prompt_lookup_num_tokens"] == 8
    assert plan.env_spec.model.name == "local-cpu" and len(plan.env_specs()) == 2
    m = run_manifest(plan, {})
    assert m.arms["baseline"].environment is None and m.arms["ngram"].environment is None
    rec = m.arms["other-ngram"].environment
    assert (rec.name, rec.engine, rec.preset, rec.path) == ("local-cpu-b", "transformers", "ngram",
                                                            str(tmp_path / "other" / "local-cpu-b.yaml"))
    assert rec.hash == plan.sources["other-ngram"].hash != plan.hashes["environment"]
    assert "environment" not in m.written()["arms"]["baseline"]  # an older manifest's arms read the same
    assert m.matrix.resolved["arms"][2] == {"name": "other-ngram", "environment": "other/local-cpu-b.yaml",
                                            "preset": "ngram"}
    record, data = collect(plan)
    listed = {f.ref: f.path for f in record.files}
    assert listed["environment"] == "local-cpu.yaml" and listed["arms[2].environment"] == "other/local-cpu-b.yaml"
    assert set(data) == {"m.yaml", "local-cpu.yaml", "other/local-cpu-b.yaml"}
    # the other Environment's bytes are part of the matrix's hash; a matrix of string arms hashes as before
    h = spec_hash(plan.spec)
    (tmp_path / "other" / "local-cpu-b.yaml").write_text((tmp_path / "other" / "local-cpu-b.yaml").read_text() + "\n")
    assert spec_hash(load_spec(tmp_path / "m.yaml")) != h


@pytest.mark.parametrize("run", ["pair-seed/20261206T211431Z-9daae2", "sglang-h200-noise/20261204T052002Z-fc9254"])
def test_arms_as_strings_hash_as_before(tmp_path: Path, run: str) -> None:
    """A committed run's Matrix (string arms), laid out from its inputs/, hashes to the hash its manifest
    recorded, and dumps its arms as the list of names it recorded."""
    from toolkit.bench.inputs import materialize
    from toolkit.render import template_version
    from toolkit.results.archive import open_archive
    from toolkit.specs import load_spec, spec_hash

    a = open_archive(ROOT / "results" / run)
    spec = load_spec(materialize(a, tmp_path / "files"), expect="Matrix")
    assert all(isinstance(x, str) for x in spec.model.arms)
    assert spec_hash(spec, template_version()) == a.manifest.matrix.hash
    assert spec.model.model_dump(mode="json")["arms"] == a.manifest.matrix.resolved["arms"]


BAD = [
    ("preset: ngram}", "preset: ngramm}", r"m\.yaml:7:\d+: arms\[2\]\.preset: arm\(s\) \['ngramm'\] are not server "
                                          r"presets of other/local-cpu-b\.yaml", "did you mean 'ngram'"),
    ("environment: other/local-cpu-b.yaml", "environment: other/nope.yaml",
     r"m\.yaml:7:\d+: arms\[2\]\.environment: file 'other/nope\.yaml' does not exist", "relative to the spec file"),
    ("environment: other/local-cpu-b.yaml", "environment: m.yaml",
     r"m\.yaml:7:\d+: arms\[2\]\.environment: m\.yaml is not an Environment spec", "kind: Environment"),
    ("name: other-ngram", "name: ngram", r"m\.yaml:7:\d+: arms\[2\]: arm ngram is listed twice", "rename one"),
    ("preset: ngram}", "presets: ngram}", r"m\.yaml:7:\d+: arms\[2\]\.presets: unknown key", "did you mean 'preset'"),
]


@pytest.mark.parametrize("old,new,said,hint", BAD, ids=["preset", "missing", "not-env", "duplicate", "key"])
def test_a_bad_arm_entry_exits_2_at_its_line(tmp_path: Path, old: str, new: str, said: str, hint: str) -> None:
    m = write_specs(tmp_path, MATRIX.replace(old, new))
    r = run_cli("bench", "matrix", str(m), "--results", str(tmp_path / "results"))
    assert r.returncode == 2, r.stderr
    assert re.search(said, r.stderr), r.stderr
    assert hint in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "results").exists()


def test_bench_tune_refuses_an_arm_of_another_environment(tmp_path: Path) -> None:
    m = write_specs(tmp_path, MATRIX + "tune:\n  space:\n    other-ngram: {prompt_lookup_num_tokens: [2, 4]}\n")
    r = run_cli("bench", "tune", str(m), "--arm", "other-ngram", "--results", str(tmp_path / "results"))
    assert r.returncode == 2, r.stderr
    assert re.search(r"m\.yaml:7:\d+: arms\[2\]: arm 'other-ngram' is preset 'ngram' of other/local-cpu-b\.yaml, not "
                     r"of the matrix's environment local-cpu\.yaml", r.stderr), r.stderr
    assert "Traceback" not in r.stderr


def _manifest(run: Path) -> dict:
    return json.loads((run / "manifest.json").read_text())


@pytest.mark.slow
def test_arms_of_two_environments_run_verify_and_reproduce(tmp_path: Path) -> None:
    m = write_specs(tmp_path, MATRIX.replace("concurrency: [1]", "concurrency: [1]\nlaunches: 2"))
    results = tmp_path / "results"
    r = run_cli("bench", "matrix", str(m), "--results", str(results), "--json", timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    run = Path(out["run"])
    assert out["status"] == "complete" and {c["arm"] for c in out["cells"]} == {"baseline", "ngram", "other-ngram"}
    man = _manifest(run)
    assert all(sorted(r) == ["baseline", "ngram", "other-ngram"] for r in man["rounds"]) and len(man["rounds"]) == 2
    assert man["environment"]["name"] == "local-cpu" and "environment" not in man["arms"]["ngram"]
    assert man["arms"]["other-ngram"]["environment"]["name"] == "local-cpu-b"
    listed = {f["ref"]: f["path"] for f in man["inputs"]["files"]}
    sums = (run / "SHA256SUMS").read_text()
    assert all(f"inputs/files/{p}" in sums for p in ("local-cpu.yaml", "other/local-cpu-b.yaml", "m.yaml"))
    assert listed["arms[2].environment"] == "other/local-cpu-b.yaml"
    assert run_cli("results", "verify", str(run)).returncode == 0
    summary = json.loads(compact.read_text(run / "summary.json"))
    foreign = [s for s in summary["derived"]["speedups"] if s["arm"] == "other-ngram"]
    assert foreign and all(s["baseline"] == "baseline" for s in foreign)
    shown = run_cli("results", "show", str(run))
    assert shown.returncode == 0 and "other-ngram: transformers, local-cpu-b (" in shown.stdout, shown.stdout[:2000]

    # the checkout moves on: the replay reads the archived Environments, never these
    (tmp_path / "other" / "local-cpu-b.yaml").write_text("kind: Environment\nname: gone\n")
    rep = run_cli("results", "reproduce", run.name, "--results", str(results), "--json", timeout=900)
    assert rep.returncode in (0, 1, 3), rep.stderr[-3000:]
    got = json.loads(rep.stdout)
    new = Path(got["reproduction"]["path"])
    assert got["reproduction"]["status"] == "complete" and got["notes"] == []
    m1 = _manifest(new)
    assert m1["reproduces"] == run.name and m1["matrix"]["hash"] == man["matrix"]["hash"]
    assert m1["arms"]["other-ngram"]["environment"]["hash"] == man["arms"]["other-ngram"]["environment"]["hash"]
    assert {c["label"].split()[0] for c in got["cells"]} == {"baseline", "ngram", "other-ngram"}
    diff = run_cli("results", "diff", str(run), str(new), "--json")
    assert diff.returncode in (0, 1, 3), diff.stderr[-2000:]
    assert run_cli("results", "verify", str(new)).returncode == 0


FAKE_VLLM = ROOT / "tests" / "data" / "fake_vllm"
SGL_ENV = """\
kind: Environment
name: sg-fake
engine: sglang
base_image: nvidia/cuda:13.0.1-devel-ubuntu24.04
sglang: {version: 0.5.17}
servers:
  baseline: &b
    model-path: /models/target
    served-model-name: target
    mem-fraction-static: 0.8
  ngram:
    <<: *b
    speculative-algorithm: NGRAM
"""
VLLM_ENV = """\
kind: Environment
name: vllm-fake
engine: vllm
base_image: nvidia/cuda:13.0.1-devel-ubuntu24.04
packages: [{name: vllm, version: 0.24.0}]
servers:
  baseline: &b
    model: /models/target
    served-model-name: target
    max-num-seqs: 64
  ngram:
    <<: *b
    speculative-config: '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}'
"""


@pytest.mark.slow
def test_sglang_and_vllm_arms_in_one_matrix(tmp_path: Path) -> None:
    """The fakes of SGLang and vLLM as four arms of one run: each arm's server started by its own engine's
    process launcher, its acceptance read through that engine (SGLang's wire, vLLM's /metrics)."""
    (tmp_path / "sglang.yaml").write_text(SGL_ENV)
    (tmp_path / "vllm.yaml").write_text(VLLM_ENV)
    target = json.dumps({"kind": "local", "launcher": "process", "python": sys.executable,
                         "env": {"PYTHONPATH": f"{FAKE_SGLANG}:{FAKE_VLLM}"}})
    (tmp_path / "m.yaml").write_text(textwrap.dedent(f"""\
        kind: Matrix
        name: engines
        environment: sglang.yaml
        arms:
          - baseline
          - ngram
          - {{name: vllm-baseline, environment: vllm.yaml, preset: baseline}}
          - {{name: vllm-ngram, environment: vllm.yaml, preset: ngram}}
        target: {target}
        workloads: [coding]
        api: chat
        concurrency: [1]
        output_len: 12
        requests: 6
        warmup: 1
        """))
    r = run_cli("bench", "matrix", str(tmp_path / "m.yaml"), "--results", str(tmp_path / "results"), "--json",
                env={"TOOLKIT_CACHE_DIR": str(tmp_path / "cache")}, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert out["status"] == "complete" and len(out["cells"]) == 4
    run = Path(out["run"])
    man = _manifest(run)
    assert "sglang" in man["arms"]["ngram"]["command"] and "--speculative-algorithm NGRAM" in man["arms"]["ngram"]["command"]
    assert man["arms"]["vllm-ngram"]["command"].startswith(f"{sys.executable} -m vllm.entrypoints.cli.main serve")
    assert man["arms"]["vllm-ngram"]["environment"]["engine"] == "vllm" and "environment" not in man["arms"]["ngram"]
    summary = json.loads(compact.read_text(run / "summary.json"))
    info = summary["derived"]["arm_info"]
    assert info["vllm-ngram"]["engine"] == "vllm" and info["ngram"]["engine"] == "sglang"
    acc = {c["arm"]: (c["metrics"].get("accept_length") or {}).get("mean") for c in summary["cells"]}
    assert acc["vllm-ngram"] and acc["vllm-ngram"] > 1 and acc["vllm-baseline"] is None, acc
    speedups = {s["arm"] for s in summary["derived"]["speedups"]}
    assert speedups == {"ngram", "vllm-baseline", "vllm-ngram"}
    assert run_cli("results", "verify", str(run)).returncode == 0
    # any two arms (speculation over its own engine's baseline: a crossover), and how vLLM's Environment differs
    shown = run_cli("results", "show", str(run), "--pair", "vllm-ngram/vllm-baseline", "--pair", "vllm-ngram/ngram",
                    "--json")
    assert shown.returncode == 0, shown.stderr[-2000:]
    data = json.loads(shown.stdout)
    own, across = data["pairs"]
    assert {s["baseline"] for s in own["speedups"]} == {"vllm-baseline"} and len(own["speedups"]) == 1
    assert [c["arm"] for c in own["crossovers"]] == ["vllm-ngram"] and across["crossovers"] == []
    assert across["environments"] == "vllm-ngram: vllm-fake; ngram: sg-fake" and own["environments"] is None
    envs = {r["field"]: r for r in data["arm_environments"]}
    assert (envs["engine"]["own"], envs["engine"]["theirs"]) == ("sglang", "vllm")
    assert envs["engine"]["arms"] == ["vllm-baseline", "vllm-ngram"] and envs["packages[vllm].version"]["theirs"] == "0.24.0"
    text = run_cli("results", "show", str(run)).stdout
    assert "vllm-ngram: per cell, from the server: vLLM /metrics counters 1 + vllm:spec_decode_num_accepted" in text


ENGINES_MATRIX = ROOT / "benchmarks" / "vllm_gpu" / "matrix-engines.yaml"


def test_the_gpu_engines_matrix_plans_four_arms_of_two_engines(tmp_path: Path) -> None:
    """benchmarks/vllm_gpu/matrix-engines.yaml through the plan (no server): both Environments found, four arms,
    SGLang's and vLLM's, each engine's servers on its own site (target.engines), and the same cells as the two
    one-engine matrices beside it, so their runs diff against this one."""
    from toolkit.bench.plan import plan_target
    from toolkit.specs import load_spec
    from toolkit.targets.base import engine_kwargs

    plan = plan_target(load_spec(ENGINES_MATRIX))
    arms = plan.m.arm_names
    assert arms == ["sglang-baseline", "sglang-ngram", "vllm-baseline", "vllm-ngram"]
    assert [plan.engine_of(a) for a in arms] == ["sglang", "sglang", "vllm", "vllm"]
    assert [plan.env_of(a).name for a in arms] == ["sglang-0.5.17-quickstart"] * 2 + ["vllm-0.24.0-quickstart"] * 2
    assert [plan.preset_name(a) for a in arms] == ["baseline", "ngram"] * 2 and plan.m.baseline_arm == "sglang-baseline"
    assert len(plan.env_specs()) == 2 and plan.arm_engines == ["sglang", "vllm"]
    vl, sg = (engine_kwargs(plan, a, tmp_path / "log") for a in ("vllm-ngram", "sglang-ngram"))
    assert vl.kind == sg.kind == "process" and vl.env["PYTHONPATH"] == "/tmp/vsite" and "PYTHONPATH" not in sg.env
    m = plan.m.model_dump(mode="json")
    for twin in ("matrix-sglang.yaml", "matrix-vllm.yaml"):
        t = load_spec(ENGINES_MATRIX.parent / twin).model.model_dump(mode="json")
        same = ("workloads", "api", "concurrency", "output_len", "duration_s", "warmup", "launches", "seed")
        assert {k: m[k] for k in same} == {k: t[k] for k in same}, twin
    assert m["launches"] == 3 and m["concurrency"] == [1, 16, 64] and m["workloads"] == ["coding", "encyclopedic"]


ENGINES_TARGET = """\
target:
  kind: local
  launcher: process
  env: {A: target}
  engines:
    vllm: {python: /opt/vllm/bin/python, env: {A: vllm, PYTHONPATH: /opt/vllm-site}}
"""


def test_target_engines_give_each_engine_its_python_and_env(tmp_path: Path) -> None:
    """`target.engines`: an engine's own Python and environment over the target's, for its arms only; a matrix
    without it hashes as before (Hash.omit_default)."""
    from toolkit.bench.plan import plan_target
    from toolkit.specs import load_spec, spec_hash
    from toolkit.targets.base import engine_kwargs

    (tmp_path / "sglang.yaml").write_text(SGL_ENV)
    (tmp_path / "vllm.yaml").write_text(VLLM_ENV)
    body = ("kind: Matrix\nname: e\nenvironment: sglang.yaml\narms:\n  - baseline\n"
            "  - {name: vllm-baseline, environment: vllm.yaml, preset: baseline}\n"
            "workloads: [coding]\nconcurrency: [1]\nrequests: 4\n")
    (tmp_path / "m.yaml").write_text(body + ENGINES_TARGET)
    plan = plan_target(load_spec(tmp_path / "m.yaml"))
    vl, sg = engine_kwargs(plan, "vllm-baseline", tmp_path / "l"), engine_kwargs(plan, "baseline", tmp_path / "l")
    assert (vl.python, vl.env["A"], vl.env["PYTHONPATH"]) == ("/opt/vllm/bin/python", "vllm", "/opt/vllm-site")
    assert (sg.python, sg.env["A"], "PYTHONPATH" in sg.env) == (None, "target", False)
    plain = body + "target: {kind: local, launcher: process, env: {A: target}}\n"
    (tmp_path / "m.yaml").write_text(plain)
    h = spec_hash(load_spec(tmp_path / "m.yaml"))
    (tmp_path / "m.yaml").write_text(plain.replace("env: {A: target}}", "env: {A: target}, engines: {}}"))
    assert spec_hash(load_spec(tmp_path / "m.yaml")) == h


@pytest.mark.parametrize("target,said,hint", [
    (ENGINES_TARGET.replace("    vllm:", "    vlm:"), r"m\.yaml:\d+:\d+: target\.engines\.vlm: engine 'vlm' serves none "
                                                     r"of the arms \(their engines: sglang, vllm\)", "did you mean 'vllm'"),
    (ENGINES_TARGET.replace("launcher: process", "launcher: docker"),
     r"m\.yaml:\d+:\d+: target\.engines: `engines:` sets each engine's Python and environment for `launcher: process`",
     "set `launcher: process`")], ids=["unknown-engine", "docker"])
def test_a_bad_target_engines_entry_exits_2_at_its_line(tmp_path: Path, target: str, said: str, hint: str) -> None:
    (tmp_path / "sglang.yaml").write_text(SGL_ENV)
    (tmp_path / "vllm.yaml").write_text(VLLM_ENV)
    (tmp_path / "m.yaml").write_text("kind: Matrix\nname: e\nenvironment: sglang.yaml\narms:\n  - baseline\n"
                                     "  - {name: vllm-baseline, environment: vllm.yaml, preset: baseline}\n"
                                     "workloads: [coding]\nconcurrency: [1]\nrequests: 4\n" + target)
    r = run_cli("validate", str(tmp_path / "m.yaml"))
    assert r.returncode == 2, r.stdout + r.stderr
    assert re.search(said, r.stderr), r.stderr
    assert hint in r.stderr and "Traceback" not in r.stderr
