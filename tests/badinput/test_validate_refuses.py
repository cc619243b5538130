"""Issue 43, validate refuses what a run refuses before it starts: a `tune:` block that `bench tune` refuses (an
arm it does not name, a knob the arm's engine cannot take, a value out of range, a baseline tuned), a Slurm
target whose job folder an #SBATCH line cannot name, a trace path that is a folder. Each at its key's line with
a hint. `toolkit validate` calls toolkit.tune.space.check_matrix, which runs plan_target (what every run plans
first, Slurm checks included) and toolkit.tune.space.check_tune (check_space, what `bench tune` calls), so
validate and the runs share their checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.helpers import write_matrix
from toolkit.bench.plan import plan_target
from toolkit.errors import SpecError
from toolkit.specs import load_spec
from toolkit.tune.space import check_matrix, check_space

LOAD = "arms: [baseline, ngram]\nworkloads: [chat]\nrequests: 4\nconcurrency: [1]\n"  # lines 4-7

# the tune block (from line 8; its mistake marked `# here`), words of the error, words of the hint
TUNE = {
    "an arm not in arms": ("tune:\n  space:\n    ngarm: {prompt_lookup_num_tokens: [2]}  # here\n",
                           "not one of the matrix's arms", "did you mean 'ngram'"),
    "an arm not in arms, nothing close": ("tune:\n  space:\n    zzz: {prompt_lookup_num_tokens: [2]}  # here\n",
                                          "not one of the matrix's arms", "add 'zzz' to `arms:`"),
    "the baseline": ("tune:\n  space:\n    baseline: {prompt_lookup_num_tokens: [2, 4]}  # here\n",
                     "is the baseline", "tune a speculative arm"),
    "an SGLang flag on the embedded engine": ("tune:\n  space:\n    ngram:\n      speculative-num-steps: [2]  # here\n",
                                              "unknown knob 'speculative-num-steps'", "knobs here"),
    "a misspelt knob": ("tune:\n  space:\n    ngram:\n      prompt_lookup_num_token: [2]  # here\n",
                        "unknown knob", "prompt_lookup_num_tokens"),
    "a dashed knob": ("tune:\n  space:\n    ngram:\n      prompt-lookup-num-tokens: [2]  # here\n",
                      "unknown knob", "prompt_lookup_num_tokens"),
    "a value of text": ("tune:\n  space:\n    ngram:\n      prompt_lookup_num_tokens:\n        - '2'  # here\n",
                        "takes whole numbers", "without quotes"),
    "a value of a float": ("tune:\n  space:\n    ngram:\n      prompt_lookup_num_tokens:\n        - 2.5  # here\n",
                           "takes whole numbers", "e.g. 4"),
    "a value below the minimum": ("tune:\n  space:\n    ngram:\n      prompt_lookup_num_tokens:\n        - 2\n"
                                  "        - 0  # here\n", "out of range", ">= 1"),
    "budget below 2": ("tune:\n  budget: 1  # here\n  space:\n    ngram: {prompt_lookup_num_tokens: [2]}\n",
                       "budget", ">= 2"),
    "first_requests 0": ("tune:\n  first_requests: 0  # here\n  space:\n    ngram: {prompt_lookup_num_tokens: [2]}\n",
                         "first_requests", ">= 1"),
    "confirm_requests 1": ("tune:\n  confirm_requests: 1  # here\n  space:\n    ngram: {prompt_lookup_num_tokens: [2]}\n",
                           "confirm_requests", ">= 2"),
    "confirm_launches 0": ("tune:\n  confirm_launches: 0  # here\n  space:\n    ngram: {prompt_lookup_num_tokens: [2]}\n",
                           "confirm_launches", "from 1 to 10"),
    "confirm_launches on request knobs": ("tune:\n  confirm_launches: 3  # here\n  space:\n    ngram: "
                                          "{prompt_lookup_num_tokens: [2, 4]}\n", "one shared server",
                                          "remove `confirm_launches:`"),
    "a value listed twice": ("tune:\n  space:\n    ngram:\n      prompt_lookup_num_tokens:\n        - 2\n"
                             "        - 2  # here\n", "lists 2 twice", "remove the second"),
    "an empty value list": ("tune:\n  space:\n    ngram: {prompt_lookup_num_tokens: []}  # here\n",
                            "at least 1", "list the values"),
}


def _line(body: str) -> int:
    return next(i for i, text in enumerate(body.splitlines(), 1) if "# here" in text)


def _validate(spec) -> None:
    """What `toolkit validate` runs on a Matrix (toolkit/cli.py): the run's plan, then the tune block."""
    check_matrix(spec)


def _refused(m: Path, line: int, says: str | None, hint: str | None) -> SpecError:
    with pytest.raises(SpecError) as e:
        _validate(load_spec(m))
    exc = e.value
    assert exc.file == m and exc.line == line, (exc.file, exc.line, str(exc))
    assert says is None or says in exc.message, exc.message
    assert exc.hint and (hint is None or hint in exc.hint), exc.hint
    return exc


@pytest.mark.parametrize("case", list(TUNE))
def test_a_tune_mistake_is_refused_at_its_line(tmp_path: Path, case: str) -> None:
    block, says, hint = TUNE[case]
    body = LOAD + block
    m = write_matrix(tmp_path, body)
    _refused(m, 3 + _line(body), says, hint)


@pytest.mark.parametrize("case", [c for c in TUNE if c.startswith(("an arm", "the baseline", "an SGLang", "a value",
                                                                      "confirm_launches on"))])
