"""vLLM's process launcher against the fake vLLM of tests/data/fake_vllm (its answers read from vLLM 0.24.0's
source, not recorded: see its docstring): the command line, health at /health and /v1/models, /version and the
dev-mode /server_info, the /metrics acceptance counters over a request, a clean stop by SIGTERM to the API
server, a failed start reported with vLLM's own root cause; and a Matrix of vLLM arms run by the real CLI."""

from __future__ import annotations

import json
import signal
import sys
import textwrap
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.helpers import ROOT
from toolkit.engines import vllm
from toolkit.errors import ToolFailure, ToolkitError
from toolkit.serve import launcher_for
from toolkit.serve.vllm import VLLMDockerLauncher, VLLMProcessLauncher, acceptance_counters, render_args
from toolkit.specs import load_spec

FAKE_VLLM = ROOT / "tests" / "data" / "fake_vllm"
FAKE_ENV = {"PYTHONPATH": str(FAKE_VLLM)}
NGRAM = '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3}'


def chat(base_url: str, model: str, max_tokens: int) -> list[dict]:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": max_tokens,
            "stream": True, "stream_options": {"include_usage": True}}
    req = urllib.request.Request(base_url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        text = r.read().decode()
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]


def test_the_command_line() -> None:
    assert render_args({"model": "/m", "max-num-seqs": 8, "enable-prefix-caching": False, "enforce-eager": True,
                        "served-model-name": ["a", "b"]}) == [
        "/m", "--max-num-seqs", "8", "--no-enable-prefix-caching", "--enforce-eager", "--served-model-name", "a", "b"]
    spec = load_spec(ROOT / "envs" / "vllm-0.24.0-pair.yaml")
    srv = launcher_for(spec, "eagle3", kind="process", python="/py", port=8123)
    assert isinstance(srv, VLLMProcessLauncher) and srv.model == "pair-target"
    assert srv.command[:6] == ["/py", "-m", "vllm.entrypoints.cli.main", "serve", "/tmp/toolkit-pair/target",
                               "--served-model-name"]
    assert srv.command[-4:] == ["--port", "8123", "--host", "127.0.0.1"]
    assert srv.reads == {"/tmp/toolkit-pair/target", "/tmp/toolkit-pair/draft"}
    assert srv.env == {"HF_HUB_OFFLINE": "1"}
    # in a container of its image: the same command with the image's python, the Environment's env
    box = launcher_for(spec, "eagle3", kind="docker", image="toolkit/vllm-0.24.0-pair:abc", port=8124, gpus=["0"])
    assert isinstance(box, VLLMDockerLauncher) and box.model == "pair-target" and box.image.endswith(":abc")
    assert box.command[:5] == ["python3", "-m", "vllm.entrypoints.cli.main", "serve", "/tmp/toolkit-pair/target"]
    assert box.command[-4:] == ["--port", "8124", "--host", "127.0.0.1"] and box.base_url == "http://127.0.0.1:8124"
    assert box.env == {"HF_HUB_OFFLINE": "1"} and box.gpus == ["0"] and box.stop_signal == signal.SIGTERM
    assert box.stop_timeout_s == 30 and box.jit_cache is None
    with pytest.raises(ToolkitError) as e:  # no image: where to get one
        launcher_for(spec, "eagle3", kind="docker")
    assert "no image for environment 'vllm-0.24.0-pair'" in e.value.message and "build env" in e.value.hint


def test_start_health_acceptance_and_stop(tmp_path: Path) -> None:
    args = {"model": "/models/t", "served-model-name": "t", "speculative-config": NGRAM}
    with VLLMProcessLauncher(args, python=sys.executable, log_path=tmp_path / "v.log",
                             env={**FAKE_ENV, "VLLM_SERVER_DEV_MODE": "1"}) as srv:
        srv.wait_healthy(60)
        before = acceptance_counters(srv.base_url)
        chunks = chat(srv.base_url, "t", 20)
        after = acceptance_counters(srv.base_url)
        info = srv.info().model_dump()
    # the stream: the role first, tokens of one step per chunk, the finish on the last token's, the usage
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunks[-2]["choices"][0]["finish_reason"] == "length" and chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["completion_tokens"] == 20
    steps = len(chunks) - 2
    assert steps < 20  # several tokens in one chunk: what the client sees of speculation
    got = vllm.acceptance_length(before, after)
    assert got.steps == steps and got.accept_length == pytest.approx(20 / steps) and got.requests == 1
    assert info["engine_version"] == "0.24.0-fake" and info["server_info_read"]
    assert info["speculative"]["method"] == "ngram" and info["max_running_requests"] == 256
    assert srv.stop_info().signals == ["SIGTERM to the leader"] and srv.stop_info().exit_code == 0


