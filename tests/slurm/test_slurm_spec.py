"""A Slurm target's spec and its rendered job scripts (no cluster needed): mistakes exit 2 at their file:line,
the scripts are deterministic and carry the environment hash, the preset's exact server command and the
NVLink-multicast-off variables, for the process and both container variants; a matrix that names no Slurm
block keeps its hash."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import run_cli
from toolkit.render import template_version
from toolkit.specs import load_spec, spec_hash

ROOT = Path(__file__).resolve().parents[2]
BLACKWELL = ROOT / "envs" / "sglang-cu13-blackwell.yaml"


def blackwell(tmp: Path, target: str, name: str = "bw") -> Path:
    path = tmp / f"{name}.yaml"
    path.write_text(f"kind: Matrix\nname: {name}\nenvironment: {BLACKWELL}\narms: [baseline, eagle3]\n"
                    f"target:\n{target}workloads: [coding]\nconcurrency: [1]\noutput_len: 8\nrequests: 4\n")
    return path


PROCESS = ("  kind: slurm\n  python: /shared/venvs/sglang/bin/python\n"
           "  slurm: {partition: gpu, account: llm, time_limit: '2:00:00', gpus_per_arm: 8, workdir: /shared/tk}\n")
PYXIS = ("  kind: slurm\n  launcher: container\n  slurm:\n    partition: gpu\n    gpus_per_arm: 8\n"
         "    container_image: registry#org/sglang-cu13-blackwell:0.5.23\n    mounts: ['/models:/models:ro']\n"
         "    sbatch: ['--exclusive']\n    workdir: /shared/tk\n")


@pytest.mark.parametrize("target, line, words", [
    ("  kind: local\n  slurm: {partition: gpu}\n", 7, "applies to a target of kind slurm"),
    ("  kind: slurm\n  launcher: docker\n", 7, "not docker"),
    ("  kind: slurm\n  launcher: container\n  slurm: {partition: gpu}\n", 7, "needs `slurm: {container_image"),
    ("  kind: slurm\n  slurm:\n    sbatch: ['--qos=high', '--job-name=x']\n", 8, "--job-name is set by the toolkit"),
    ("  kind: slurm\n  slurm:\n    time_limit: 2h\n", 8, "time_limit"),
    ("  kind: slurm\n  slurm:\n    gpus_per_arm: 8\n    gres: 'gpu:8'\n", 9, "not both"),
    ("  kind: slurm\n  slurm:\n    nodes: 3\n    gpus_per_arm: 8\n", 9, "do not split evenly"),
    ("  kind: slurm\n  slurm:\n    mounts: ['/models:/models']\n", 8, "applies to `launcher: container`"),
    ("  kind: slurm\n  slurm:\n    partition: 'gpu nodes'\n", 8, "partition"),
    ("  kind: slurm\n  parallel: 2\n", 7, "slurm: {jobs: N}"),
    ("  kind: slurm\n  slurm:\n    loadgen: login-node\n", 8, "loadgen"),
])
def test_mistakes_exit_2_at_their_line(tmp_path, target, line, words):
    path = blackwell(tmp_path, target)
    r = run_cli("validate", str(path))
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"{path}:{line}" in r.stderr and words in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_process_script_carries_hash_command_and_no_multicast(tmp_path):
    path = blackwell(tmp_path, PROCESS)
    first = run_cli("render", "slurm", str(path), "-o", str(tmp_path / "a"))
    again = run_cli("render", "slurm", str(path), "-o", str(tmp_path / "b"))
    assert first.returncode == 0 and again.returncode == 0, first.stderr
    text = (tmp_path / "a" / "tk-bw-baseline.sbatch").read_text()
    assert text == (tmp_path / "b" / "tk-bw-baseline.sbatch").read_text()  # deterministic
    env_hash = spec_hash(load_spec(BLACKWELL), template_version())
    assert f"export TOOLKIT_ENV_HASH={env_hash}" in text
    for line in ("#SBATCH --partition=gpu", "#SBATCH --account=llm", "#SBATCH --time=2:00:00", "#SBATCH --gpus=8",
                 "#SBATCH --output=/shared/tk/%x-%j.out", "export NCCL_NVLS_ENABLE=0",
                 "export TORCH_SYMM_MEM_DISABLE_MULTICAST=1", "export NVSHMEM_DISABLE_NVLS=1",
                 "export SGLANG_ENABLE_TORCH_SYMM_MEM=1", "PORT=30000"):
        assert line in text.splitlines(), line
    # the preset's exact command (its own host and port), run by the venv's Python
    assert ("exec /shared/venvs/sglang/bin/python -m sglang.launch_server --model-path /models/target "
            "--served-model-name target --tp-size 8 --trust-remote-code --host 0.0.0.0 --port 30000 "
            "--mem-fraction-static 0.85 --max-running-requests 128 --flashinfer-allreduce-fusion-backend auto "
            "--enable-torch-symm-mem") in text
    eagle = (tmp_path / "a" / "tk-bw-eagle3.sbatch").read_text()
    assert "--speculative-algorithm EAGLE3" in eagle and "#SBATCH --job-name=tk-bw-eagle3" in eagle


def test_container_variants(tmp_path):
    pyxis = blackwell(tmp_path, PYXIS)
    r = run_cli("render", "slurm", str(pyxis))
    assert r.returncode == 0, r.stderr
    assert ("exec srun --nodes=1 --ntasks-per-node=1 --container-image='registry#org/sglang-cu13-blackwell:0.5.23' "
            "--container-mounts=/models:/models:ro python3 -m sglang.launch_server --model-path /models/target") in r.stdout
    assert "#SBATCH --exclusive" in r.stdout.splitlines()
    apptainer = blackwell(tmp_path, PYXIS.replace("    partition: gpu\n", "    container_runtime: apptainer\n")
                          .replace("registry#org/sglang-cu13-blackwell:0.5.23", "/images/sglang.sif"), "bwa")
    r = run_cli("render", "slurm", str(apptainer))
    assert r.returncode == 0, r.stderr
    assert ("exec srun --nodes=1 --ntasks-per-node=1 apptainer exec --nv --bind /models:/models:ro "
            "/images/sglang.sif python3 -m sglang.launch_server") in r.stdout


def test_two_nodes_run_one_server_process_per_node(tmp_path):
    path = blackwell(tmp_path, PROCESS.replace("gpus_per_arm: 8", "gpus_per_arm: 16, nodes: 2"))
    r = run_cli("render", "slurm", str(path))
    assert r.returncode == 0, r.stderr
    assert "#SBATCH --gpus-per-node=8" in r.stdout.splitlines() and "#SBATCH --nodes=2" in r.stdout.splitlines()
    assert re.search(r'--nnodes 2 --node-rank "\$SLURM_NODEID" --dist-init-addr "\$DIST_INIT_ADDR"', r.stdout)
    assert "exec srun --nodes=2 --ntasks-per-node=1 bash -c serve" in r.stdout


def test_a_port_the_job_picks_when_the_preset_has_none(tmp_path):
    path = tmp_path / "q.yaml"
    path.write_text((ROOT / "envs" / "matrices" / "quickstart.yaml").read_text()
                    .replace("environment: ../local-cpu-pair.yaml", f"environment: {ROOT / 'envs' / 'local-cpu.yaml'}")
                    .replace("  kind: local\n", f"  kind: slurm\n  slurm: {{workdir: {tmp_path}}}\n"))
    r = run_cli("render", "slurm", str(path))
    assert r.returncode == 0, r.stderr
    assert '--host 0.0.0.0 --port "${PORT}"' in r.stdout and "candidate=$((10000 + RANDOM % (EPHEMERAL - 10002)))" in r.stdout
    assert "export HF_HUB_OFFLINE=1" in r.stdout


def test_render_slurm_refuses_a_local_target():
    r = run_cli("render", "slurm", str(ROOT / "envs" / "matrices" / "quickstart.yaml"))
    assert r.returncode == 2 and "needs a target of kind slurm" in r.stderr and "quickstart.yaml:" in r.stderr


def test_a_matrix_without_a_slurm_block_keeps_its_hash_document():
    from toolkit.specs import _hash_doc

    doc = _hash_doc(load_spec(ROOT / "envs" / "matrices" / "quickstart.yaml").model)
    assert "slurm" not in doc["target"]


def test_loadgen_is_a_job_step_unless_the_spec_says_and_the_default_keeps_the_hash(tmp_path):
    from toolkit.bench.slots import plan_slots
    from toolkit.specs import _hash_doc

    default, here = (load_spec(blackwell(tmp_path, PROCESS, "d")),
                     load_spec(blackwell(tmp_path, PROCESS.replace("workdir:", "loadgen: submit-host, workdir:"), "h")))
    assert default.model.target.slurm.loadgen == "job-step" and here.model.target.slurm.loadgen == "submit-host"
    assert plan_slots(default, engine="sglang")[0].target.record().loadgen == "job-step"
    assert plan_slots(here, engine="sglang")[0].target.record().loadgen == "submit-host"
    assert "loadgen" not in _hash_doc(default.model)["target"]["slurm"]  # a spec from before the field: same hash
    assert _hash_doc(here.model)["target"]["slurm"]["loadgen"] == "submit-host"


VLLM_PAIR = ROOT / "envs" / "vllm-0.24.0-pair.yaml"


def vllm_matrix(tmp: Path, target: str, name: str = "vp") -> Path:
    path = tmp / f"{name}.yaml"
    path.write_text(f"kind: Matrix\nname: {name}\nenvironment: {VLLM_PAIR}\narms: [baseline, eagle3]\n"
                    f"target:\n{target}workloads: [coding]\nconcurrency: [1]\noutput_len: 8\nrequests: 4\n")
    return path


def test_a_vllm_job_runs_the_engines_own_command(tmp_path):
    """The job script's server command is the engine's (Engine.server_command): `vllm serve MODEL` for a vLLM
    Environment, as a process and in a container; its hash and env like SGLang's; one node only."""
    process = vllm_matrix(tmp_path, PROCESS.replace("sglang/bin", "vllm/bin").replace("gpus_per_arm: 8", "gpus_per_arm: 1"))
    r = run_cli("render", "slurm", str(process), "-o", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "out" / "tk-vp-eagle3.sbatch").read_text()
    assert f"export TOOLKIT_ENV_HASH={spec_hash(load_spec(VLLM_PAIR), template_version())}" in text
    assert "export HF_HUB_OFFLINE=1" in text.splitlines() and "#SBATCH --gpus=1" in text.splitlines()
    assert ("exec /shared/venvs/vllm/bin/python -m vllm.entrypoints.cli.main serve /tmp/toolkit-pair/target "
            "--served-model-name pair-target --gpu-memory-utilization 0.7 --max-num-seqs 64 --speculative-config "
            """'{"method": "eagle3", "model": "/tmp/toolkit-pair/draft", "num_speculative_tokens": 3}' """
            '--host 0.0.0.0 --port "${PORT}"') in text
    assert "engine       vllm, launcher process" in text and "sglang" not in text
    pyxis = vllm_matrix(tmp_path, PYXIS.replace("registry#org/sglang-cu13-blackwell:0.5.23",
                                                "registry#org/vllm-0.24.0-pair:a77e50ac64da"), "vpx")
    r = run_cli("render", "slurm", str(pyxis))
    assert r.returncode == 0, r.stderr
    assert ("--container-image='registry#org/vllm-0.24.0-pair:a77e50ac64da' --container-mounts=/models:/models:ro "
            "python3 -m vllm.entrypoints.cli.main serve /tmp/toolkit-pair/target") in r.stdout
    two = vllm_matrix(tmp_path, PROCESS.replace("gpus_per_arm: 8", "gpus_per_arm: 2, nodes: 2"), "vp2")
    r = run_cli("validate", str(two))
    assert r.returncode == 2 and "only SGLang spans nodes" in r.stderr and "engine 'vllm' runs on one node" in r.stderr
