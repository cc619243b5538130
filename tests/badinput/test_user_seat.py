"""Issue 43, round four from a user's seat: new cases of the issue's classes, each through the real command line
(exit 2 for bad input, the flag, path or file:line named, a hint, no traceback, nothing already written lost).
What they found and where it was closed, by class:

- a path that is a folder where a file goes (`trace-import -o .` said "device or resource busy" of a temporary
  file's name): toolkit.fsutil.write_atomic, for every command that writes a file;
- an output over its own input (`trace-import t.jsonl -o t.jsonl`, `render hosts h.yaml -o h.yaml` replaced
  it): toolkit.fsutil.same_file; a trace converted twice (its times divided by 1000 again):
  toolkit.schema.trace.convert_mooncake;
- an option of fixed values without a did-you-mean (`--from mooncak`, `--classifier rule` in pydantic's words
  "Value error, ..."; `--format sglng`; `schema Matrx`): toolkit.exits._choice_hint for every Enum option;
- numbers: `--launches inf` in pydantic's words, `--slo tpot_ms.p90=abc` with no hint;
- validate passing what the run refuses: generation_config counts below 1 (`num_beams: 0` failed every
  request of the arm), what the installed GenerationConfig refuses (toolkit.specs.genconfig);
- archives: `results pack` packed a run that does not verify; an unreadable cell under --force was a traceback;
- import: more requests counted than recorded, a zero duration, `max_concurrency: 0` imported silently."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from tests.badinput.test_imports import sglang_run, vllm_run
from tests.conftest import run_cli
from tests.helpers import TINY_ENV
from tests.synthetic import write_run

MOONCAKE = ('{"timestamp": 0, "input_length": 4, "output_length": 4, "hash_ids": [1]}\n'
            '{"timestamp": 1000, "input_length": 4, "output_length": 4, "hash_ids": [1]}\n')
CONVERTED = ('{"timestamp": 0.0, "input_length": 4, "output_length": 4, "hash_ids": [1]}\n'
             '{"timestamp": 1.0, "input_length": 4, "output_length": 4, "hash_ids": [1]}\n')
MATRIX = ("kind: Matrix\nname: t\nenvironment: env.yaml\narms: [baseline, ngram]\nworkloads: [chat]\n"
          "concurrency: [1]\nrequests: 2\ntune:\n  space:\n    ngram: {prompt_lookup_num_tokens: [2, 4]}\n")
HOSTS = "kind: Hosts\nname: h\nhosts:\n  a: {address: 10.0.0.1}\n"


@pytest.fixture(scope="module")
def seat(tmp_path_factory) -> Path:
    """A user's folder: specs, traces, a good run and damaged ones, result files of other tools."""
    d = tmp_path_factory.mktemp("seat")
    (d / "env.yaml").write_text(TINY_ENV)
    (d / "m.yaml").write_text(MATRIX)
    (d / "h.yaml").write_text(HOSTS)
    (d / "mc.jsonl").write_text(MOONCAKE)
    (d / "done.jsonl").write_text(CONVERTED)
    (d / "afile").write_text("a file, not a folder\n")
    for name, text in {"numbeams": "num_beams: 0", "maxnew": "max_new_tokens: -3", "lookup": "prompt_lookup_num_tokens: 0",
                       "beamgroups": "num_beams: 1, num_beam_groups: 0"}.items():
        (d / f"env-{name}.yaml").write_text(TINY_ENV.replace("prompt_lookup_num_tokens: 4", text))
        (d / f"m-{name}.yaml").write_text(MATRIX.replace("env.yaml", f"env-{name}.yaml"))
    run = write_run(d / "results", seed=1, n=12, domains=("chat",), concurrency=(1,))
    (d / "run").write_text(str(run))
    bad = write_run(d / "bad", seed=2, n=12, domains=("chat",), concurrency=(1,))
    gz = next((bad / "cells").glob("*.jsonl.gz"))
    gz.write_bytes(b"garbage, not gzip\n")
    (d / "badrun").write_text(str(bad))
    extra = write_run(d / "extra", seed=3, n=12, domains=("chat",), concurrency=(1,))
    (extra / "cells" / "added.jsonl.gz").write_bytes(gzip.compress(b"{}\n"))
    (d / "extrarun").write_text(str(extra))
    for name, run_ in {"counted": sglang_run(completed=10), "duration0": sglang_run(duration=0),
                       "conc0": sglang_run(max_concurrency=0), "vllmcounted": vllm_run(completed=3, failed=2)}.items():
        (d / f"{name}.json").write_text(json.dumps(run_) + "\n")
    (d / "empty.json").write_text("\n\n")
    return d


