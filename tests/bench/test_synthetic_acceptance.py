"""The Matrix's `synthetic_acceptance:` (docs/bench.md#synthetic-acceptance): each speculative arm runs as one
arm per forced acceptance length, its servers started with SGLang's simulate knobs; the length is in the
manifest, the cell keys and every output that shows acceptance or a speed-up, and a forced acceptance is never
compared with a real one."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.helpers import FAKE_SGLANG, write_matrix
from toolkit.results import compact

SG_ENV = textwrap.dedent("""\
    kind: Environment
    name: sg-fake
    engine: sglang
    base_image: nvidia/cuda:13.0.1-devel-ubuntu24.04
    sglang: {version: 0.5.17}
    servers:
      baseline: &b
        model-path: /models/target
        served-model-name: target
        load-format: dummy
      eagle3:
        <<: *b
        speculative-algorithm: EAGLE3
        speculative-draft-model-path: /models/draft
        speculative-num-steps: 3
        speculative-eagle-topk: 1
        speculative-num-draft-tokens: 4
        max-running-requests: 8
      plain:
        <<: *b
        mem-fraction-static: 0.7
    """)


def _target() -> str:
    return json.dumps({"kind": "local", "launcher": "process", "python": sys.executable,
                       "env": {"PYTHONPATH": str(FAKE_SGLANG)}})


def sg_matrix(tmp: Path, extra: str = "synthetic_acceptance: [2.0, 3.0]\n", arms: str = "[baseline, eagle3, plain]",
              target: str | None = None) -> Path:
    return write_matrix(tmp, f"""\
        arms: {arms}
        target: {target or _target()}
        workloads: [coding]
        concurrency: [1, 2]
        output_len: 12
        requests: 6
        warmup: 1
        """ + extra, env=SG_ENV)


def test_keys_name_the_level() -> None:
    from toolkit.schema.keys import cell_key, synthetic_arm, synthetic_label

    assert synthetic_arm("eagle3", 2.0) == "eagle3-synacc2" and synthetic_arm("eagle3", 2.5) == "eagle3-synacc2p5"
    assert cell_key(synthetic_arm("eagle3", 2.5), "coding", 4) == "eagle3-synacc2p5__coding__c4__r0"
    assert cell_key(synthetic_arm("e", 2.0), "coding", 4) != cell_key(synthetic_arm("e", 3.0), "coding", 4)
    assert synthetic_label(2.5) == "synthetic acc 2.5" and synthetic_label(None) == ""


def test_plan_expands_speculative_arms_only(tmp_path: Path) -> None:
    from toolkit.bench.plan import plan_target
    from toolkit.specs import load_spec

    plan = plan_target(load_spec(sg_matrix(tmp_path)))
    assert plan.m.arms == ["baseline", "eagle3-synacc2", "eagle3-synacc3", "plain"]
    assert plan.m.baseline_arm == "baseline" and plan.declared.arms == ["baseline", "eagle3", "plain"]
    assert plan.preset_name("eagle3-synacc3") == "eagle3" and plan.preset_name("plain") == "plain"
    assert plan.synthetic_level("eagle3-synacc2") == 2.0 and plan.synthetic_level("baseline") is None
    assert plan.synthetic_level("plain") is None
    env = plan.launcher_kwargs(plan.slots[0], "eagle3-synacc3", tmp_path).env
    assert env["SGLANG_SIMULATE_ACC_LEN"] == "3" and env["SGLANG_SIMULATE_ACC_METHOD"] == "match-expected"
    assert env["SGLANG_SIMULATE_ACC_TOKEN_MODE"] == "fixed" and env["PYTHONPATH"] == str(FAKE_SGLANG)
    base = plan.launcher_kwargs(plan.slots[0], "baseline", tmp_path).env
    assert not any(k.startswith("SGLANG_SIMULATE") for k in base)
    assert plan.request_params("eagle3-synacc2") == {}


def test_hand_set_simulate_env_is_labelled(tmp_path: Path) -> None:
    """SGLANG_SIMULATE_ACC_LEN set by hand in target.env (as an earlier H100 run did): still recorded as forced."""
    from toolkit.bench.plan import plan_target, synthetic_record
    from toolkit.specs import load_spec

    t = json.dumps({"kind": "local", "launcher": "process", "python": sys.executable,
                    "env": {"SGLANG_SIMULATE_ACC_LEN": "3.5"}})
    plan = plan_target(load_spec(sg_matrix(tmp_path, extra="", target=t)))
    assert plan.m.arms == ["baseline", "eagle3", "plain"]
    assert plan.synthetic_level("eagle3") == 3.5 and plan.synthetic_level("baseline") is None
    assert synthetic_record(plan, "eagle3").accept_len == 3.5


@pytest.mark.parametrize("extra, env, words", [
    ("synthetic_acceptance: [2.0, 0.5]\n", SG_ENV, "must be >= 1"),
    ("synthetic_acceptance: [2.0, .inf]\n", SG_ENV, "finite"),
    ("synthetic_acceptance: [2.0, 2]\n", SG_ENV, "listed twice"),
    ("synthetic_acceptance: [2.0]\n", None, "transformers engine"),
])
def test_validate_refuses(tmp_path: Path, extra: str, env: str | None, words: str) -> None:
    if env is None:  # the embedded CPU engine has no knob to force acceptance
        m = write_matrix(tmp_path, "arms: [baseline, ngram]\nworkloads: [coding]\nconcurrency: [1]\nrequests: 4\n" + extra)
    else:
        m = sg_matrix(tmp_path, extra=extra)
    r = run_cli("validate", str(m))
    assert r.returncode == 2, r.stdout + r.stderr
    assert words in r.stderr and f"{m}:" in r.stderr and "synthetic_acceptance" in r.stderr


def test_validate_refuses_without_a_speculative_arm(tmp_path: Path) -> None:
    r = run_cli("validate", str(sg_matrix(tmp_path, arms="[baseline, plain]")))
    assert r.returncode == 2 and "speculative" in r.stderr


def test_validate_accepts(tmp_path: Path) -> None:
    r = run_cli("validate", str(sg_matrix(tmp_path)))
    assert r.returncode == 0, r.stderr


def test_matrix_end_to_end(tmp_path: Path) -> None:
    """Through the CLI against the fake launch_server: the simulate knobs reach each synthetic server, the
    acceptance it reports is the forced one, and the archive, show, --json and diff say synthetic."""
    m = sg_matrix(tmp_path, arms="[baseline, eagle3]")
    res = tmp_path / "results"
    r = run_cli("bench", "matrix", str(m), "--results", str(res), "--json", timeout=300,
                env={"TOOLKIT_CACHE_DIR": str(tmp_path / "cache")})
    assert r.returncode == 0, r.stderr[-3000:]
    run = Path(json.loads(r.stdout)["run"])
    manifest = json.loads((run / "manifest.json").read_text())
    summary = json.loads(compact.read_text(run / "summary.json"))
    assert list(manifest["arms"]) == ["baseline", "eagle3-synacc2", "eagle3-synacc3"]
    rec = manifest["arms"]["eagle3-synacc3"]["synthetic_acceptance"]
    assert rec == {"of": "eagle3", "accept_len": 3.0, "env": {"SGLANG_SIMULATE_ACC_LEN": "3",
                   "SGLANG_SIMULATE_ACC_METHOD": "match-expected", "SGLANG_SIMULATE_ACC_TOKEN_MODE": "fixed"}}
    assert "synthetic_acceptance" not in manifest["arms"]["baseline"]
    assert manifest["matrix"]["resolved"]["arms"] == ["baseline", "eagle3"]
    # the server process saw the variable (the fake prints what it read, as its log is archived)
    assert "SGLANG_SIMULATE_ACC_LEN=2" in compact.read_text(run / "logs" / "eagle3-synacc2.log")
    assert "SGLANG_SIMULATE_ACC_LEN" not in compact.read_text(run / "logs" / "baseline.log")
    cells = {c["arm"] + "/" + str(c["concurrency"]): c for c in summary["cells"]}
    assert len(cells) == 6 and all(c["status"] == "ok" for c in cells.values())
    assert cells["eagle3-synacc3/1"]["synthetic_acceptance"] == 3.0
    assert cells["baseline/1"]["synthetic_acceptance"] is None
    assert compact.exists(run / "cells" / "eagle3-synacc2__coding__c1__r0.json")
    sp = {(s["arm"], s["concurrency"]): s for s in summary["derived"]["speedups"]}
    assert sp[("eagle3-synacc2", 1)]["synthetic_acceptance"] == 2.0 and len(sp) == 4

    shown = run_cli("results", "show", str(run))
    assert shown.returncode == 0, shown.stderr
    assert "eagle3-synacc3 [synthetic acc 3]" in shown.stdout and "(synthetic)" in shown.stdout
    assert "forced to 3 by SGLANG_SIMULATE_ACC_LEN" in shown.stdout
    js = json.loads(run_cli("results", "show", str(run), "--json").stdout)
    assert js["cells"]["eagle3-synacc2__coding__c2__r0"]["synthetic_acceptance"] == 2.0
    assert js["cells"]["eagle3-synacc2__coding__c2__r0"]["metrics"]["accept_length"]["mean"] == pytest.approx(2.0)
    assert {r["synthetic_acceptance"] for r in js["derived"]["speedups"]} == {2.0, 3.0}


def test_diff_never_compares_forced_with_real(tmp_path: Path) -> None:
    """The same cell forced in one run and real in the other: not comparable, with the reason."""
    from toolkit.results.diff import _comparable

    class A:
        def __init__(self, level):
            from toolkit.schema.records import CellSummary

            self.cell_map = {"k": CellSummary(arm="eagle3", domain="coding", concurrency=1, output_len=8,
                                              workload_hash="h", synthetic_acceptance=level)}

    ok, why, _ = _comparable(A(None), ["k"], A(2.0), ["k"])
    assert not ok and "real vs synthetic acc 2" in why
    ok, why, _ = _comparable(A(2.0), ["k"], A(3.0), ["k"])
    assert not ok and "synthetic acc 2 vs synthetic acc 3" in why
    assert _comparable(A(2.0), ["k"], A(2.0), ["k"])[0] and _comparable(A(None), ["k"], A(None), ["k"])[0]
