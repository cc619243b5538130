"""`rates:` (open loop), `arrival:` and `max_concurrency:` in a Matrix: a good spec plans cells keyed by rate with
the declared arrival process; each mistake exits 2 through the real CLI at its file:line with what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.specs.test_bad_input_battery import MATRIX, bad, write
from toolkit.specs import load_spec

RATES = MATRIX.replace("concurrency: [1, 2]", "rates: [0.5, 4]\narrival: {process: gamma, burstiness: 0.5}\n"
                                              "max_concurrency: 16")


def test_a_rates_matrix_plans_cells_keyed_by_rate(tmp_path: Path) -> None:
    from toolkit.bench.plan import plan_run

    _, m = write(tmp_path, matrix=RATES)
    assert run_cli("validate", str(m)).returncode == 0
    plan = plan_run(load_spec(m))
    cells = plan.todo["ngram"]
    assert [(c.domain, c.rate, c.concurrency) for c in cells] == [
        ("coding", 0.5, 16), ("coding", 4.0, 16), ("math", 0.5, 16), ("math", 4.0, 16)]
    assert [c.key for c in cells][:2] == ["ngram__coding__q0p5__r0", "ngram__coding__q4__r0"]
    load = plan.load(cells[1])
    assert (load.rate, load.arrival, load.burstiness, load.concurrency) == (4.0, "gamma", 0.5, 16)
    assert plan.cells_planned == 8
    # the same prompts for every arm at a rate, another order at another rate
    assert [p.id for p in plan.prompts(cells[0])] == [p.id for p in plan.prompts(plan.todo["baseline"][0])]


CASES = {
    "both axes": (RATES.replace("rates:", "concurrency: [1]\nrates:"), 6, r"exactly one of `concurrency`.*`rates`"),
    "neither axis": (MATRIX.replace("concurrency: [1, 2]\n", ""), 1, r"exactly one of `concurrency`.*`rates`"),
    "rate not > 0": (RATES.replace("[0.5, 4]", "[0.5, 0]"), 6, r"rates\[1\]: 0 is out of range: it must be > 0"),
    "rate twice": (RATES.replace("[0.5, 4]", "[0.5, 4, 0.5]"), 6, r"rates\[2\]: rate 0.5 is listed twice"),
    "unknown process": (RATES.replace("process: gamma", "process: weibull"), 7, r"arrival\.process: .*'poisson'"),
    "burstiness without gamma": (RATES.replace("process: gamma", "process: poisson"), 7,
                                 r"`burstiness` shapes `process: gamma`"),
    "burstiness not > 0": (RATES.replace("burstiness: 0.5", "burstiness: 0"), 7,
                           r"arrival\.burstiness: 0 is out of range: it must be > 0"),
    "arrival without rates": (MATRIX + "arrival: {process: constant}\n", 9, r"need `rates:`"),
    "max_concurrency 0": (RATES.replace("max_concurrency: 16", "max_concurrency: 0"), 8,
                          r"max_concurrency: 0 is out of range: it must be >= 1"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_rate_mistakes_are_errors_at_their_line(tmp_path: Path, case: str) -> None:
    text, line, pattern = CASES[case]
    _, m = write(tmp_path, matrix=text)
    bad(run_cli("validate", str(m)), m, line, pattern)


def test_tune_refuses_a_rates_matrix(tmp_path: Path) -> None:
    _, m = write(tmp_path, matrix=RATES + "tune:\n  space:\n    ngram: {prompt_lookup_num_tokens: [2, 4]}\n")
    r = run_cli("bench", "tune", str(m), "--arm", "ngram", "--results", str(tmp_path / "results"))
    bad(r, m, 6, r"`bench tune` searches at concurrency levels")