def test_bench_tune_refuses_the_same_way(tmp_path: Path, case: str) -> None:
    """The check validate runs is the one `bench tune --arm ARM` runs (check_space), same message and line."""
    block, _, _ = TUNE[case]
    m = write_matrix(tmp_path, LOAD + block)
    spec = load_spec(m)
    arm = next(iter(spec.model.tune.space))
    with pytest.raises(SpecError) as by_validate:
        _validate(spec)
    with pytest.raises(SpecError) as by_tune:
        check_space(spec, plan_target(spec).env_spec, arm)
    assert str(by_validate.value) == str(by_tune.value)


@pytest.mark.parametrize("axis, line", [("rates: [1]\nrequests: 4\n", 6),
                                        ("workloads:\n  - {trace: tr.jsonl}\n", 5)])
def test_a_tune_block_the_matrix_cannot_search_is_refused(tmp_path: Path, axis: str, line: int) -> None:
    (tmp_path / "tr.jsonl").write_text('{"timestamp": 0, "input_length": 4}\n{"timestamp": 1, "input_length": 4}\n')
    body = ("arms: [baseline, ngram]\n" + ("workloads: [chat]\n" if "rates" in axis else "") + axis +
            "tune:\n  space:\n    ngram: {prompt_lookup_num_tokens: [2]}\n")
    exc = _refused(write_matrix(tmp_path, body), line, "searches at concurrency levels", "docs/tune.md")
    assert "tune" in exc.message


def test_a_valid_tune_block_validates(tmp_path: Path) -> None:
    m = write_matrix(tmp_path, LOAD + "tune:\n  budget: 3\n  space:\n    ngram: {prompt_lookup_num_tokens: [2, 4, 8]}\n")
    _validate(load_spec(m))


SLURM = "arms: [baseline, ngram]\nworkloads: [chat]\nrequests: 4\nconcurrency: [1]\ntarget:\n  kind: slurm\n"  # 4-9


@pytest.mark.parametrize("workdir", ["'a b'", "'it''s'", "'a,b'", "'$HOME/x'", "'a\\\\b'", "'tab\there'"])
def test_a_slurm_workdir_no_sbatch_line_can_name_is_refused(tmp_path: Path, workdir: str) -> None:
    m = write_matrix(tmp_path, SLURM + f"  slurm:\n    workdir: {workdir}\n")
    exc = _refused(m, 11, "#SBATCH lines cannot name a folder", "plain path")
    assert "target.slurm.workdir" in exc.message


def test_slurm_nodes_on_the_embedded_engine_is_refused_by_validate(tmp_path: Path) -> None:
    m = write_matrix(tmp_path, SLURM + "  slurm:\n    nodes: 2\n")
    _refused(m, 11, "only SGLang spans nodes", "drop `nodes:`")


def test_a_container_launcher_on_the_embedded_engine_is_refused_by_validate(tmp_path: Path) -> None:
    m = write_matrix(tmp_path, SLURM + "  launcher: container\n  slurm: {container_image: x.sif}\n")
    _refused(m, 10, "does not run under launcher 'container'", "one of process")


def test_the_run_plan_refuses_the_slurm_workdir_too(tmp_path: Path) -> None:
    m = write_matrix(tmp_path, SLURM + "  slurm:\n    workdir: 'a b'\n")
    with pytest.raises(SpecError, match="#SBATCH lines cannot name"):
        plan_target(load_spec(m))


@pytest.mark.parametrize("key, body", [
    ("workloads[0].trace", "arms: [baseline]\nworkloads:\n  - {trace: tdir}\n"),
    ("workloads[0].trace", "arms: [baseline]\nworkloads:\n  - {trace: tdir/}\n"),
    ("target.hosts", "arms: [baseline]\nworkloads: [chat]\nrequests: 2\nconcurrency: [1]\ntarget: {kind: hosts, "
                     "hosts: tdir, group: g}\n"),
])
def test_a_folder_where_a_file_is_named_says_so(tmp_path: Path, key: str, body: str) -> None:
    (tmp_path / "tdir").mkdir()
    m = write_matrix(tmp_path, body)
    with pytest.raises(SpecError) as e:
        check_matrix(load_spec(m))
    exc = e.value
    assert key in exc.message and "is a folder, expected a file" in exc.message, exc.message
    assert "not found" not in exc.message and exc.file == m and exc.line, str(exc)
    assert "name the file inside it" in exc.hint


@pytest.mark.parametrize("case, body, line", [
    ("tune", LOAD + "tune:\n  space:\n    ngarm: {prompt_lookup_num_tokens: [2]}\n", 10),
    ("slurm", SLURM + "  slurm:\n    workdir: 'a b'\n", 11),
    ("trace folder", "arms: [baseline]\nworkloads:\n  - {trace: tdir}\n", 6),
])
def test_the_cli_exits_2_at_the_line_with_a_hint(tmp_path: Path, case: str, body: str, line: int) -> None:
    (tmp_path / "tdir").mkdir()
    m = write_matrix(tmp_path, body)
    r = run_cli("validate", str(m))
    assert r.returncode == 2 and "Traceback" not in r.stderr + r.stdout, r.stderr
    assert f"{m}:{line}:" in r.stderr and "hint: " in r.stderr and "ok " not in r.stdout, r.stderr


@pytest.mark.parametrize("module", ["toolkit", "toolkit.cli"])
def test_python_dash_m_exits_with_the_commands_code(tmp_path: Path, module: str) -> None:
    """`python -m toolkit` (toolkit/__main__.py) exits as the `toolkit` command does: 2 on bad input. It returned
    main()'s code and dropped it, so every failed `python -m toolkit validate` exited 0."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    m = write_matrix(tmp_path, LOAD + "synthetic_acceptance: [2.0]\n")  # the embedded engine has no such knob
    r = subprocess.run([sys.executable, "-m", module, "validate", str(m)], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and "synthetic_acceptance" in r.stderr, (r.returncode, r.stderr)
