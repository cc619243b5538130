"""Manifest and Derived: every shape a version-1 archive carries reads into the one typed model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolkit.errors import ToolkitError
from toolkit.results.compact import read_text
from toolkit.schema.keys import FORMAT, SCHEMA_VERSION
from toolkit.schema.manifest import Manifest, load_derived, load_manifest, load_summary

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = sorted(p.parent for p in ROOT.glob("results/*/*/manifest.json"))


def _v1(**body) -> dict:
    return {"format": FORMAT, "schema_version": 1, "run_id": "r", "matrix_name": "m", **body}


def test_older_writers_shapes_map_to_the_model():
    fp = {"hostname": "h1", "gpus": [{"name": "H200"}], "driver": "580"}
    m = load_manifest(_v1(
        toolkit_version="0.0.9", git_revision="abc",
        environment={"name": "e", "spec": {"engine": "sglang"}}, matrix={"name": "m", "spec": {"baseline": "b"}},
        image={"image_id": "sha256:1", "tags": ["t:1"]}, arms={"b": {"server_args": {"tp": 8}}},
        host=fp, hosts={"h2": {"hostname": "h2"}}, workloads={"chat": "f" * 64}, future_field={"kept": True}))
    assert m.toolkit.version == "0.0.9" and m.toolkit.git_sha == "abc"
    assert m.environment.resolved == {"engine": "sglang"} and m.matrix.resolved["baseline"] == "b"
    assert m.build.image == "t:1" and m.arms["b"].preset == {"tp": 8}
    assert m.host.controller.hostname == "h1" and m.host.primary.hostname == "h2"
    assert m.workloads["chat"].hash == "f" * 64
    assert m.model_extra == {"future_field": {"kept": True}}  # what a reader does not know survives


def test_the_current_shape_wins_over_leftovers():
    m = load_manifest(_v1(toolkit={"version": "1", "git_sha": "new"}, toolkit_version="0", git_revision="old",
                          host={"controller": {"hostname": "c"}, "hosts": {}}))
    assert (m.toolkit.version, m.toolkit.git_sha) == ("1", "new") and m.host.primary.hostname == "c"


def test_methodology_under_any_old_key_and_as_strings():
    for key in ("methodology", "checks", "warnings", "methodology_checks"):
        d = load_derived({key: [{"check": "no-warmup", "severity": "warning", "message": "x"}, "plain words"]})
        assert [c.message for c in d.methodology] == ["x", "plain words"]
    assert load_derived(None).methodology == [] and load_derived({}).timing.cells_s == 0.0


def test_versions_outside_the_read_range_are_refused_with_what_to_do(tmp_path):
    with pytest.raises(ToolkitError, match="newer than this toolkit reads") as e:
        load_manifest(_v1() | {"schema_version": SCHEMA_VERSION + 1}, tmp_path / "manifest.json")
    assert "upgrade" in e.value.hint
    with pytest.raises(ToolkitError, match="older than any"):
        load_manifest(_v1() | {"schema_version": 0})
    with pytest.raises(ToolkitError, match="not a toolkit run archive"):
        load_manifest({"schema_version": 1})


def test_a_mistyped_field_names_the_file_and_the_field(tmp_path):
    with pytest.raises(ToolkitError, match=r"manifest.json: slots.0.name") as e:
        load_manifest(_v1(slots=[{"arms": ["a"]}]), tmp_path / "manifest.json")
    assert e.value.file == tmp_path / "manifest.json"


def test_slurm_jobs_read_from_every_shape():
    # runs on other targets, and Slurm runs written before the field, carry none
    assert load_manifest(_v1()).slurm is None
    # a Slurm block without `loadgen`: written when the load generator could only run on the submitting host
    old = load_manifest(_v1(slurm={"jobs": [{"job_id": "7", "arm": "b"}]}))
    assert old.slurm.loadgen == "submit-host" and old.slurm.scripts == {}
    assert (old.slurm.jobs[0].node, old.slurm.jobs[0].launch, old.slurm.jobs[0].steps) == (None, 0, {})
    new = load_manifest(_v1(slurm={"loadgen": "job-step", "scripts": {"b": "#!/bin/bash\n"}, "jobs": [
        {"job_id": "8", "arm": "b", "node": "n1", "gpus": "0,1", "state": "CANCELLED on n1",
         "steps": {"b__chat__c1__r0": "8.0"}}]}))
    assert new.slurm.jobs[0].steps == {"b__chat__c1__r0": "8.0"} and new.slurm.scripts["b"].startswith("#!")
    with pytest.raises(ToolkitError, match=r"slurm.jobs.0.job_id"):
        load_manifest(_v1(slurm={"jobs": [{"arm": "b"}]}))


def test_the_writer_stores_only_what_was_set():
    assert Manifest(baseline="b").written() == {"baseline": "b"}


@pytest.mark.parametrize("run", COMMITTED, ids=[f"{p.parent.name}/{p.name}" for p in COMMITTED])
def test_every_committed_archive_reads(run):
    m = load_manifest(json.loads((run / "manifest.json").read_text()), run / "manifest.json")
    s = load_summary(json.loads(read_text(run / "summary.json")), run / "summary.json")  # summary.json.gz: compacted
    assert m.run_id == run.name and m.matrix.name and m.environment.hash
    assert m.host.primary.hostname and set(m.arms) and m.slots
    assert s.status in ("complete", "partial", "failed") and len(s.cells) == s.derived.cells_done
    assert s.derived.methodology and all(c.severity in ("warning", "error") for c in s.derived.methodology)


def test_a_launch_record_reads_stops_and_start_ups_of_every_age():
    """Before issue 29's timing a stop held signals, warnings and exit code (or nothing), and a launch no
    start-up phases: both read, with the new times empty."""
    d = load_derived({"launches": {"a": [
        {"arm": "a", "stop": {}},
        {"arm": "a", "launch": 1, "stop": {"signals": ["SIGINT to the leader"], "warnings": [], "exit_code": 0}},
        {"arm": "a", "launch": 2, "startup_phases": {"first_line": 18.9, "ready": 49.9},
         "stop": {"signals": ["SIGINT to the leader"], "exit_code": 0, "leader_exit_s": 1.1, "group_empty_s": 3.2}}]}})
    old, older, new = d.launches["a"]
    assert old.stop.signals == [] and old.stop.leader_exit_s is None and old.startup_phases is None
    assert older.stop.exit_code == 0 and older.stop.group_empty_s is None
    assert new.stop.leader_exit_s == 1.1 and new.stop.group_empty_s == 3.2 and new.startup_phases["ready"] == 49.9