def test_a_failed_start_says_vllms_root_cause(tmp_path: Path) -> None:
    srv = VLLMProcessLauncher({"model": "/m", "crash-after-start": True}, python=sys.executable,
                              log_path=tmp_path / "v.log", env=FAKE_ENV)
    with pytest.raises(ToolFailure) as e:
        srv.wait_healthy(60)
    assert "vllm exited with code 1 during start-up" in e.value.message
    assert "ValueError: simulated: the draft model's vocabulary differs" in e.value.message
    assert "See root cause above" not in e.value.message


FAKE_IMAGE = "toolkit-test/fake-vllm:1"


@pytest.fixture(scope="module")
def fake_vllm_image(docker_client, base_image) -> str:
    docker_client.images.build(path=str(FAKE_VLLM), tag=FAKE_IMAGE, network_mode="host", rm=True)
    return FAKE_IMAGE


@pytest.mark.slow
def test_a_container_runs_exactly_the_preset(docker_client, fake_vllm_image, tmp_path: Path) -> None:
    """VLLMDockerLauncher: a container of the image runs the preset's command as the process launcher does (the
    image's python), is healthy when /health and /v1/models answer, reads its /metrics acceptance, says what
    it is, stops with SIGTERM to the API server (exit 0, not docker's SIGKILL) and is removed; a failed start
    gives vLLM's own root cause from the container's log."""
    args = {"model": "/models/t", "served-model-name": "t", "speculative-config": NGRAM}
    srv = VLLMDockerLauncher(fake_vllm_image, args, gpus=None, shm_size="1g", ulimits={"stack": 67108864},
                             mounts={str(tmp_path): "/models"}, env={"VLLM_SERVER_DEV_MODE": "1"},
                             log_path=tmp_path / "v.log")
    with srv:
        c = docker_client.containers.get(srv.info().container)
        expected = ["python3", "-m", "vllm.entrypoints.cli.main", "serve", "/models/t", "--served-model-name", "t",
                    "--speculative-config", NGRAM, "--port", str(srv.port), "--host", "127.0.0.1"]
        assert c.attrs["Config"]["Cmd"] == expected == srv.command and c.attrs["HostConfig"]["IpcMode"] == "host"
        before = acceptance_counters(srv.base_url)
        chat(srv.base_url, "t", 12)
        got = vllm.acceptance_length(before, acceptance_counters(srv.base_url))
        info = srv.info().model_dump()
    assert got.requests == 1 and got.accept_length > 1
    assert info["engine_version"] == "0.24.0-fake" and info["speculative"]["method"] == "ngram"
    assert info["image"] == fake_vllm_image and info["launcher"] == "VLLMDockerLauncher"
    assert srv.stop_info().exit_code == 0 and srv.stop_info().warnings == []
    assert srv.stop_info().signals == ["SIGTERM to the container's main process"]
    assert not [x for x in docker_client.containers.list(all=True) if x.id == c.id], "container left behind"
    assert "FAKE-VLLM-ARGV" in (tmp_path / "v.log").read_text()
    crash = VLLMDockerLauncher(fake_vllm_image, {"model": "/m", "crash-after-start": True}, gpus=None,
                               shm_size="1g", ulimits={"stack": 67108864}, log_path=tmp_path / "crash.log")
    try:
        with pytest.raises(ToolFailure) as e:
            crash.wait_healthy(60)
    finally:
        crash.stop()
    assert "vllm container exited with code 1 during start-up" in e.value.message
    assert "ValueError: simulated: the draft model's vocabulary differs" in e.value.message


