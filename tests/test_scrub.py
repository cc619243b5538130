"""One scrubber, two callers: every rule holds for a run archive (toolkit.results.archive) and for a
provisioning run folder (toolkit.scrub.scrub_run_dir), and what is not a secret is kept by both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolkit.results.archive import ArchiveWriter
from toolkit.scrub import MASK, is_secret_key, scrub, scrub_run_dir

PEM = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\n-----END OPENSSH PRIVATE KEY-----"
# rule -> (text that carries a secret, the secret, extra environment variables)
RULES = {
    "name in text": ("ServerArgs(model_path='m', api_key='s3cr3t-value', port=30000)", "s3cr3t-value", {}),
    "name as KEY=value": ("launched with HF_TOKEN=plainvalue99 and password=hunter22", "hunter22", {}),
    "name as --flag value": ("python -m sglang.launch_server --api-key flagsecret77 --port 1", "flagsecret77", {}),
    "name as --flag=value": ("serve --hf-token=eqsecret55 --tp 8", "eqsecret55", {}),
    "value of a secret variable": ("connected as svc-7f3a9 to the gateway", "svc-7f3a9",
                                   {"MY_GATEWAY_KEY": "svc-7f3a9"}),
    "token shape": ("pulled with hf_" + "Q" * 30 + " from the hub", "hf_" + "Q" * 30, {}),
    "bearer": ("curl -H 'Authorization: Bearer abc.def-ghi' http://x", "abc.def-ghi", {}),
    "private key": (f"key:\n{PEM}\nend", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU", {}),
}
KEPT = ["--speculative-num-draft-tokens 4", "max_tokens=16", "api_key_env: OPENAI_API_KEY",
        "tokenizer_path=/models/tok", "--port 30000", "eos_token: </s>"]


def archive_caller(tmp: Path, text: str, env: dict, monkeypatch) -> bytes:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    w = ArchiveWriter.create(tmp, "m", {"notes": text, "arms": {"a": {"command": ["sh", "-c", text]}},
                                        "environment": {"resolved": {"env": {"HF_TOKEN": "hf-env-value-1", **env}}}})
    w.write_file("logs/a.log", text + "\n")
    w.finalize("complete", derived={"note": text})
    return b"".join(p.read_bytes() for p in w.path.rglob("*") if p.is_file())


def provision_caller(tmp: Path, text: str, env: dict, monkeypatch) -> bytes:  # noqa: ARG001
    run = tmp / "run"
    (run / "artifacts" / "ansible" / "job_events").mkdir(parents=True)
    (run / "artifacts" / "ansible" / "command").write_text(json.dumps(
        {"command": ["ansible-playbook", "site.yml"], "env": {"HF_TOKEN": "hf-env-value-1", "PATH": "/usr/bin"}}))
    (run / "artifacts" / "ansible" / "stdout").write_text(text + "\n")
    (run / "artifacts" / "ansible" / "job_events" / "1.json").write_text(json.dumps({"stdout": text}))
    scrub_run_dir(run, {"HOME": "/root", **env})
    return b"".join(p.read_bytes() for p in run.rglob("*") if p.is_file())


CALLERS = {"archive": archive_caller, "provision": provision_caller}


@pytest.mark.parametrize("caller", CALLERS)
@pytest.mark.parametrize("rule", RULES)
def test_each_rule_holds_for_both_callers(rule, caller, tmp_path, monkeypatch):
    text, secret, env = RULES[rule]
    blob = CALLERS[caller](tmp_path, text, env, monkeypatch)
    assert secret.encode() not in blob and b"hf-env-value-1" not in blob
    assert MASK.encode() in blob


@pytest.mark.parametrize("caller", CALLERS)
def test_what_is_no_secret_is_kept_by_both(caller, tmp_path, monkeypatch):
    blob = CALLERS[caller](tmp_path, " ; ".join(KEPT), {}, monkeypatch)
    for kept in KEPT:
        assert kept.encode() in blob or json.dumps(kept)[1:-1].encode() in blob, kept


def test_names():
    for name in ("HF_TOKEN", "api_key", "--api-key", "OPENAI_API_KEY", "password", "db-passphrase", "GPG_KEY",
                 "aws_secret_access_key", "Authorization", "session_cookie"):
        assert is_secret_key(name), name
    for name in ("input_tokens", "speculative-num-draft-tokens", "api_key_env", "eos_token", "tokenizer",
                 "SSH_AUTH_SOCK", "keyboard", "monkey", "max_running_requests"):
        assert not is_secret_key(name), name
    assert scrub(["python", "--api-key", "v1", "--port", "3"]) == ["python", "--api-key", MASK, "--port", "3"]
