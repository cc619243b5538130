"""Several sglang.bench_serving result files imported as the arms of one run: paired speed-ups where the
prompts are known to match (carried prompts, or --same-prompts after the input lengths agree), unpaired and
said so otherwise, and bad input refused with exit 2 before anything is written. The lines carry exactly
the fields bench_serving writes (tests/results/test_results_import.py: sglang_line)."""

from __future__ import annotations

import json

import numpy as np

from toolkit.results.archive import cell_key, open_archive
from toolkit.results.verify import verify_run
from tests.results.test_results_import import _aggregates, sglang_line
from tests.synthetic import write_run

ARM = {"baseline": ["python", "-m", "sglang.launch_server", "--model-path", "m"]}


def _details(run, conc: int, slowdown: float = 1.0) -> dict:
    recs = [r for r in open_archive(run).iter_records(cell_key("baseline", "chat", conc)) if not r.warmup]
    return {"input_lens": [r.input_tokens for r in recs], "output_lens": [r.output_tokens for r in recs],
            "ttfts": [r.ttft_ms * slowdown / 1000 for r in recs],
            "itls": [list(np.diff(r.chunk_ms) * slowdown / 1000) for r in recs],
            "generated_texts": ["..." for _ in recs], "errors": ["" for _ in recs],
            "prompts": [f"prompt {r.prompt_id}" for r in recs]}


def _file(path, run, slowdowns: dict[int, float], *, prompts: bool = True, spec: str | None = None) -> str:
    lines = []
    for conc, slow in slowdowns.items():
        d = _details(run, conc, slow)
        if not prompts:
            d.pop("prompts")
        line = sglang_line(d, _aggregates(d, "e2e_latency_ms"))
        line["max_concurrency"] = conc
        line["server_info"] = {**line["server_info"], "speculative_algorithm": spec}
        lines.append(json.dumps(line))
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _pair(tmp_path, prompts: bool = True):
    run = write_run(tmp_path / "gen", seed=3, n=150, arms=ARM, domains=("chat",), concurrency=(1, 8))
    # the drafter: 40 % faster at c=1, 60 % slower at c=8 (a crossover at 8)
    base = _file(tmp_path / "base.jsonl", run, {1: 1.0, 8: 1.0}, prompts=prompts)
    spec = _file(tmp_path / "eagle3.jsonl", run, {1: 0.6, 8: 1.6}, prompts=prompts, spec="EAGLE3")
    return base, spec


def _import(cli, tmp_path, *args):
    return cli("results", "import", *args, "--format", "sglang", "--root", str(tmp_path / "results"),
               "--domain", "chat", "--json")


def test_two_files_with_their_prompts_give_paired_speedups_and_a_crossover(tmp_path, cli):
    base, spec = _pair(tmp_path)
    res = _import(cli, tmp_path, base, spec, "--arm", "baseline", "--arm", "eagle3")
    assert res.returncode == 0, res.stderr
    run = json.loads(res.stdout)["run"]
    assert verify_run(run) == []
    a = open_archive(run)
    assert sorted((c.arm, c.concurrency) for c in a.cells) == [("baseline", 1), ("baseline", 8), ("eagle3", 1),
                                                               ("eagle3", 8)]
    src = a.manifest.source
    assert (src.pairing, src.baseline, sorted(src.arms)) == ("prompt-hashes", "baseline", ["baseline", "eagle3"])
    assert src.arms["eagle3"]["file"] == "eagle3.jsonl" and len(src.arms["eagle3"]["sha256"]) == 64
    rows = {r.concurrency: r for r in a.derived.speedups}
    assert rows[1].n_pairs == 150 and 1.55 < rows[1].paired_ratio < 1.8 and rows[1].ci_low > 1
    assert 0.55 < rows[8].paired_ratio < 0.7 and rows[8].ci_high < 1
    assert "launch noise" in rows[1].ci_method  # one server launch per file: the CI is widened by it
    assert a.derived.speculative_arms == ["eagle3"]
    assert [c.crossover_concurrency for c in a.derived.crossovers] == [8]
    show = cli("results", "show", run)
    assert show.returncode == 0, show.stderr
    assert "paired x [95% CI]" in show.stdout and "speculative-disable-batch-threshold: 8" in show.stdout
    slo = cli("results", "slo", run, "--slo", "ttft_ms.p99=1000", "--json")
    assert slo.returncode == 0, slo.stderr