# name: (arguments, {run}/{bad}/{extra} replaced by those runs' folders; exit; words the error must hold (the
# flag, path or file:line first); words of its hint)
CASES: dict[str, tuple[list[str], int, list[str], str]] = {
    # a folder where a file goes, a file where a folder goes
    "trace-import -o a folder": (["bench", "trace-import", "mc.jsonl", "-o", "."], 2, ["error: .: is a directory"],
                                 "give a file name"),
    "render hosts -o below a file": (["render", "hosts", "h.yaml", "-o", "afile/inv"], 2,
                                     ["error: afile: is a file, where a folder must be"], "a part of the path is a file"),
    "tune --out below a file": (["bench", "tune", "m.yaml", "--arm", "ngram", "--out", "afile/env.yaml"], 2,
                                ["--out afile/env.yaml: afile is a file, not a folder"], "give --out a path in a folder"),
    "tune --out a folder": (["bench", "tune", "m.yaml", "--arm", "ngram", "--out", "."], 2, ["--out .: is a folder"],
                            "give a file name"),
    "schema -o below a file": (["schema", "-o", "afile/x"], 2, ["error: afile/x: not a directory"],
                               "a part of the path is a file"),
    "render env -o a file": (["render", "env", "env.yaml", "-o", "afile"], 2, ["afile is a file"], "give a folder"),
    "pack -o a file": (["results", "pack", "{run}", "-o", "afile"], 2, ["afile: is a file, where a folder must be"],
                       "a part of the path is a file"),
    "noise --results below a file": (["bench", "noise", "m.yaml", "--results", "afile/r"], 2,
                                     ["afile/r/t: not a directory"], "a part of the path is a file"),
    "tune --results below a file": (["bench", "tune", "m.yaml", "--arm", "ngram", "--results", "afile/r"], 2,
                                    ["afile/r/t-tune: not a directory"], "a part of the path is a file"),
    "gpu validate -o below a file": (["gpu", "validate", "-o", "afile/x.json"], 2,
                                     ["afile: is a file, where a folder must be"], "a part of the path is a file"),
    "list --root a file": (["results", "list", "--root", "afile"], 2, ["afile: is a file, not a folder of runs"],
                           "--root names the folder"),
    # an output over what the command reads
    "trace-import onto its input": (["bench", "trace-import", "mc.jsonl", "-o", "mc.jsonl"], 2,
                                    ["mc.jsonl: -o is the trace being converted"], "give another -o"),
    "trace-import onto its input, another name": (["bench", "trace-import", "mc.jsonl", "-o", "./sub/../mc.jsonl"], 2,
                                                  ["-o is the trace being converted"], "give another -o"),
    "render hosts onto the spec": (["render", "hosts", "h.yaml", "-o", "./h.yaml"], 2,
                                   ["-o is the Hosts spec being rendered"], "-o inventory.yml"),
    "a trace converted twice": (["bench", "trace-import", "done.jsonl", "-o", "twice.jsonl"], 2,
                                ["done.jsonl:1: this looks like a trace already converted"], "use it as it is"),
    # fixed values: a did-you-mean
    "trace-import --from misspelt": (["bench", "trace-import", "mc.jsonl", "--from", "mooncak", "-o", "t.jsonl"], 2,
                                     ["'--from': 'mooncak' is not one of 'mooncake'"], "did you mean 'mooncake'?"),
    "--classifier misspelt": (["bench", "representativeness", "--train", "mc.jsonl", "-w", "chat", "--classifier",
                               "rule"], 2, ["'--classifier': 'rule' is not one of"], "did you mean 'rules'?"),
    "--classifier far off": (["bench", "representativeness", "--train", "mc.jsonl", "-w", "chat", "--classifier",
                              "xyz"], 2, ["'xyz' is not one of"], "write one of: rules, embedding, both"),
    "import --format misspelt": (["results", "import", "counted.json", "--format", "sglng"], 2,
                                 ["--format: unknown format 'sglng'"], "did you mean 'sglang'?"),
    "schema kind misspelt": (["schema", "Matrx"], 2, ["unknown kind 'Matrx'"], "did you mean 'Matrix'?"),
    "--slo metric misspelt": (["results", "slo", "{run}", "--slo", "tpotms.p90=30"], 2,
                              ["'tpotms' is not a metric"], "did you mean 'tpot_ms'?"),
    "tune --arm misspelt": (["bench", "tune", "m.yaml", "--arm", "ngarm"], 2, ["m.yaml:9:", "no search space for arm"],
                            "did you mean 'ngram'?"),
    # numbers that must be finite and in range, on the command line
    "--launches inf": (["bench", "noise", "m.yaml", "--launches", "inf"], 2,
                       ["'--launches': 'inf' is not a whole number >= 2"], ""),
    "--launches 1": (["bench", "noise", "m.yaml", "--launches", "1"], 2, ["'--launches': 1 is out of range"],
                     ""),
    "--budget 0": (["bench", "tune", "m.yaml", "--arm", "ngram", "--budget", "0"], 2, ["--budget 0"],
                   "give --budget 2 or more"),
    "--slo a word": (["results", "slo", "{run}", "--slo", "tpot_ms.p90=abc"], 2, ["'abc' is not a number"],
                     "e.g. tpot_ms.p90=30"),
    "--slo negative": (["results", "slo", "{run}", "--slo", "tpot_ms.p90=-30"], 2,
                       ["-30 is out of range: a limit must be greater than 0"], "e.g. tpot_ms.p90=30"),
    "--slo no bound": (["results", "slo", "{run}", "--slo", "tpot_ms=30"], 2, ["expected METRIC.BOUND=MS"],
                       "e.g. --slo tpot_ms.p90=30"),
    "--slo twice": (["results", "slo", "{run}", "--slo", "tpot_ms.p90=30", "--slo", "tpot_ms.p90=40"], 2,
                    ["tpot_ms.p90 is given twice"], "give --slo tpot_ms.p90=MS once"),
    "--tolerance 0": (["results", "reproduce", "{run}", "--tolerance", "0"], 2, ["'--tolerance': 0 is out of range"],
                      ""),
    "--attainment 0": (["results", "slo", "{run}", "--attainment", "0"], 2, ["'--attainment': 0 is out of range"], ""),
    # validate refuses what the run would fail on
    "num_beams 0": (["validate", "m-numbeams.yaml"], 2, ["env-numbeams.yaml:12:", "num_beams 0"], "`num_beams: 1`"),
    "max_new_tokens negative": (["validate", "m-maxnew.yaml"], 2, ["env-maxnew.yaml:12:", "max_new_tokens -3"],
                                "remove it for the default"),
    "prompt lookup 0": (["validate", "env-lookup.yaml"], 2, ["env-lookup.yaml:12:", "prompt_lookup_num_tokens 0"],
                        "`prompt_lookup_num_tokens: 4`"),
    "num_beam_groups 0": (["validate", "env-beamgroups.yaml"], 2, ["env-beamgroups.yaml:12:", "num_beam_groups 0"],
                          "remove it for the default"),
    "matrix naming a Hosts spec as environment": (["validate", "m-hosts.yaml"], 2,
                                                  ["m-hosts.yaml:3:1: environment: h.yaml is not an Environment spec"],
                                                  "`kind: Environment`"),
    "matrix naming a folder as environment": (["validate", "m-folder.yaml"], 2,
                                              ["m-folder.yaml:3:1: environment: results is a folder"],
                                              "name the file inside it"),
    "output_len beyond any context": (["validate", "m-outlen.yaml"], 2,
                                      ["m-outlen.yaml:7:1: output_len: 100000000 is out of range"],
                                      "allowed: a whole number from 1 to 16777216"),
    # archives that do not verify
    "pack a damaged run": (["results", "pack", "{bad}", "-o", "packs"], 2, ["does not verify", "nothing packed"],
                           "`toolkit results verify"),
    "pack a run with a file added": (["results", "pack", "{extra}", "-o", "packs"], 2,
                                     ["cells/added.jsonl.gz: not covered by SHA256SUMS"], "restore the folder"),
    "slo of a damaged run": (["results", "slo", "{bad}", "--slo", "tpot_ms.p90=30"], 2, ["does not verify"], "--force"),
    "report of a damaged run": (["results", "report", "{bad}", "--no-html", "-o", "rep"], 2, ["does not verify"],
                                "--force"),
    # import of inconsistent files
    "import: more requests counted than recorded": (["results", "import", "counted.json", "--format", "sglang"], 2,
                                                   ["counted.json:1: run 1: completed is 10",
                                                    "more requests counted than recorded"], "per-request lists"),
    "import: completed + failed beyond the lists": (["results", "import", "vllmcounted.json", "--format", "vllm"],
                                                    2, ["completed + failed is 5"], "per-request lists"),
    "import: zero duration": (["results", "import", "duration0.json", "--format", "sglang"], 2,
                              ["duration: 0 seconds for 3 completed"], "per-request lists"),
    "import: max_concurrency 0": (["results", "import", "conc0.json", "--format", "sglang"], 2,
                                  ["max_concurrency: 0 is out of range"], "per-request lists"),
    "import: an empty file": (["results", "import", "empty.json", "--format", "sglang"], 2,
                              ["empty.json: no benchmark runs in the file"], "a finished benchmark"),
}


