"""`toolkit results reproduce`: a run replayed from its archive alone, through the real CLI and the real
embedded engine (`transformers serve`), with the checkout's specs changed underneath it."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

import pytest

from toolkit.results.equivalence import DEFAULT_MARGIN_PCT
from toolkit.schema.metrics import METRICS

from tests.conftest import ROOT, run_cli
from toolkit.results import compact

# the dummy model's environment (seconds to make, no pin): these tests are about the mechanics, not the model
SMALL = {"workloads": "[coding]", "environment": "../local-cpu.yaml",
         "concurrency": "[1]", "output_len": "8", "requests": "10", "warmup": "1"}


def _set(path: Path, key: str, value: str) -> None:
    text, n = re.subn(rf"^{key}: .*$", f"{key}: {value}", path.read_text(), flags=re.M)
    assert n == 1, key
    path.write_text(text)


def _manifest(run: Path) -> dict:
    return json.loads((run / "manifest.json").read_text())


@pytest.fixture(scope="module")
def original(tmp_path_factory) -> tuple[Path, Path, Path]:
    """The quickstart, kept small (one workload, one concurrency level, 10 requests per cell), run from a
    copy of envs/; returns (envs copy, results root, run folder)."""
    tmp = tmp_path_factory.mktemp("reproduce")
    envs = tmp / "envs"
    shutil.copytree(ROOT / "envs", envs)
    for k, v in SMALL.items():
        _set(envs / "matrices" / "quickstart.yaml", k, v)
    results = tmp / "results"
    r = run_cli("bench", "matrix", str(envs / "matrices" / "quickstart.yaml"), "--results", str(results), "--json",
                timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return envs, results, Path(json.loads(r.stdout)["run"])


@pytest.mark.slow
def test_reproduce_runs_the_archived_matrix_not_the_checkout(original) -> None:
    envs, results, run = original
    m0 = _manifest(run)
    listed = {f["ref"]: f for f in m0["inputs"]["files"]}
    assert {"matrix", "environment"} <= set(listed) and m0["inputs"]["dummy_model"]["hash"]
    for f in listed.values():  # bytes archived, listed in SHA256SUMS, so `results verify` covers them
        assert f"inputs/files/{f['path']}" in (run / "SHA256SUMS").read_text()
    # the checkout moves on: another output length, another prompt lookup, and a flag the server refuses
    _set(envs / "matrices" / "quickstart.yaml", "output_len", "16")
    env = envs / "local-cpu.yaml"
    text = env.read_text().replace("prompt_lookup_num_tokens: 8", "prompt_lookup_num_tokens: 3")
    env.write_text(text.replace("  ngram: {}", "  ngram: {no-such-flag: true}"))

    r = run_cli("results", "reproduce", run.name, "--results", str(results), "--json", timeout=900)
    # one launch per side and no calibration: the launch noise is unknown, so never `reproduced` (exit 0)
    assert r.returncode in (1, 3), r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert out["verdict"] == {1: "differs", 3: "inconclusive"}[r.returncode]
    assert (out["verdict"] == "differs") == bool(out["moved"])
    assert out["tolerance_pct"] == DEFAULT_MARGIN_PCT and "the default margin" in out["tolerance_source"]
    assert out["verdict"] == "differs" or out["reasons"][0].startswith("one launch per side, launch noise unknown")
    assert out["original"]["run_id"] == run.name and out["reproduction"]["status"] == "complete"
    labels = {c["label"] for c in out["cells"]}
    assert labels == {"baseline coding c=1 out=8", "ngram coding c=1 out=8"}
    for c in out["cells"]:
        assert c["comparable"], c["reason"]
        assert {"ttft_ms", "e2e_ms", "output_tok_s"} <= set(c["metrics"])
        per_request = [k for k in c["metrics"] if k in METRICS and METRICS[k].kind == "request"]
        # one sample per measured request where every request has one (TTFT, E2E); a gap metric has none for a request
        # streamed in fewer than 2 chunks, which a busy machine can make happen (a CI run), so at most one
        assert "ttft_ms" in per_request and all(c["metrics"][k]["a_n"] == 10 and c["metrics"][k]["b_n"] == 10
                                                for k in ("ttft_ms", "e2e_ms"))
        assert all(1 <= c["metrics"][k]["a_n"] <= 10 and 1 <= c["metrics"][k]["b_n"] <= 10 for k in per_request)

    new = Path(out["reproduction"]["path"])
    m1 = _manifest(new)
    assert m1["reproduces"] == run.name and m1["drift"] == []
    assert m1["matrix"]["resolved"] == m0["matrix"]["resolved"] and m1["matrix"]["resolved"]["output_len"] == 8
    assert m1["environment"]["resolved"] == m0["environment"]["resolved"]
    assert (m1["matrix"]["hash"], m1["environment"]["hash"]) == (m0["matrix"]["hash"], m0["environment"]["hash"])
    assert "no-such-flag" not in m1["arms"]["ngram"]["command"]
    assert m1["arms"]["ngram"]["request_params"]["generation_config"]["prompt_lookup_num_tokens"] == 8
    cells = json.loads(compact.read_text(new / "summary.json"))["cells"]
    assert all(c["status"] == "ok" and c["output_len"] == 8 for c in cells)
    assert run_cli("results", "verify", str(new)).returncode == 0  # its own inputs/ included
    env_bytes = compact.read_bytes(run / "inputs" / "files" / "local-cpu.yaml")  # .gz once finalized (1 KiB+)
    assert compact.read_bytes(new / "inputs" / "files" / "local-cpu.yaml") == env_bytes


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["edited", "missing"])
def test_a_missing_or_edited_input_fails_with_exit_2_naming_it(original, tmp_path: Path, damage: str) -> None:
    _, _, run = original
    copy = tmp_path / "results" / "quickstart" / run.name
    shutil.copytree(run, copy)
    name = copy / "inputs" / "files" / "local-cpu.yaml"
    victim = compact.stored(name)  # NAME.gz once finalized (1 KiB or more)
    if damage == "edited":
        edited = compact.read_text(name).replace("prompt_lookup_num_tokens: 8", "prompt_lookup_num_tokens: 2")
        victim.write_bytes(gzip.compress(edited.encode(), mtime=0) if victim.name.endswith(".gz") else edited.encode())
    else:
        victim.unlink()
    r = run_cli("results", "reproduce", str(copy), "--results", str(tmp_path / "results"), "--json")
    assert r.returncode == 2, r.stderr
    assert "inputs/files/local-cpu.yaml" in r.stderr and ("edited" if damage == "edited" else "missing") in r.stderr
    assert "Traceback" not in r.stderr
    assert sorted(p.name for p in (tmp_path / "results" / "quickstart").iterdir()) == [run.name]  # nothing new written


def test_another_gpu_and_engine_version_are_refused_without_allow_drift() -> None:
    """The committed H200 run (transformers 5.17 on one H200) cannot be replayed here as if nothing changed."""
    from toolkit.bench.hostinfo import local_fingerprint
    from toolkit.results.facts import host_view

    if host_view(local_fingerprint()).get("gpus") == "1x NVIDIA H200":
        pytest.skip("this host is the original's kind: no drift to refuse")
    r = run_cli("results", "reproduce", "20261202T125115Z-f0ee5a", "--results", str(ROOT / "results"))
    assert r.returncode == 2, r.stderr
    assert "gpu 1x NVIDIA H200 -> none" in r.stderr and "engine transformers 5.17.0" in r.stderr
    assert "--allow-drift" in r.stderr


def test_an_archive_from_before_inputs_names_what_it_lacks() -> None:
    r = run_cli("results", "reproduce", "20261202T185552Z-0086be", "--results", str(ROOT / "results"), "--json")
    assert r.returncode == 2
    assert "before runs kept their inputs/" in r.stderr
    assert "environment sglang.patches[0] (patches/sglang-0.5.17-spec-disable-batch-threshold.patch)" in r.stderr


def _plan(tmp: Path, workload_text: str | None = None):
    from toolkit.bench.plan import plan_run
    from toolkit.specs import load_spec

    envs = tmp / "envs"
    shutil.copytree(ROOT / "envs", envs)
    m = envs / "matrices" / "quickstart.yaml"
    if workload_text is not None:
        (tmp / "data").mkdir()
        (tmp / "data" / "mine.jsonl").write_text(workload_text)
        _set(m, "workloads", "[coding, {name: mine, path: ../../data/mine.jsonl}]")
    return plan_run(load_spec(m))


def test_inputs_keep_their_layout_and_drift_is_recorded(tmp_path: Path) -> None:
    """The listing and the bytes of a planned run, and what a replay adds to the manifest (real writer)."""
    from toolkit.bench.inputs import Origin, archive_run, materialize
    from toolkit.bench.plan import run_manifest
    from toolkit.results.archive import open_archive
    from toolkit.schema.manifest import DriftRecord

    plan = _plan(tmp_path, '{"prompt": "write a function"}\n{"prompt": "sum 2 and 3"}\n')
    drift = [DriftRecord(what="gpu", original="1x NVIDIA H200", current=None)]
    writer = archive_run(tmp_path / "results", plan, run_manifest(plan, {}), Origin("20261202T000000Z-abcdef", drift))
    m = writer.manifest
    assert m.reproduces == "20261202T000000Z-abcdef" and m.drift[0].what == "gpu"
    by_key = {f.ref: f for f in m.inputs.files}
    assert by_key["matrix:workloads[1].path"].path == "data/mine.jsonl"
    assert by_key["matrix"].path == "envs/matrices/quickstart.yaml" == m.inputs.matrix
    writer.finalize("complete")
    tree = materialize(open_archive(writer.path), tmp_path / "tree")
    assert tree == tmp_path / "tree" / "envs" / "matrices" / "quickstart.yaml"
    assert (tmp_path / "tree" / "data" / "mine.jsonl").read_bytes() == (tmp_path / "data" / "mine.jsonl").read_bytes()
    assert run_cli("results", "verify", str(writer.path)).returncode == 0


def test_runs_of_a_tune_session_store_their_inputs_once_by_content(tmp_path: Path) -> None:
    """A run archived in a tune session (its results root holds tune.json) keeps each input once for the
    session, at inputs/sha256/<sha256>; verify checks every blob's sha256, and replay reads it back."""
    from toolkit.bench.inputs import archive_run, materialize
    from toolkit.bench.plan import run_manifest
    from toolkit.results.archive import open_archive
    from toolkit.results.verify import errors, verify_run

    plan = _plan(tmp_path, '{"prompt": "write a function"}\n')
    session = tmp_path / "session"
    session.mkdir()
    (session / "tune.json").write_text("{}\n")
    runs = []
    for _ in range(2):
        w = archive_run(session, plan, run_manifest(plan, {}))
        w.finalize("complete")
        runs.append(w.path)
    blobs = sorted((session / "inputs" / "sha256").iterdir())
    archived = [f for f in open_archive(runs[0]).manifest.inputs.files if f.archived]
    assert archived and all(f.store == "../../inputs/sha256" for f in archived)
    assert sorted(b.name for b in blobs) == sorted({f.sha256 for f in archived})  # one copy for both runs
    assert not any((r / "inputs" / "files").exists() for r in runs)
    assert all(verify_run(r) == [] for r in runs)
    tree = materialize(open_archive(runs[1]), tmp_path / "tree")
    assert (tree.parents[2] / "data" / "mine.jsonl").read_text() == '{"prompt": "write a function"}\n'
    mine = next(f for f in archived if f.path == "data/mine.jsonl")
    (session / "inputs" / "sha256" / mine.sha256).write_text('{"prompt": "edited"}\n')
    assert [p.file for p in errors(verify_run(runs[0]))] == [f"../../inputs/sha256/{mine.sha256}"]
    (session / "inputs" / "sha256" / mine.sha256).unlink()
    assert "missing" in errors(verify_run(runs[1]))[0].message


