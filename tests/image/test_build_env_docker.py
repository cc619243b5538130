"""Real builds through the Docker engine, on the local debootstrap base (no registry needed).

Build records go to a per-module cache dir (TOOLKIT_CACHE_DIR); the SGLang wheel cache is shared.
The first build runs with --no-cache, so it goes through the engine layer by layer even when the
developer built the test env before.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from buildutil import EAGLE, TEST_ENV, THRESHOLD_PATCH, toolkit, write_env


from toolkit.settings import cache_dir

pytestmark = pytest.mark.slow
NAME = "sglang-cpu-test-onebyte"


@pytest.fixture(scope="module")
def cache_env(tmp_path_factory) -> dict:
    d = tmp_path_factory.mktemp("toolkit-cache")
    shared = cache_dir() / "sglang"
    shared.mkdir(parents=True, exist_ok=True)
    (d / "sglang").symlink_to(shared)
    return {"TOOLKIT_CACHE_DIR": str(d)}


def build_json(spec: Path, cache_env: dict, *extra: str) -> dict:
    r = toolkit("build", "env", str(spec), "--json", *extra, env=cache_env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def built(base_image, cache_env, docker_client) -> dict:
    res = build_json(TEST_ENV, cache_env, "--no-cache")  # every layer through the engine, even locally
    # the rebuild untagged the test image of an earlier run: drop only those
    docker_client.images.prune(filters={"dangling": True, "label": "dev.toolkit.spec-name=sglang-cpu-test"})
    return res


def test_first_build_goes_through_the_engine_with_labels_and_record(built, cache_env, docker_client):
    assert built["cache_hit"] is False
    rec = built["record"]
    h = built["plan"]["spec_hash"]
    labels = docker_client.images.get(rec["image_id"]).labels
    assert labels["dev.toolkit.spec-hash"] == h
    assert labels["dev.toolkit.sglang-version"] == labels["org.opencontainers.image.version"] == "0.5.23"
    assert THRESHOLD_PATCH.name in labels["dev.toolkit.patch.1"]
    assert list(rec["patches"].values()) == [built["preflight"]["patches"][0]["sha256"]]
    assert labels["dev.toolkit.patch.1"].endswith(list(rec["patches"].values())[0])
    # the image was patched as strictly as preflight: no fuzz allowed, none used, no fuzz label
    assert rec["patch_fuzz"] == {built["preflight"]["patches"][0]["name"]: {"allowed": 0, "hunks": []}}
    assert "dev.toolkit.patch.1.fuzz" not in labels
    assert len(labels["org.opencontainers.image.revision"].split("-")[0]) == 40
    assert labels["org.opencontainers.image.created"].endswith("Z")
    assert labels["org.opencontainers.image.base.name"] == "toolkit/base:bookworm"
    assert rec["tags"] == [f"toolkit/sglang-cpu-test:{h[:12]}", "toolkit/sglang-cpu-test:latest"]
    smoke = rec["smoke"]
    assert smoke["failures"] == [] and smoke["sglang_version"] == "0.5.23"
    assert smoke["patched_files_checked"] == 3
    saved = Path(cache_env["TOOLKIT_CACHE_DIR"]) / "builds" / f"{h}.json"
    assert json.loads(saved.read_text())["image_id"] == rec["image_id"]
    assert "Step 1/" in Path(rec["log"]).read_text()


def test_patched_field_exists_in_the_image(built, docker_client):
    code = (
        "import importlib.util as u, pathlib as p\n"
        "pkg = p.Path(u.find_spec('sglang').origin).parent\n"
        "src = (pkg / 'srt/arg_groups/fields/spec.py').read_text()\n"
        "print('FIELD' if 'speculative_disable_batch_threshold: A[' in src else 'MISSING')\n"
        "import os; print('CA-LEFT' if os.path.exists('/usr/local/share/toolkit/toolkit-build-ca.crt') "
        "or 'PIP_CERT' in os.environ else 'CA-GONE')\n"
    )
    out = docker_client.containers.run(built["record"]["image_id"], ["python", "-c", code], remove=True,
                                       network_mode="none").decode()
    assert "FIELD" in out and "CA-GONE" in out


def test_second_build_of_unchanged_spec_is_a_cache_hit(built, cache_env):
    again = build_json(TEST_ENV, cache_env)
    assert again["cache_hit"] is True
    assert again["record"]["image_id"] == built["record"]["image_id"]
    assert again["plan"]["spec_hash"] == built["plan"]["spec_hash"]


def test_one_changed_byte_in_a_patch_changes_the_hash_and_rebuilds(built, cache_env, tmp_path, docker_client):
    text = THRESHOLD_PATCH.read_text()
    spec = write_env(tmp_path, {"threshold.patch": text}, servers={"eagle3-dynamic": dict(EAGLE)}, name=NAME)
    first = build_json(spec, cache_env)
    changed = text.replace("Written by", "written by", 1)  # one byte, in the header
    assert sum(a != b for a, b in zip(text, changed)) == 1 and len(changed) == len(text)
    write_env(tmp_path, {"threshold.patch": changed}, servers={"eagle3-dynamic": dict(EAGLE)}, name=NAME)
    second = build_json(spec, cache_env)
    try:
        assert second["plan"]["spec_hash"] != first["plan"]["spec_hash"]
        assert second["cache_hit"] is False
        assert second["record"]["image_id"] != first["record"]["image_id"]
        assert build_json(spec, cache_env)["cache_hit"] is True
    finally:
        for res in (first, second):
            for tag in res["record"]["tags"]:
                if docker_client.images.list(name=tag):
                    docker_client.images.remove(tag, force=True)


def test_build_record_is_found_by_hash_and_prefix(built, cache_env, monkeypatch):
    from toolkit.image.records import find_build_record

    monkeypatch.setenv("TOOLKIT_CACHE_DIR", cache_env["TOOLKIT_CACHE_DIR"])
    h = built["plan"]["spec_hash"]
    assert find_build_record(h).image_id == built["record"]["image_id"]
    assert find_build_record(h[:12]).spec_hash == h
    assert find_build_record("0" * 64) is None


def test_missing_local_base_says_how_to_make_it(tmp_path, cache_env, docker_client):
    spec = write_env(tmp_path, {"threshold.patch": THRESHOLD_PATCH.read_text()})
    spec.write_text(spec.read_text().replace("toolkit/base:bookworm", "toolkit/base:no-such-suite"))
    r = toolkit("build", "env", str(spec), env=cache_env)
    assert r.returncode == 2, r.stderr
    assert "toolkit build base --name toolkit/base:no-such-suite" in r.stderr
    assert f"{spec}:" in r.stderr


def test_image_without_record_is_adopted_not_rebuilt(built, tmp_path, docker_client):
    """Same spec hash, empty cache dir (no build record): preflight, then the labelled image is reused."""
    other = tmp_path / "cache"
    other.mkdir()
    (other / "sglang").symlink_to(cache_dir() / "sglang")
    res = build_json(TEST_ENV, {"TOOLKIT_CACHE_DIR": str(other)})
    assert res["cache_hit"] is True and res["record"]["adopted"] is True
    assert res["record"]["image_id"] == built["record"]["image_id"]
    assert res["record"]["smoke"]["failures"] == []
    assert (other / "builds" / f"{built['plan']['spec_hash']}.json").is_file()