def _args(seat: Path, args: list[str]) -> list[str]:
    runs = {k: (seat / k.strip("{}").replace("bad", "badrun").replace("extra", "extrarun")).read_text()
            for k in ("{run}", "{bad}", "{extra}")}
    return [runs.get(a, a) for a in args]


@pytest.mark.parametrize("case", list(CASES))
def test_a_users_mistake_is_one_clean_error(seat: Path, case: str) -> None:
    args, code, says, hint = CASES[case]
    (seat / "m-hosts.yaml").write_text(MATRIX.replace("env.yaml", "h.yaml"))
    (seat / "m-folder.yaml").write_text(MATRIX.replace("env.yaml", "results"))
    (seat / "m-outlen.yaml").write_text(MATRIX.replace("requests: 2", "output_len: 100000000"))
    before = {p: p.read_bytes() for p in seat.iterdir() if p.is_file()}
    outputs = [seat / "packs", seat / "twice.jsonl", seat / "rep"]
    existed = {p for p in outputs if p.exists()}
    r = run_cli(*_args(seat, args), cwd=seat, timeout=300)
    made = [p for p in outputs if p.exists() and p not in existed]
    for p in made:  # gone again, so that the next case is judged on its own
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    text = r.stderr + r.stdout
    assert r.returncode == code and "Traceback" not in text, (case, r.returncode, text[-3000:])
    for words in says:
        assert words in text, (case, words, text[-3000:])
    assert f"hint: {hint}" in text or (hint and hint in text.split("hint: ", 1)[-1]) or (
        not hint and "Invalid value for" in text), (case, hint, text[-3000:])
    after = {p: p.read_bytes() for p in seat.iterdir() if p.is_file()}
    for p in set(before) - set(after) | {p for p in before if after.get(p) != before[p]}:
        p.write_bytes(before[p])  # put back, so that the next case is judged on its own
    assert after == before, (case, "a file the user had was changed or removed")
    assert not made, (case, "written although refused", made)


