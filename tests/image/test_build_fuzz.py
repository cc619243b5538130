"""Patches apply exactly or not at all: a hunk that applies only with fuzz fails preflight (exit 2) with the
patch, hunk, target file and line and the expected context beside the source's lines; `fuzz: N` on the patch
lets it through and the plan, the build record and the image labels say so. Against the real SGLang 0.5.23
source; the Docker side of the record is faked here (test_build_env_docker.py builds for real)."""

from __future__ import annotations

import json
import re

import yaml
from buildutil import ROOT, THRESHOLD_PATCH, line_of, write_env

NO_DOCKER = {"DOCKER_HOST": "unix:///nonexistent/toolkit-test-docker.sock"}
# the first context line of the speculative_hook.py hunk, changed: GNU patch would apply it with fuzz 1
EXPECTED = '"DP spec/prefill coordination requires single-layer EAGLE, EAGLE3 or DSPARK"'
DRIFTED = '"DP spec/prefill coordination requires EAGLE"'


def fuzzy_patch() -> str:
    text = THRESHOLD_PATCH.read_text()
    fuzzy = text.replace(f"\n                 {EXPECTED}\n", f"\n                 {DRIFTED}\n", 1)
    assert fuzzy != text
    return fuzzy


def allow_fuzz(spec, n: int) -> None:
    data = yaml.safe_load(spec.read_text())
    data["sglang"]["patches"][0]["fuzz"] = n
    spec.write_text(yaml.safe_dump(data, sort_keys=False))


def test_patch_that_needs_fuzz_fails_check_with_where_and_what(cli, tmp_path):
    spec = write_env(tmp_path, {"fuzzy.patch": fuzzy_patch()})
    r = cli("build", "env", str(spec), "--check", env=NO_DOCKER)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and "no Docker engine" not in r.stderr
    hunk_line = line_of(tmp_path / "fuzzy.patch", "@@ -258,")
    assert f"fuzzy.patch:{hunk_line}:" in r.stderr, r.stderr          # the patch and its hunk header
    assert "`@@ -258,6 +258,9 @@`" in r.stderr
    m = re.search(r"needs fuzz 1 at line (\d+) of sglang/srt/arg_groups/speculative_hook\.py", r.stderr)
    assert m, r.stderr                                                 # the target file and line
    # the expected context beside the source's lines, the differing one marked
    row = next(ln for ln in r.stderr.splitlines() if DRIFTED[:30] in ln)
    assert f"{m.group(1)} !" in row and EXPECTED[:30] in row.split("|")[1]
    assert "fuzz: 1" in r.stderr  # the hint names the opt-in


def test_opt_in_lets_it_through_and_is_recorded(cli, tmp_path):
    spec = write_env(tmp_path, {"fuzzy.patch": fuzzy_patch()})
    allow_fuzz(spec, 1)
    r = cli("build", "env", str(spec), "--check", "--json", "--flags", "static", env=NO_DOCKER)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    p = data["preflight"]["patches"][0]
    assert p["fuzz"] == 1
    fuzzed = [h for h in p["hunks"] if h["fuzz"]]
    assert fuzzed == [{"file": "sglang/srt/arg_groups/speculative_hook.py", "hunk": 1,
                       "header": "@@ -258,6 +258,9 @@", "line": fuzzed[0]["line"], "offset": 0, "fuzz": 1}]
    assert data["plan"]["patches"][0]["fuzz"] == 1
    assert any("applied with fuzz 1 (allowed by `fuzz: 1`)" in w for w in data["plan"]["warnings"])
    # the image is built as strictly: the Dockerfile runs patch with the spec's fuzz and labels it
    out = tmp_path / "ctx"
    assert cli("render", "env", str(spec), "-o", str(out)).returncode == 0
    dockerfile = (out / "Dockerfile").read_text()
    assert "patch --forward --batch -p2 --fuzz=1 -d" in dockerfile
    assert 'LABEL "dev.toolkit.patch.1.fuzz"="1"' in dockerfile
    # a spec asking for more than GNU patch's useful maximum is refused with the range
    allow_fuzz(spec, 4)
    r = cli("validate", str(spec))
    assert r.returncode == 2 and "from 0 to 3" in r.stderr, r.stderr


def test_shipped_patches_render_with_no_fuzz(cli, tmp_path):
    r = cli("render", "env", str(ROOT / "envs" / "sglang-cu13-blackwell.yaml"), "-o", str(tmp_path))
    assert r.returncode == 0, r.stderr
    dockerfile = (tmp_path / "Dockerfile").read_text()
    assert dockerfile.count("patch --forward --batch -p2 --fuzz=0 -d") == 2 and ".fuzz" not in dockerfile


def test_build_record_says_which_hunks_used_fuzz(tmp_path, monkeypatch):
    """build_env end to end with the Docker engine faked: the record carries the allowance and the hunks."""
    from toolkit import docker_api
    from toolkit.image import builder, smoke

    spec = write_env(tmp_path, {"fuzzy.patch": fuzzy_patch()})
    allow_fuzz(spec, 1)

    class Image:
        id = "sha256:" + "f" * 64
        labels: dict = {}

        def tag(self, repo, tag):
            pass

    class Client:
        class images:  # noqa: N801
            @staticmethod
            def get(ref):
                return Image()

    built, records = {}, []
    monkeypatch.setattr(docker_api, "client", lambda timeout=900: Client())
    monkeypatch.setattr(docker_api, "images_with_label", lambda client, key, value: [])

    def fake_build(client, spec_, rendered, plan, report, no_cache, log, on_step):
        built["dockerfile"] = rendered.dockerfile
        Image.labels = dict(re.findall(r'^LABEL "([^"]+)"="([^"]*)"$', rendered.dockerfile, re.M))
        return Image.id, 1.0, None, "2026-01-01T00:00:00Z", "unknown"

    monkeypatch.setattr(builder, "_build", fake_build)
    monkeypatch.setattr(builder, "find_build_record", lambda h: None)
    monkeypatch.setattr(builder, "write_build_record", records.append)
    monkeypatch.setattr(smoke, "run_smoke", lambda *a, **k: {"failures": []})
    result = builder.build_env(spec, flag_mode="static", log=lambda m: None)
    rec = records[0]
    assert rec is result["record"]
    assert rec["patch_fuzz"]["fuzzy.patch"]["allowed"] == 1
    assert [h["fuzz"] for h in rec["patch_fuzz"]["fuzzy.patch"]["hunks"]] == [1]
    assert rec["labels"]["dev.toolkit.patch.1.fuzz"] == "1"
    assert "--fuzz=1" in built["dockerfile"]