def test_files_without_prompts_are_unpaired_and_the_report_says_so(tmp_path, cli):
    base, spec = _pair(tmp_path, prompts=False)
    res = _import(cli, tmp_path, base, spec, "--arm", "baseline", "--arm", "eagle3")
    assert res.returncode == 0, res.stderr
    a = open_archive(json.loads(res.stdout)["run"])
    assert a.manifest.source.pairing == "unpaired"
    for r in a.derived.speedups:
        assert r.paired_ratio is None and r.n_pairs == 0 and r.throughput_ratio is not None
        assert r.ci_method.startswith("unpaired")
    assert a.derived.crossovers[0].crossover_concurrency is None  # no CI, no verdict
    show = cli("results", "show", str(a.path))
    assert "import-unpaired" in show.stdout and "--same-prompts" in show.stdout


def test_same_prompts_pairs_by_index_and_is_recorded(tmp_path, cli):
    base, spec = _pair(tmp_path, prompts=False)
    res = _import(cli, tmp_path, spec, base, "--arm", "eagle3", "--arm", "baseline", "--baseline", "baseline",
                  "--same-prompts")
    assert res.returncode == 0, res.stderr
    a = open_archive(json.loads(res.stdout)["run"])
    assert (a.manifest.source.pairing, a.manifest.baseline) == ("asserted", "baseline")
    rows = {r.concurrency: r for r in a.derived.speedups}
    assert rows[1].n_pairs == 150 and rows[1].ci_low > 1 and rows[8].ci_high < 1
    assert any(c.check == "import-pairing-asserted" for c in a.derived.methodology)


def test_bad_input_is_refused_before_anything_is_written(tmp_path, cli):
    base, spec = _pair(tmp_path, prompts=False)
    root = tmp_path / "results"

    def refused(*args, says: str):
        res = _import(cli, tmp_path, *args)
        assert res.returncode == 2, (res.returncode, res.stderr)
        assert says in res.stderr and "Traceback" not in res.stderr
        assert not root.exists() or not any(root.rglob("manifest.json"))

    refused(base, spec, "--arm", "baseline", says="2 file(s) but 1 --arm name(s)")
    refused(base, str(tmp_path / "nope.jsonl"), "--arm", "a", "--arm", "b", says="nope.jsonl")
    refused(base, spec, "--arm", "a", "--arm", "b", "--baseline", "c", says="--baseline 'c' is none of the arms")
    refused(base, base, says="two files would be arm")
    lines = [json.loads(x) for x in (tmp_path / "eagle3.jsonl").read_text().splitlines()]
    for line, conc in zip(lines, (2, 16)):
        line["max_concurrency"] = conc
    (tmp_path / "other.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    refused(base, str(tmp_path / "other.jsonl"), "--arm", "a", "--arm", "b", says="shares no cell with the baseline")
    lines = [json.loads(x) for x in (tmp_path / "eagle3.jsonl").read_text().splitlines()]
    lines[1]["input_lens"][5] += 1
    (tmp_path / "moved.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    refused(base, str(tmp_path / "moved.jsonl"), "--arm", "a", "--arm", "b", "--same-prompts",
            says="request 5 has")


def test_two_vllm_files_compare_every_other_arm_to_the_baseline(tmp_path, cli):
    from tests.results.test_results_import import vllm_doc

    run = write_run(tmp_path / "gen", seed=4, n=60, arms=ARM, domains=("chat",), concurrency=(8,))
    paths = []
    for name, slow in (("a.json", 1.0), ("b.json", 0.7)):
        d = _details(run, 8, slow)
        d.pop("prompts")
        (tmp_path / name).write_text(json.dumps(vllm_doc(d, _aggregates(d, "e2el_ms"))))
        paths.append(str(tmp_path / name))
    res = cli("results", "import", *paths, "--format", "vllm", "--root", str(tmp_path / "results"), "--arm", "base",
              "--arm", "spec", "--domain", "chat", "--same-prompts", "--json")
    assert res.returncode == 0, res.stderr
    a = open_archive(json.loads(res.stdout)["run"])
    (row,) = a.derived.speedups
    assert (row.arm, row.baseline, row.n_pairs) == ("spec", "base", 60) and 1.3 < row.paired_ratio < 1.6
    assert a.derived.speculative_arms == ["spec"]  # vllm files name no algorithm: every other arm is compared
    assert a.manifest.source.arms["spec"]["tool"] == "vllm bench serve"
