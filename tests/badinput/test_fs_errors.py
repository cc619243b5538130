"""Issue 43, the file system: a path that cannot be written is `path: what is wrong` and a hint, exit 2 (the
path is the problem) or 1 (the machine is: a full disk), never a traceback, for every command (one place:
toolkit.errors.os_error, applied by toolkit.exits.run_command). The tests run as root too, so the unwritable
path is one below a regular file (no permission bit stops root)."""

from __future__ import annotations

import errno
from pathlib import Path

from tests.conftest import run_cli
from tests.helpers import TINY_ENV
from tests.slurm.test_slurm_spec import PROCESS, blackwell
from tests.synthetic import write_run

MOONCAKE = ('{"timestamp": 0, "input_length": 4, "output_length": 4, "hash_ids": [1]}\n'
            '{"timestamp": 1000, "input_length": 4, "output_length": 4, "hash_ids": [1]}\n')


def clean(r, path: str, code: int = 2) -> None:
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr + r.stdout, r.stderr
    assert f"error: {path}" in r.stderr and "hint: " in r.stderr, r.stderr


def test_unwritable_outputs_of_every_command_are_one_clean_error(tmp_path: Path) -> None:
    blocker = tmp_path / "afile"
    blocker.write_text("a file, not a folder\n")
    run = write_run(tmp_path / "results", seed=1, n=12, domains=("chat",), concurrency=(1,))
    (tmp_path / "mc.jsonl").write_text(MOONCAKE)
    (tmp_path / "env.yaml").write_text(TINY_ENV)
    (tmp_path / "m.yaml").write_text("kind: Matrix\nname: t\nenvironment: env.yaml\narms: [baseline]\n"
                                     "workloads: [chat]\nconcurrency: [1]\nrequests: 2\n")
    slurm = blackwell(tmp_path, PROCESS)
    cases = [
        (["results", "report", str(run), "-o", f"{blocker}/rep"], f"{blocker}/rep"),
        (["bench", "trace-import", str(tmp_path / "mc.jsonl"), "-o", f"{blocker}/t.jsonl"], f"{blocker}"),
        (["render", "slurm", str(slurm), "-o", f"{blocker}/jobs"], f"{blocker}/jobs"),
        (["bench", "matrix", str(tmp_path / "m.yaml"), "--results", f"{blocker}/r"], f"{blocker}/r"),
    ]
    for args, path in cases:
        r = run_cli(*args, cwd=tmp_path)
        clean(r, path)
        assert "not a directory" in r.stderr or "is a file, where a folder must be" in r.stderr, (args, r.stderr)
        assert "a part of the path is a file" in r.stderr
    assert blocker.read_text() == "a file, not a folder\n"  # nothing already there was touched


def test_trace_import_makes_a_missing_folder(tmp_path: Path) -> None:
    (tmp_path / "mc.jsonl").write_text(MOONCAKE)
    dest = tmp_path / "new" / "folder" / "t.jsonl"
    r = run_cli("bench", "trace-import", str(tmp_path / "mc.jsonl"), "-o", str(dest))
    assert r.returncode == 0 and dest.read_text().count("\n") == 2, r.stderr


def test_a_name_too_long_for_a_file_name_is_refused_by_validate(tmp_path: Path) -> None:
    """A 300-character matrix name validated, and the run died on `OSError: File name too long`."""
    (tmp_path / "env.yaml").write_text(TINY_ENV)
    m = tmp_path / "m.yaml"
    m.write_text(f"kind: Matrix\nname: {'a' * 300}\nenvironment: env.yaml\narms: [baseline]\n"
                 "workloads: [chat]\nconcurrency: [1]\nrequests: 2\n")
    r = run_cli("validate", str(m))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"{m}:2:" in r.stderr and "name: 300 characters is too long: at most 100" in r.stderr, r.stderr
    assert "hint: shorten it" in r.stderr


def test_os_error_words_the_path_and_says_whose_fault() -> None:
    from toolkit.errors import os_error

    e = os_error(PermissionError(errno.EACCES, "Permission denied", "/srv/results"))
    assert str(e).startswith("/srv/results: permission denied\n  hint: choose a folder") and e.exit_code == 2
    full = os_error(OSError(errno.ENOSPC, "No space left on device", "/srv/results/x"))
    assert full.exit_code == 1 and "the disk is full" in full.hint  # the machine's fault, not the input's
    long_ = os_error(OSError(errno.ENAMETOOLONG, "File name too long", "a" * 300))
    assert long_.exit_code == 2 and "shorten the name" in long_.hint
