"""Golden files of a tune session: the result (`bench tune --json`) and report.md recomputed from the
committed session results/quickstart-tune/<id> (its tune.json and its run archives). They pin the output
of the typed state and the verdict code against what the dict-based code printed.

Regenerate after an intended change:  TOOLKIT_REGEN_GOLDEN=1 python -m pytest tests/tune/test_tune_golden.py
"""

from __future__ import annotations

import json

from tests.conftest import ROOT
from tests.results.test_results_golden import check_golden

SESSION = ROOT / "results/quickstart-tune/20261203T083318Z-598b59"


def _result():
    from toolkit.tune.report import result

    return result(json.loads((SESSION / "tune.json").read_text()), SESSION)


def _dump(res) -> dict:
    return res if isinstance(res, dict) else res.dump()


def test_tune_result_json_golden() -> None:
    res = _dump(_result())
    # keys sorted: the state read back from tune.json (sorted keys) feeds some of them; the session path as
    # given (absolute here) relative to the repository; other recorded paths (the server command) stay as recorded
    text = json.dumps(res, indent=2, sort_keys=True, default=str).replace(f"{ROOT}/results/", "results/")
    check_golden("tune-quickstart-598b59.json", text + "\n")


def test_tune_report_markdown_golden() -> None:
    from toolkit.results.report.render import render_md
    from toolkit.tune.report import build_tune_report

    check_golden("tune-quickstart-598b59.md", render_md(build_tune_report(_result())).replace(f"{ROOT}/results/", "results/"))
