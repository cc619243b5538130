"""The Matrix's `ignore_eos:` (docs/bench.md#ignore-eos): every request of every arm decodes exactly `output_len`
tokens, past end of sequence, so a surface whose synthetic arms never meet the target's end of sequence compares
the same work as its baseline. Sent and recorded only when true (the bodies and records of every other run stay
byte for byte what they were); refused on an engine that cannot ignore end of sequence."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.bench.test_synthetic_acceptance import SG_ENV, _target
from tests.conftest import ROOT, run_cli
from tests.helpers import write_matrix
from toolkit.loadgen import CellLoad
from toolkit.loadgen.client import build_body
from toolkit.schema.records import Prompt
from toolkit.specs import load_spec

PROMPT = Prompt(id="p0", domain="agentic", prompt="call a tool")
# the sampling record of every archived run so far, in its order (tests/bench/test_cell_load.py pins it too)
OLD_RECORD = {"api": "chat", "temperature": 0.0, "output_len": 12, "seed": 0, "warmup": 1, "requests": 4,
              "duration_s": None}


def _sg_matrix(tmp: Path, extra: str = "", env: str = SG_ENV, body: str = "") -> Path:
    return write_matrix(tmp, (body or textwrap.dedent(f"""\
        arms: [baseline, eagle3]
        target: {_target()}
        workloads: [agentic]
        concurrency: [1]
        output_len: 12
        requests: 4
        warmup: 1
        """)) + extra, env=env)


@pytest.mark.parametrize("api", ["chat", "completions", "generate"])
def test_the_body_carries_ignore_eos_only_when_set(api: str) -> None:
    plain = CellLoad(api=api, requests=1, output_len=41)
    assert "ignore_eos" not in json.dumps(build_body(plain, PROMPT, model="m"))  # every body as before
    body = build_body(CellLoad(api=api, requests=1, output_len=41, ignore_eos=True), PROMPT, model="m")
    if api == "generate":  # SGLang's /generate: in sampling_params, beside max_new_tokens
        assert body["sampling_params"] == {"max_new_tokens": 41, "temperature": 0.0, "ignore_eos": True}
        assert "ignore_eos" not in body
    else:  # a /v1 body: at its top level, SGLang's and vLLM's extension
        assert body["ignore_eos"] is True and body["max_tokens"] == 41
    if api == "generate":
        body["sampling_params"].pop("ignore_eos")
    else:
        body.pop("ignore_eos")
    assert body == build_body(plain, PROMPT, model="m")  # nothing else changed


def test_cellload_takes_it_from_the_matrix_and_records_it_only_when_set(tmp_path: Path) -> None:
    """CellLoad.of reads the Matrix field; the cell's `sampling` record holds `ignore_eos: true` after the fields
    archives have always had, and without it is that old record, byte for byte."""
    plain = load_spec(_sg_matrix(tmp_path)).model
    assert plain.ignore_eos is False and CellLoad.of(plain, 1).ignore_eos is False
    assert json.dumps(CellLoad.recorded(plain)) == json.dumps(OLD_RECORD)
    (tmp_path / "on").mkdir()
    on = load_spec(_sg_matrix(tmp_path / "on", "ignore_eos: true\n")).model
    assert CellLoad.of(on, 1).ignore_eos is True and CellLoad.of(on, 1).body_sampling()["ignore_eos"] is True
    assert CellLoad.recorded(on) == {**OLD_RECORD, "ignore_eos": True}
    assert list(CellLoad.recorded(on))[-1] == "ignore_eos"


def test_diff_reads_a_record_without_it_as_false() -> None:
    """A run that ignored end of sequence and one that did not are never compared; an imported run's empty record
    says nothing, so it is not made to say false."""
    from toolkit.results.diff import _comparable
    from toolkit.schema.records import CellSummary

    class A:
        def __init__(self, sampling):
            self.cell_map = {"k": CellSummary(arm="baseline", domain="agentic", concurrency=1, output_len=41,
                                              workload_hash="h", sampling=sampling)}

    on = {**OLD_RECORD, "ignore_eos": True}
    ok, why, _ = _comparable(A(OLD_RECORD), ["k"], A(on), ["k"])
    assert not ok and "ignore_eos False vs True" in why
    assert _comparable(A(on), ["k"], A(dict(on)), ["k"])[0]
    assert _comparable(A(OLD_RECORD), ["k"], A(OLD_RECORD), ["k"])[0]
    assert _comparable(A({}), ["k"], A(on), ["k"])[0]  # imported: nothing recorded, nothing to compare
    assert CellLoad.complete({}) == {} and CellLoad.complete(OLD_RECORD) == {**OLD_RECORD, "ignore_eos": False}


def test_engines_that_honour_it() -> None:
    from toolkit import engines

    assert {n: engines.get(n).ignore_eos for n in ("sglang", "vllm", "transformers")} == {
        "sglang": True, "vllm": True, "transformers": False}


def test_validate_refuses_it_on_the_embedded_engine(tmp_path: Path) -> None:
    """`transformers serve` answers 422 to a key outside its OpenAI parameters: the run would fail every request
    (or, had it been dropped, stop at end of sequence). Refused at the line, exit 2, no traceback."""
    m = write_matrix(tmp_path, "arms: [baseline, ngram]\nworkloads: [coding]\nconcurrency: [1]\nrequests: 4\n"
                               "ignore_eos: true\n")
    r = run_cli("validate", str(m))
    assert r.returncode == 2, r.stdout + r.stderr
    line = next(i for i, t in enumerate(m.read_text().splitlines(), 1) if t.startswith("ignore_eos"))
    assert f"{m}:{line}:" in r.stderr and "ignore_eos" in r.stderr and "engine transformers" in r.stderr
    assert "drop `ignore_eos:`" in r.stderr and "Traceback" not in r.stderr
    m.write_text(m.read_text().replace("ignore_eos: true", "ignore_eos: false"))
    assert run_cli("validate", str(m)).returncode == 0


def test_validate_refuses_an_arm_of_another_environment_on_the_embedded_engine(tmp_path: Path) -> None:
    """Engines as arms: an SGLang matrix with one arm served by the embedded engine is refused, naming that arm."""
    from tests.helpers import TINY_ENV

    (tmp_path / "cpu.yaml").write_text(TINY_ENV)
    m = _sg_matrix(tmp_path, "ignore_eos: true\n", body=textwrap.dedent(f"""\
        arms: [baseline, {{name: cpu-ngram, environment: cpu.yaml, preset: ngram}}]
        target: {_target()}
        workloads: [agentic]
        concurrency: [1]
        output_len: 12
        requests: 4
        """))
    r = run_cli("validate", str(m))
    assert r.returncode == 2 and "arm cpu-ngram" in r.stderr and "cpu.yaml" in r.stderr, r.stderr


def test_the_agentic_surface_matrix_validates() -> None:
    """benchmarks/pair_gpu/matrix-surface-agentic.yaml: every arm answers exactly the kept pair's mean agentic
    answer (41 tokens); it validates as every benchmark matrix does (tests/specs/test_spec_hash_render.py)."""
    path = ROOT / "benchmarks/pair_gpu/matrix-surface-agentic.yaml"
    r = run_cli("validate", str(path))
    assert r.returncode == 0, r.stderr
    m = load_spec(path).model
    assert m.name == "pair-surface-agentic" and m.ignore_eos is True and m.output_len == 41
    assert m.workloads == ["agentic"] and m.synthetic_acceptance == [2.0, 3.0, 4.0]
    assert m.concurrency == [1, 4, 16, 64] and m.duration_s == {1: 10, 4: 10, 16: 10, 64: 10}
    assert m.launches == 3 and m.warmup == "concurrency"


# -- end to end: the fake SGLang ends its answers at end of sequence after 5 tokens (--eos-after), as the real
# target's agentic answers end at ~41 of 128; under a forced acceptance the end never comes

EOS_ENV = SG_ENV.replace("    load-format: dummy\n", "    load-format: dummy\n    eos-after: 5\n")


@pytest.mark.parametrize("api", ["chat", "generate"])
def test_every_answer_has_output_len_tokens_end_to_end(tmp_path: Path, api: str) -> None:
    from toolkit.results.archive import open_archive
    from toolkit.results.diff import diff_runs

    runs = {}
    for name, extra in (("stops", ""), ("ignores", "ignore_eos: true\n")):
        d = tmp_path / name
        d.mkdir()
        m = _sg_matrix(d, f"api: {api}\nsynthetic_acceptance: [2.0]\n" + extra, env=EOS_ENV)
        r = run_cli("bench", "matrix", str(m), "--results", str(d / "results"), "--json", timeout=300,
                    env={"TOOLKIT_CACHE_DIR": str(tmp_path / "cache")})
        assert r.returncode == 0, r.stderr[-3000:]
        runs[name] = open_archive(json.loads(r.stdout)["run"])

    def tokens(run) -> dict[str, list[int]]:  # per run arm, every request's output tokens (warmup included)
        out: dict[str, list[int]] = {}
        for key, cell in run.cell_map.items():
            assert cell.status == "ok", cell.reason
            out.setdefault(cell.arm, []).extend(r.output_tokens for r in run.iter_records(key))
        return out

    # without it: the baseline stops at end of sequence, the synthetic arm never does (different work)
    stops = tokens(runs["stops"])
    assert set(stops) == {"baseline", "eagle3-synacc2"} and len(stops["baseline"]) >= 4
    assert set(stops["baseline"]) == {5} and set(stops["eagle3-synacc2"]) == {12}
    assert all("ignore_eos" not in c.sampling for c in runs["stops"].cells)
    # with it: every answer of every arm is exactly output_len, and every cell records it
    assert {arm: set(t) for arm, t in tokens(runs["ignores"]).items()} == {"baseline": {12}, "eagle3-synacc2": {12}}
    assert all(c.sampling["ignore_eos"] is True for c in runs["ignores"].cells)
    parted = diff_runs(runs["stops"], runs["ignores"])
    assert parted.cells and all(not c.comparable and "ignore_eos False vs True" in c.reason for c in parted.cells)


# -- a preset's `sampling_params:` under api chat: the server drops it unread (SGLang's ChatCompletionRequest has
# a top-level ignore_eos and no sampling_params field; the pair's and the 8B Environment's ignore_eos never applied)

DROPPED_ENV = SG_ENV + "request_params:\n  baseline: {sampling_params: {ignore_eos: true}}\n"


@pytest.mark.parametrize("api", ["chat", "completions", "generate"])
def test_validate_says_a_sampling_params_envelope_is_dropped_outside_generate(tmp_path: Path, api: str) -> None:
    m = _sg_matrix(tmp_path, f"api: {api}\n", env=DROPPED_ENV)
    r = run_cli("validate", str(m))
    assert r.returncode == 0, r.stderr
    said = [ln for ln in r.stderr.splitlines() if "sampling_params" in ln]
    if api == "generate":  # /generate reads the envelope: its keys reach the sampler (client.build_body)
        assert said == []
        assert build_body(CellLoad(api="generate", requests=1, request_params={"sampling_params": {"ignore_eos": True}}),
                          PROMPT)["sampling_params"]["ignore_eos"] is True
    else:
        assert len(said) == 1 and "arm baseline:" in said[0] and "(ignore_eos: True)" in said[0]
        assert f"over api {api} the server reads sampling parameters at the top level" in said[0]


def test_a_run_records_the_dropped_envelope_as_a_methodology_check(tmp_path: Path) -> None:
    m = _sg_matrix(tmp_path, "api: chat\n", env=DROPPED_ENV)
    r = run_cli("bench", "matrix", str(m), "--results", str(tmp_path / "results"), "--json", timeout=300,
                env={"TOOLKIT_CACHE_DIR": str(tmp_path / "cache")})
    assert r.returncode == 0, r.stderr[-3000:]
    from toolkit.results.archive import open_archive

    checks = [c for c in open_archive(json.loads(r.stdout)["run"]).derived.methodology
              if c.check == "request-param-dropped"]
    assert len(checks) == 1 and checks[0].severity == "warning" and checks[0].message.startswith("arm baseline:")


def test_no_committed_environment_declares_an_envelope_its_chat_matrices_drop() -> None:
    """The pair's and the 8B Environment's presets said ignore_eos and never got it; every pair and 8B matrix is
    chat. Those envelopes are gone, and no benchmark matrix of theirs is warned about one."""
    for name in ("matrix-agentic.yaml", "matrix-surface-kept.yaml", "matrix-surface-8b-2dom.yaml"):
        r = run_cli("validate", str(ROOT / "benchmarks/pair_gpu" / name))
        assert r.returncode == 0 and "sampling_params" not in r.stderr, r.stderr
