"""Issue 43, errors at their line: a Matrix's own checks (one load axis, `arrival:` without rates, `sweep:` with
a trace, `warmup: concurrency` with a sweep, an unknown baseline) sit on the whole document, and were reported
at 1:1. They are reported at the line of the key their message names."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import TINY_ENV
from toolkit.errors import SpecError
from toolkit.specs import load_spec

HEAD = "kind: Matrix\nname: t\nenvironment: env.yaml\narms: [baseline, ngram]\n"

# body (from line 5; the line the mistake is on is marked `# here`), words of the message
CASES = {
    "concurrency and rates": ("workloads: [chat]\nrequests: 2\nconcurrency: [1]  # here\nrates: [1]\n",
                              "give exactly one of `concurrency`"),
    "rates and sweep": ("workloads: [chat]\nrequests: 2\n\nrates: [1]  # here\nsweep: {points: 3}\n",
                        "give exactly one of `concurrency` (closed loop), `rates`"),
    "sweep and warmup": ("workloads: [chat]\nrequests: 2\nsweep: {points: 3}\n\nwarmup: concurrency  # here\n",
                         "`warmup: concurrency` sends one full batch"),
    "sweep and a trace": ("workloads:\n  - chat\n  - {trace: tr.jsonl}  # here\nrequests: 2\nsweep: {points: 3}\n",
                          "a `trace:` workload is sent at the trace's own times"),
    "arrival without rates": ("workloads: [chat]\nrequests: 2\nconcurrency: [1]\n\narrival: {process: gamma}  # here\n",
                              "`arrival:` shapes the open-loop cells"),
    "max_concurrency closed loop": ("workloads: [chat]\nrequests: 2\nconcurrency: [1]\nmax_concurrency: 4  # here\n",
                                    "`max_concurrency:` caps open-loop cells"),
    "per-level duration with rates": ("workloads: [chat]\nrates: [1]\n\nduration_s: {1: 5}  # here\n",
                                      "`duration_s: {LEVEL: SECONDS}` names concurrency levels"),
    "baseline not an arm": ("workloads: [chat]\nrequests: 2\nconcurrency: [1]\nbaseline: ngarm  # here\n",
                            "baseline 'ngarm' is not one of the arms"),
    "burstiness without gamma": ("workloads: [chat]\nrequests: 2\nrates: [1]\narrival:\n  process: poisson\n"
                                 "  burstiness: 0.5  # here\n", "`burstiness` shapes `process: gamma`"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_models_own_check_is_at_the_line_of_its_key(tmp_path: Path, case: str) -> None:
    body, says = CASES[case]
    (tmp_path / "env.yaml").write_text(TINY_ENV)
    (tmp_path / "tr.jsonl").write_text('{"timestamp": 0, "input_length": 4}\n')
    f = tmp_path / "m.yaml"
    text = HEAD + body
    f.write_text(text)
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if "# here" in ln)
    with pytest.raises(SpecError) as info:
        load_spec(f)
    assert says in info.value.message, (case, str(info.value))
    assert info.value.line == line, (case, line, str(info.value))