def test_an_unknown_flag_at_the_server(tmp_path: Path) -> None:
    srv = VLLMProcessLauncher({"model": "/m", "no-such-flag": 1}, python=sys.executable,
                              log_path=tmp_path / "v.log", env=FAKE_ENV)
    with pytest.raises(ToolFailure) as e:
        srv.wait_healthy(60)
    assert "code 2" in e.value.message and "unrecognized arguments: --no-such-flag 1" in e.value.message


ENV = textwrap.dedent("""\
    kind: Environment
    name: vllm-fake
    engine: vllm
    packages:
      - {name: vllm, version: 0.24.0}
    servers:
      baseline: &b
        model: /models/target
        served-model-name: target
        max-num-seqs: 64
      eagle3:
        <<: *b
        speculative-config: '{"method": "eagle3", "model": "/models/draft", "num_speculative_tokens": 3}'
      ngram:
        <<: *b
        speculative-config: '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}'
    """)


@pytest.mark.slow
def test_a_matrix_of_vllm_arms(tmp_path: Path) -> None:
    """The runner takes vLLM arms through the registry alone (no runner edit): each arm launched, measured and
    stopped one after another; the speculative cells' acceptance read from vLLM's /metrics counters through the
    engine (Engine.acceptance_counts), the baseline's none."""
    (tmp_path / "env.yaml").write_text(ENV)
    target = json.dumps({"kind": "local", "launcher": "process", "python": sys.executable, "env": FAKE_ENV})
    (tmp_path / "m.yaml").write_text(textwrap.dedent(f"""\
        kind: Matrix
        name: vf
        environment: env.yaml
        arms: [baseline, eagle3, ngram]
        target: {target}
        workloads: [coding]
        api: chat
        concurrency: [1, 4]
        output_len: 12
        requests: 8
        warmup: 1
        """))
    r = run_cli("bench", "matrix", str(tmp_path / "m.yaml"), "--results", str(tmp_path / "results"), "--json",
                env={"TOOLKIT_CACHE_DIR": str(tmp_path / "cache")}, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert out["status"] == "complete" and len(out["cells"]) == 6
    manifest = json.loads((Path(out["run"]) / "manifest.json").read_text())
    assert manifest["arms"]["eagle3"]["command"].startswith(
        f"{sys.executable} -m vllm.entrypoints.cli.main serve /models/target --served-model-name target")
    assert "--speculative-config" in manifest["arms"]["ngram"]["command"]
    from toolkit.results import compact
    summary = json.loads(compact.read_text(Path(out["run"]) / "summary.json"))
    acc = {(c["arm"], c["concurrency"]): (c["metrics"].get("accept_length") or {}).get("mean") for c in summary["cells"]}
    assert all(acc[a, c] and acc[a, c] > 1 for a in ("eagle3", "ngram") for c in (1, 4)), acc
    assert acc["baseline", 1] is None, acc


@pytest.mark.parametrize("target", [
    "{kind: local}",  # launcher docker, the default: the image `toolkit build env` builds
    "{kind: local, launcher: process}",
    "{kind: slurm, launcher: process, slurm: {partition: p}}",
    "{kind: slurm, launcher: container, slurm: {container_image: 'registry#org/vllm:1'}}",
])
def test_validate_takes_every_target_vllm_runs_on(tmp_path: Path, target: str) -> None:
    (tmp_path / "env.yaml").write_text(ENV)
    (tmp_path / "m.yaml").write_text(textwrap.dedent(f"""\
        kind: Matrix
        name: vt
        environment: env.yaml
        arms: [baseline, eagle3]
        workloads: [coding]
        concurrency: [1]
        requests: 2
        target: {target}
        """))
    r = run_cli("validate", str(tmp_path / "m.yaml"))
    assert r.returncode == 0, (r.stdout, r.stderr)


def test_validate_refuses_a_vllm_job_over_two_nodes(tmp_path: Path) -> None:
    """What a job would refuse is refused by `toolkit validate` first, at its line: vLLM's server spans no
    nodes the way SGLang's does (--nnodes)."""
    (tmp_path / "env.yaml").write_text(ENV)
    (tmp_path / "m.yaml").write_text(textwrap.dedent("""\
        kind: Matrix
        name: vt
        environment: env.yaml
        arms: [baseline, eagle3]
        workloads: [coding]
        concurrency: [1]
        requests: 2
        target:
          kind: slurm
          slurm: {nodes: 2, gpus_per_arm: 2}
        """))
    r = run_cli("validate", str(tmp_path / "m.yaml"))
    assert r.returncode == 2 and "only SGLang spans nodes" in r.stderr and "m.yaml:10" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


TUNED = textwrap.dedent("""\
    kind: Matrix
    name: vt
    environment: env.yaml
    arms: [baseline, ngram]
    workloads: [coding]
    api: chat
    concurrency: [2]
    output_len: 12
    requests: 6
    warmup: 1
    target: %s
    tune:
      space:
        ngram:
          %s
    """)


@pytest.mark.parametrize("knob, line, said, hint", [
    ("max-num-seqs: [8, 16]", None, None, None),
    ("dtype: [float16, bf16]", 15, "dtype: 'bf16': --dtype: invalid choice: 'bf16'", "did you mean 'bfloat16'?"),
    ("max-num-seq: [8]", 15, "max-num-seq: 8: unknown vLLM server flag --max-num-seq in vllm 0.24.0", "did you mean 'max-num-seqs'?"),
    ("enforce-eager: [true, 1]", 15, "--enforce-eager is an on/off flag and takes no value, got 1", "write `true`"),
    ("max-num-seqs: [8, 0]", 15, "max-num-seqs: 0 is out of range: it must be >= 1", None),
])
def test_a_vllm_tune_block_is_checked_against_vllms_parser(tmp_path: Path, knob, line, said, hint) -> None:
    """`toolkit validate` (and `bench tune`) checks each knob value of a vLLM arm against the pinned vLLM's own
    parser table, at the value's line, before any server starts."""
    (tmp_path / "env.yaml").write_text(ENV)
    (tmp_path / "m.yaml").write_text(TUNED % ("{kind: local, launcher: process}", knob))
    r = run_cli("validate", str(tmp_path / "m.yaml"))
    if said is None:
        assert r.returncode == 0, r.stderr
        return
    assert r.returncode == 2 and said in r.stderr and f"m.yaml:{line}" in r.stderr, r.stderr
    assert (hint or "") in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow
def test_bench_tune_on_vllm_arms(tmp_path: Path) -> None:
    """`bench tune` of a vLLM arm on the fake vLLM: each trial a server launch with the knob's value on its
    command line, the session complete with its decision, no change to the tuner beyond the engine's rules."""
    (tmp_path / "env.yaml").write_text(ENV)
    target = json.dumps({"kind": "local", "launcher": "process", "python": sys.executable, "env": FAKE_ENV})
    (tmp_path / "m.yaml").write_text(TUNED % (target, "max-num-seqs: [8, 32]"))
    out = tmp_path / "tuned.yaml"
    r = run_cli("bench", "tune", str(tmp_path / "m.yaml"), "--arm", "ngram", "--budget", "2", "--json",
                "--out", str(out), "--write-anyway", "--results", str(tmp_path / "results"),
                env={"TOOLKIT_CACHE_DIR": str(tmp_path / "cache")}, timeout=900)
    assert r.returncode in (0, 3), r.stderr[-3000:]
    res = json.loads(r.stdout)
    assert res["status"] == "complete" and res["confirmation"]["cells"], res
    commands = [json.loads((Path(p) / "manifest.json").read_text())["arms"] for p in res["runs"]]
    seen = {a["command"].split("--max-num-seqs ")[1].split()[0] for arms in commands for name, a in arms.items()
            if name != "baseline" and "--max-num-seqs " in a["command"]}
    assert {"8", "32"} <= seen, seen
    # the winner written back into a copy of the vLLM Environment, which validates against vLLM's parser again
    tuned = load_spec(out).model.servers["ngram"]
    own = load_spec(tmp_path / "env.yaml").model.servers["ngram"]
    assert tuned["max-num-seqs"] in (8, 32) and tuned["speculative-config"] == own["speculative-config"]
