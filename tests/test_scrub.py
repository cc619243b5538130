"""One scrubber, two callers: every rule holds for a run archive (toolkit.results.archive) and for a
provisioning run folder (toolkit.scrub.scrub_run_dir), and what is not a secret is kept by both. Exact:
real SGLang logs (tests/data/sglang/, the committed results/sglang-h200*/ logs) pass byte for byte, and
every secret planted in them goes while every counter stays."""

from __future__ import annotations

from tests.helpers import archive_bytes

import gzip
import json
import re
from pathlib import Path

import pytest

from toolkit.results.archive import ArchiveWriter
from toolkit.scrub import MASK, is_secret_key, scrub, scrub_run_dir, scrub_text

ROOT = Path(__file__).resolve().parents[1]
# a server log written by benchmarks/sglang_h200/record.py straight from SGLang 0.5.17 (never scrubbed)
RAW_LOG = ROOT / "results" / "sglang-h200-threshold" / "20261202T190149Z" / "eagle3-threshold.log"
REAL_TEXTS = sorted([*(ROOT / "tests" / "data" / "sglang").glob("*.txt"), RAW_LOG,
                     *(ROOT / "results").glob("sglang-h200*/*/logs/*.log*")])  # .log.gz: compacted
COUNTER = re.compile(r"#[a-z-]+: \d+")

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
    "password in a URL": ("pushing to https://ci:Pa55w0rd-x@registry.example/v2", "Pa55w0rd-x", {}),
    "generic name, credential value": ("GET /v1/models?token=4f9a1c2e7b3d&x=1", "4f9a1c2e7b3d", {}),
    "JSON field": ('{"model": "m", "api_key": "live-8c1e2a9f"}', "live-8c1e2a9f", {}),
}
KEPT = ["--speculative-num-draft-tokens 4", "max_tokens=16", "api_key_env: OPENAI_API_KEY",
        "tokenizer_path=/models/tok", "--port 30000", "eos_token: </s>", "#token: 9257", "#new-token: 14",
        "#cached-token: 0", "#pending-token: 3", "time to first token: the wait", "key: the", "Bearer tokens",
        "[--api-key API_KEY]", "token usage: 0.00", "api_key=None"]


def archive_caller(tmp: Path, text: str, env: dict, monkeypatch) -> bytes:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    w = ArchiveWriter.create(tmp, "m", {"notes": text, "arms": {"a": {"command": ["sh", "-c", text]}},
                                        "environment": {"resolved": {"env": {"HF_TOKEN": "hf-env-value-1", **env}}}})
    w.write_file("logs/a.log", text + "\n")
    w.finalize("complete", derived={"note": text})
    return archive_bytes(w.path)


def provision_caller(tmp: Path, text: str, env: dict, monkeypatch) -> bytes:  # noqa: ARG001
    run = tmp / "run"
    (run / "artifacts" / "ansible" / "job_events").mkdir(parents=True)
    (run / "artifacts" / "ansible" / "command").write_text(json.dumps(
        {"command": ["ansible-playbook", "site.yml"], "env": {"HF_TOKEN": "hf-env-value-1", "PATH": "/usr/bin"}}))
    (run / "artifacts" / "ansible" / "stdout").write_text(text + "\n")
    (run / "artifacts" / "ansible" / "job_events" / "1.json").write_text(json.dumps({"stdout": text}))
    scrub_run_dir(run, {"HOME": "/root", **env})
    return archive_bytes(run)


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


@pytest.mark.parametrize("path", REAL_TEXTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_real_sglang_text_passes_byte_for_byte(path):
    raw = path.read_bytes()
    text = (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode(errors="surrogateescape")
    assert scrub_text(text) == text


def test_real_sglang_json_passes_unchanged():
    for path in sorted((ROOT / "tests" / "data" / "sglang").glob("*.json")):
        data = json.loads(path.read_text())
        assert scrub(data) == data, path.name


def test_secrets_planted_in_a_real_log_go_and_every_counter_stays():
    lines = RAW_LOG.read_text().splitlines(keepends=True)
    counters = COUNTER.findall("".join(lines))
    assert len(counters) > 200  # the log is the real thing: #new-token, #cached-token, #token, ...
    secrets = {"api": "tk-live-" + "9f3c" * 6, "hf": "hf_" + "AbC1" * 8, "url": "s3cr3t-pw",
               "bearer": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJlLXNpZ25hdHVyZQ",
               "pem": "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU", "env": "v4lue-of-the-var"}
    args = next(i for i, ln in enumerate(lines) if " api_key=None" in ln)
    planted = dict(enumerate(lines))
    planted[args] = lines[args].replace(" api_key=None", f" api_key='{secrets['api']}'")
    extra = [f"[2026-12-02 19:02:29] download with HF_TOKEN={secrets['hf']}\n",
             f"[2026-12-02 19:02:29] weights from https://bob:{secrets['url']}@mirror.example/x\n",
             f"[2026-12-02 19:02:29] header Authorization: Bearer {secrets['bearer']}\n",
             f"{PEM}\n", f"[2026-12-02 19:02:29] connected as {secrets['env']}\n"]
    out = scrub_text("".join([*planted.values(), *extra]), [secrets["env"]])
    for s in secrets.values():
        assert s not in out
    assert COUNTER.findall(out) == counters  # every counter, in order, byte for byte
    got = out.splitlines(keepends=True)
    assert [ln for i, ln in enumerate(got[:len(lines)]) if i != args] == [ln for i, ln in enumerate(lines) if i != args]
    assert "api_key='***'" in got[args] and got[args].count(MASK) == 1


def test_the_api_key_env_variable_value_goes_whatever_its_name(tmp_path, monkeypatch):
    """A Matrix target's `api_key_env` names the variable; its value is masked although the name looks
    like no secret."""
    monkeypatch.setenv("GATEWAY_CRED", "gw-1x2y3z-opaque")
    w = ArchiveWriter.create(tmp_path, "m", {"matrix": {"resolved": {"target": {"kind": "external",
                                                                              "api_key_env": "GATEWAY_CRED"}}}})
    w.write_file("logs/a.log", "401 for key gw-1x2y3z-opaque\n")
    w.finalize("complete", derived={"note": "sent gw-1x2y3z-opaque"})
    blob = archive_bytes(w.path)
    assert b"gw-1x2y3z-opaque" not in blob and b"GATEWAY_CRED" in blob
