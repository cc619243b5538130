"""Issue 43, `toolkit results import` checks its input before the archive is made: a file of the other tool
(a vLLM result given as `--format sglang`) is refused naming what it looks like; per-request lists must be one
entry per request; times finite and >= 0 (a negative TTFT was counted as one more failed request); counts whole
numbers >= 0; `--output-len` positive. One place: toolkit.results.importers._load (looks_like, _bad_run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from toolkit.errors import ToolkitError
from toolkit.results.importers import import_file, looks_like

DETAILS = {"ttfts": [0.1, 0.2, 0.15], "itls": [[0.01, 0.02], [0.01], [0.03, 0.01]], "input_lens": [10, 12, 9],
           "output_lens": [3, 2, 3], "errors": ["", "", ""], "start_times": [0.0, 0.5, 1.0]}


def sglang_run(**over) -> dict:
    run = {"backend": "sglang-oai", "dataset_name": "random", "max_concurrency": 2, "random_output_len": 4,
           "server_info": {"version": "0.5.23"}, "completed": 3, "duration": 1.5, "mean_ttft_ms": 150.0,
           "median_ttft_ms": 150.0, "mean_e2e_latency_ms": 180.0, "median_e2e_latency_ms": 180.0, **DETAILS}
    return {**run, **over}


def vllm_run(**over) -> dict:
    run = {"date": "20261130-101500", "endpoint_type": "openai-chat", "backend": "openai-chat", "model_id": "m",
           "tokenizer_id": "m", "num_prompts": 3, "max_concurrency": 2, "completed": 3, "failed": 0,
           "duration": 1.5, "mean_ttft_ms": 150.0, "median_ttft_ms": 150.0, "mean_e2el_ms": 180.0,
           "median_e2el_ms": 180.0, **DETAILS}
    return {**run, **over}


def _refused(tmp_path: Path, text: str, fmt: str, *words: str) -> ToolkitError:
    f = tmp_path / "r.json"
    f.write_text(text)
    with pytest.raises(ToolkitError) as e:
        import_file(f, fmt, tmp_path / "results")
    exc = e.value
    assert exc.file == f and exc.hint, str(exc)
    for w in words:
        assert w in exc.message, exc.message
    assert not (tmp_path / "results").exists()  # refused before any archive
    return exc


@pytest.mark.parametrize("text, fmt, other", [
    (json.dumps(vllm_run()) + "\n", "sglang", "vllm"),                 # one line: parsed as a JSON line
    (json.dumps(vllm_run(), indent=2), "sglang", "vllm"),               # pretty-printed: not JSON lines
    (json.dumps([vllm_run(), vllm_run()]), "sglang", "vllm"),
    (json.dumps(sglang_run()), "vllm", "sglang"),
    (json.dumps([sglang_run()]), "vllm", "sglang"),
])
def test_a_file_of_the_other_tool_is_refused_naming_what_it_looks_like(tmp_path: Path, text: str, fmt: str,
                                                                       other: str) -> None:
    exc = _refused(tmp_path, text, fmt, f"looks like a {other} result", f"not {fmt}")
    assert exc.hint == f"give --format {other}"


def test_sniffing_names_each_tool_and_nothing_else() -> None:
    assert looks_like(sglang_run()) == "sglang" and looks_like(vllm_run()) == "vllm"
    assert looks_like({"completed": 1, "duration": 1}) is None and looks_like([1]) is None


def test_the_right_format_imports(tmp_path: Path) -> None:
    for fmt, text in (("sglang", json.dumps(sglang_run()) + "\n"), ("vllm", json.dumps(vllm_run()))):
        f = tmp_path / f"{fmt}.json"
        f.write_text(text)
        assert (import_file(f, fmt, tmp_path / "results") / "manifest.json").is_file()


# (changes to the run, words of the message)
BAD_RUNS = {
    "a negative ttft": ({"ttfts": [0.1, -0.2, 0.15]}, "ttfts[1]: -0.2 is out of range"),
    "an infinite ttft": ({"ttfts": [0.1, float("inf"), 0.15]}, "ttfts[1]"),
    "a nan ttft": ({"ttfts": [float("nan"), 0.2, 0.15]}, "ttfts[0]"),
    "a text ttft": ({"ttfts": [0.1, "0.2", 0.15]}, "ttfts[1]"),
    "a negative gap": ({"itls": [[0.01, -0.02], [0.01], [0.03]]}, "itls[0]"),
    "an infinite gap": ({"itls": [[0.01], [float("inf")], [0.03]]}, "itls[1]"),
    "gaps not a list": ({"itls": [[0.01], 0.5, [0.03]]}, "itls[1]: expected a list"),
    "a short itls": ({"itls": [[0.01], [0.01]]}, "itls has 2 entries and ttfts 3"),
    "a long output_lens": ({"output_lens": [3, 2, 3, 4]}, "output_lens has 4 entries and ttfts 3"),
    "a short input_lens": ({"input_lens": [10]}, "input_lens has 1 entries"),
    "a short errors": ({"errors": ["", ""]}, "errors has 2 entries"),
    "a short start_times": ({"start_times": [0.0]}, "start_times has 1 entries"),
    "a list that is not one": ({"output_lens": 3}, "output_lens: expected a list"),
    "a negative output length": ({"output_lens": [3, -2, 3]}, "output_lens[1]"),
    "a fractional output length": ({"output_lens": [3, 2.5, 3]}, "output_lens[1]: 2.5 is not a whole number"),
    "a negative input length": ({"input_lens": [-1, 12, 9]}, "input_lens[0]"),
    "a negative start time": ({"start_times": [0.0, -0.5, 1.0]}, "start_times[1]"),
    "an infinite start time": ({"start_times": [0.0, float("inf"), 1.0]}, "start_times[1]"),
    "a negative duration": ({"duration": -1.5}, "duration: -1.5 is out of range"),
    "an infinite duration": ({"duration": float("inf")}, "duration"),
    "a text duration": ({"duration": "long"}, "duration"),
    "a negative completed": ({"completed": -3}, "completed"),
    "a fractional completed": ({"completed": 2.5}, "completed: 2.5 is not a whole number"),
    "a negative failed": ({"failed": -1}, "failed"),
}


@pytest.mark.parametrize("fmt", ["sglang", "vllm"])
@pytest.mark.parametrize("case", list(BAD_RUNS))
def test_impossible_numbers_are_refused(tmp_path: Path, case: str, fmt: str) -> None:
    over, says = BAD_RUNS[case]
    if fmt == "sglang":
        text, line = json.dumps(sglang_run()) + "\n" + json.dumps(sglang_run(**over)) + "\n", 2
    else:
        text, line = json.dumps([vllm_run(), vllm_run(**over)]), None
    exc = _refused(tmp_path, text, fmt, "run 2: " + says)
    assert exc.line == line


def test_a_failed_request_as_the_tool_writes_it_is_still_one(tmp_path: Path) -> None:
    """sglang writes ttft 0 and an error for a request that failed: that is not bad input."""
    f = tmp_path / "r.jsonl"
    f.write_text(json.dumps(sglang_run(ttfts=[0.1, 0.0, 0.15], errors=["", "boom", ""])) + "\n")
    from toolkit.results.archive import open_archive

    (cell,) = open_archive(import_file(f, "sglang", tmp_path / "results")).cells
    assert (cell.n_requests, cell.n_errors) == (4, 1)  # completed 3, and the one that failed


@pytest.mark.parametrize("value", ["-5", "0", "2.5", "inf", "x"])
def test_output_len_must_be_a_positive_whole_number(tmp_path: Path, value: str) -> None:
    f = tmp_path / "r.jsonl"
    f.write_text(json.dumps(sglang_run()) + "\n")
    r = run_cli("results", "import", str(f), "--format", "sglang", "--output-len", value, "--root",
                str(tmp_path / "results"))
    assert r.returncode == 2 and "Traceback" not in r.stderr and "--output-len" in r.stderr, r.stderr
    assert not (tmp_path / "results").exists()


def test_the_cli_refuses_the_wrong_format_with_exit_2(tmp_path: Path) -> None:
    f = tmp_path / "v.json"
    f.write_text(json.dumps(vllm_run()))
    r = run_cli("results", "import", str(f), "--format", "sglang", "--root", str(tmp_path / "results"))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "looks like a vllm result" in r.stderr and "hint: give --format vllm" in r.stderr, r.stderr
