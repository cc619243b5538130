"""toolkit/specs/genconfig.py keeps what the installed transformers said (its generation_config keys, what
GenerationConfig.validate() said of a whole config) in <cache>/genconfig/: a spec checked again is judged
the same, and without importing transformers (~0.6 s of CPU in every CLI call that validates one)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

# each check runs in a fresh interpreter (the module's answers are cached per process)
CHECK = """
import json, sys
from toolkit.specs import genconfig
out = {"unknown": genconfig.unknown_key("prompt_lookup_num_tokenz"), "known": genconfig.unknown_key("num_beams"),
       "refused": genconfig.refused({"num_return_sequences": 2}), "taken": genconfig.refused({"num_beams": 2}),
       "imported": "transformers" in sys.modules}
print(json.dumps(out))
"""


def check(cache: Path) -> dict:
    r = subprocess.run([sys.executable, "-c", CHECK], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={"PATH": "/usr/bin:/bin", "TOOLKIT_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_a_second_check_answers_the_same_without_importing_transformers(tmp_path: Path) -> None:
    first = check(tmp_path)
    assert first["imported"] and first["known"] is None and first["taken"] is None
    assert "is not a generation_config key" in first["unknown"][0] and "prompt_lookup_num_tokens" in first["unknown"][1]
    assert first["refused"][0] == "num_return_sequences" and "refuses it" in first["refused"][1]
    memo, = (tmp_path / "genconfig").iterdir()
    assert "prompt_lookup_num_tokens" in json.loads(memo.read_text())["keys"]
    second = check(tmp_path)
    assert not second.pop("imported") and second == {k: v for k, v in first.items() if k != "imported"}


def test_an_unreadable_memo_is_asked_again(tmp_path: Path) -> None:
    check(tmp_path)
    memo, = (tmp_path / "genconfig").iterdir()
    memo.write_text("{not json")
    again = check(tmp_path)
    assert again["imported"] and again["refused"][0] == "num_return_sequences"
    assert json.loads(memo.read_text())["refused"]  # written whole again