def test_a_first_conversion_still_works_and_an_unreadable_cell_is_clean_under_force(seat: Path) -> None:
    r = run_cli("bench", "trace-import", "mc.jsonl", "-o", "new/t.jsonl", cwd=seat)
    assert r.returncode == 0 and (seat / "new" / "t.jsonl").read_text() == CONVERTED, r.stderr
    bad = (seat / "badrun").read_text()
    r = run_cli("results", "diff", bad, bad, "--force", cwd=seat)
    assert "Traceback" not in r.stderr + r.stdout and "UNVERIFIED" in r.stdout, r.stderr[-2000:]


def test_validate_warns_of_an_unset_api_key_variable(tmp_path: Path) -> None:
    """The run refuses to start without the key; validate (which may run where the secrets are not) warns."""
    (tmp_path / "env.yaml").write_text(TINY_ENV)
    m = tmp_path / "m.yaml"
    m.write_text(MATRIX.split("tune:")[0] + "target: {kind: external, url: 'http://127.0.0.1:9', "
                 "api_key_env: TOOLKIT_TEST_NO_SUCH_KEY}\n")
    r = run_cli("validate", str(m))
    assert r.returncode == 0 and "TOOLKIT_TEST_NO_SUCH_KEY is not set" in r.stderr, r.stderr
    assert "the run refuses to start without it" in r.stderr


# `python -m toolkit.loadgen URL ...`: argparse took .inf, nan, 0 and negatives, and exited 0 with every request
# failed (status failed in its JSON); an unwritable --records was a traceback after the cell ran
LOADGEN = {
    "--speed inf": (["--trace", "done.jsonl", "--speed", "inf"], 2, "argument --speed: inf is not a finite number"),
    "--rate nan": (["--rate", "nan"], 2, "argument --rate: nan is not a finite number"),
    "--burstiness -1": (["--rate", "1", "--arrival", "gamma", "--burstiness", "-1"], 2,
                        "argument --burstiness: -1 is out of range"),
    "--concurrency 0": (["--concurrency", "0"], 2, "argument --concurrency: 0 is out of range"),
    "--requests -1": (["--requests", "-1"], 2, "argument --requests: -1 is out of range"),
    "--output-len 1.5": (["--output-len", "1.5"], 2, "argument --output-len: '1.5' is not a whole number"),
    "--records below a file": (["--requests", "1", "--records", "afile/r.jsonl"], 2,
                               "afile: is a file, where a folder must be"),
    "every request failed": (["--requests", "2"], 1, "no request succeeded (2 of 2 failed)"),
}


@pytest.mark.parametrize("case", list(LOADGEN))
def test_the_load_generators_command_line(seat: Path, case: str) -> None:
    import socket
    import subprocess
    import sys

    with socket.socket() as s:  # a port nothing listens on: every request is refused
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    args, code, says = LOADGEN[case]
    r = subprocess.run([sys.executable, "-m", "toolkit.loadgen", url, *args], cwd=seat, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == code and "Traceback" not in r.stderr and says in r.stderr, (case, r.returncode, r.stderr)
    assert (seat / "afile").read_text() == "a file, not a folder\n"