def test_an_input_with_a_secret_is_masked_and_refused_at_replay(tmp_path: Path) -> None:
    from toolkit.bench.inputs import archive_run, check_inputs
    from toolkit.bench.plan import run_manifest
    from toolkit.results.archive import open_archive

    key = "sk-" + "a1B2c3D4e5F6g7H8i9J0"
    plan = _plan(tmp_path, json.dumps({"prompt": f"why does OPENAI_API_KEY={key} fail?"}) + "\n")
    writer = archive_run(tmp_path / "results", plan, run_manifest(plan, {}))
    writer.finalize("complete")
    assert key not in (writer.path / "inputs" / "files" / "data" / "mine.jsonl").read_text()
    problems = check_inputs(open_archive(writer.path))
    assert len(problems) == 1 and "masked" in problems[0].message and "mine.jsonl" in str(problems[0].file)


def test_a_model_directory_is_referenced_and_its_chat_template_checked(tmp_path: Path) -> None:
    """`model.path`: the weights stay where they are; the chat template and configs are archived and must
    still match where the run read them."""
    from toolkit.bench.inputs import archive_run, materialize
    from toolkit.bench.plan import plan_run, run_manifest
    from toolkit.errors import ToolkitError
    from toolkit.results.archive import open_archive
    from toolkit.specs import load_spec

    model = tmp_path / "models" / "tiny"
    model.mkdir(parents=True)
    (model / "config.json").write_text('{"model_type": "llama"}\n')
    (model / "chat_template.jinja").write_text("{% for m in messages %}{{ m['content'] }}{% endfor %}\n")
    (model / "model.safetensors").write_bytes(b"\0" * 4096)
    _plan(tmp_path)  # the copy of envs/
    _set(tmp_path / "envs" / "matrices" / "quickstart.yaml", "environment", "../local-cpu.yaml")
    env = tmp_path / "envs" / "local-cpu.yaml"
    env.write_text(re.sub(r"model:\n(  .*\n)+", "model:\n  path: ../models/tiny\n", env.read_text()))
    plan = plan_run(load_spec(tmp_path / "envs" / "matrices" / "quickstart.yaml"))
    writer = archive_run(tmp_path / "results", plan, run_manifest(plan, {}))
    writer.finalize("complete")
    files = {f.ref: f for f in writer.manifest.inputs.files}
    ref = files["environment:model.path"]
    assert not ref.archived and set(ref.files) == {"config.json", "chat_template.jinja"}
    assert files["environment:model.path/chat_template.jinja"].archived
    assert not (writer.path / "inputs" / "files" / "models" / "tiny" / "model.safetensors").exists()
    tree = tmp_path / "tree"
    materialize(open_archive(writer.path), tree)
    assert (tree / "models" / "tiny").resolve() == model.resolve()
    (model / "chat_template.jinja").write_text("{{ messages }}\n")
    with pytest.raises(ToolkitError, match="chat_template.jinja differs"):
        materialize(open_archive(writer.path), tmp_path / "tree2")
