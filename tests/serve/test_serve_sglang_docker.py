"""SGLangDockerLauncher up to the GPU: a container from an image with a fake `sglang.launch_server`
(built FROM the local debootstrap base image) starts, runs exactly the preset's command line, streams
logs, reports /server_info, stops and is removed; a crash during start fails fast with its log."""

from __future__ import annotations

import json
import time

import pytest

from tests.helpers import FAKE_SGLANG
from toolkit.errors import ToolFailure
from toolkit.serve import SGLangDockerLauncher, free_port
from toolkit.serve.sglang import LABEL, render_sglang_args

IMAGE = "toolkit-test/fake-sglang:1"
ULIMITS = {"stack": 67108864}  # memlock -1 (the default) needs privileges this engine lacks


@pytest.fixture(scope="session")
def fake_sglang_image(docker_client, base_image):
    docker_client.images.build(path=str(FAKE_SGLANG), tag=IMAGE, network_mode="host", rm=True)
    return IMAGE


def _preset(port: int) -> dict:
    return {"model-path": "/models/target", "tp-size": 8, "trust-remote-code": True, "host": "127.0.0.1",
            "port": port, "speculative-algorithm": "EAGLE3", "mem-fraction-static": 0.85,
            "enable-torch-symm-mem": False, "cuda-graph-bs": [1, 2, 4]}


def test_render_args_exactly():
    assert render_sglang_args({"tp-size": 8, "trust-remote-code": True, "x": False, "bs": [1, 2]}) == \
        ["--tp-size", "8", "--trust-remote-code", "--bs", "1", "2"]


@pytest.mark.slow
def test_container_runs_exactly_the_preset(docker_client, fake_sglang_image, tmp_path):
    port = free_port()
    srv = SGLangDockerLauncher(fake_sglang_image, _preset(port), gpus=None, shm_size="1g", ulimits=ULIMITS, stop_timeout_s=2,
                               mounts={str(tmp_path): "/models"}, log_path=tmp_path / "server.log")
    with srv:
        info = srv.info().model_dump()
        c = docker_client.containers.get(info["container"])
        assert c.attrs["HostConfig"]["IpcMode"] == "host"
        assert c.attrs["HostConfig"]["ShmSize"] == 1 << 30
        assert c.labels[LABEL] == "1"
        assert any(m["Destination"] == "/models" for m in c.attrs["Mounts"])
        expected = ["python3", "-m", "sglang.launch_server", "--model-path", "/models/target", "--tp-size", "8",
                    "--trust-remote-code", "--host", "127.0.0.1", "--port", str(port), "--speculative-algorithm",
                    "EAGLE3", "--mem-fraction-static", "0.85", "--cuda-graph-bs", "1", "2", "4"]
        assert c.attrs["Config"]["Cmd"] == expected == info["command"]
        # the process inside saw exactly these arguments
        seen = [ln for ln in srv.log_tail(50).splitlines() if ln.startswith("FAKE-SGLANG-ARGV ")]
        assert json.loads(seen[0].split(" ", 1)[1]) == expected[3:]
        assert info["engine_version"] == "0.5.17-fake" and info["max_running_requests"] == 48
        # logs stream: a request made now shows up in the stream
        from toolkit.serve.base import http_get

        assert http_get(srv.base_url + "/health")[0] == 200
        for line in srv.stream_logs():
            if line.startswith("request") and "/health" in line:
                break
        cid = c.id
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(x.id == cid for x in docker_client.containers.list(all=True)):
        time.sleep(0.2)
    assert not any(x.id == cid for x in docker_client.containers.list(all=True)), "container left behind"
    assert "FAKE-SGLANG-ARGV" in (tmp_path / "server.log").read_text()


@pytest.mark.slow
def test_container_crash_during_start_fails_fast(docker_client, fake_sglang_image, tmp_path):
    srv = SGLangDockerLauncher(fake_sglang_image, {**_preset(free_port()), "crash-after-start": True}, gpus=None,
                               shm_size="1g", ulimits=ULIMITS, stop_timeout_s=2, log_path=tmp_path / "server.log")
    t = time.monotonic()
    with pytest.raises(ToolFailure) as exc:
        srv.wait_healthy(timeout_s=120)
    assert time.monotonic() - t < 60
    assert "exited with code 7" in exc.value.message
    assert "simulated crash during start" in (exc.value.hint or "")
    srv.stop()
    assert not docker_client.containers.list(all=True, filters={"id": srv.container.id})
