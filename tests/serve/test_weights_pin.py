"""An Environment's `weights:` pins: a local launcher checks the folders its preset reads before any start, the
archive's launcher facts record them, and other weights under a pinned path stop the run with exit 2."""

from __future__ import annotations

import pytest

from toolkit.errors import ToolkitError
from toolkit.fsutil import folder_digest
from toolkit.serve import launcher_for
from toolkit.specs import load_spec

SGLANG_ENV = """kind: Environment
name: pinned
engine: sglang
base_image: nvidia/cuda:13.0.1-devel-ubuntu24.04
sglang: {version: 0.5.17}
servers:
  baseline: {model-path: MODEL}
  eagle3: {model-path: MODEL, speculative-algorithm: EAGLE3, speculative-draft-model-path: DRAFT}
"""


def _folders(tmp_path):
    model, draft = tmp_path / "target", tmp_path / "draft"
    for folder, body in ((model, b"target weights"), (draft, b"draft weights")):
        (folder / "sub").mkdir(parents=True)
        (folder / "model.safetensors").write_bytes(body)
        (folder / "sub" / "config.json").write_text("{}")
    return model, draft


def test_a_folder_digest_covers_every_file_and_its_name(tmp_path):
    model, _ = _folders(tmp_path)
    first = folder_digest(model)
    assert folder_digest(model) == first
    (model / ".cache").mkdir()
    (model / ".cache" / "x").write_text("not weights")  # hidden files are not part of the weights
    assert folder_digest(model) == first
    (model / "sub" / "config.json").write_text("{ }")
    assert folder_digest(model) != first
    (model / "sub" / "config.json").write_text("{}")
    (model / "sub" / "config.json").rename(model / "sub" / "config2.json")
    assert folder_digest(model) != first


def _spec(tmp_path, model, draft, pins: dict):
    text = SGLANG_ENV.replace("MODEL", str(model)).replace("DRAFT", str(draft))
    if pins:
        text += "weights:\n" + "".join(f"  {p}: {sha}\n" for p, sha in pins.items())
    (tmp_path / "env.yaml").write_text(text)
    return load_spec(tmp_path / "env.yaml")


def test_the_launcher_checks_what_its_preset_reads_and_records_it(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLKIT_JIT_CACHE", "off")
    model, draft = _folders(tmp_path)
    spec = _spec(tmp_path, model, draft, {model: folder_digest(model), draft: folder_digest(draft)})
    base = launcher_for(spec, "baseline", kind="process")
    assert base.info().weights_checked == {str(model): folder_digest(model)}  # not the draft: not read
    spec_ = launcher_for(spec, "eagle3", kind="process")
    assert spec_.info().weights_checked == {str(model): folder_digest(model), str(draft): folder_digest(draft)}
    unpinned = launcher_for(_spec(tmp_path, model, draft, {}), "baseline", kind="process")
    assert "weights_checked" not in unpinned.info().model_extra


def test_other_weights_under_a_pinned_path_stop_before_the_start(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLKIT_JIT_CACHE", "off")
    model, draft = _folders(tmp_path)
    spec = _spec(tmp_path, model, draft, {model: folder_digest(model), draft: folder_digest(draft)})
    (draft / "model.safetensors").write_bytes(b"retrained")
    launcher_for(spec, "baseline", kind="process")  # the baseline does not read the draft
    with pytest.raises(ToolkitError, match="differ from the Environment's pin") as e:
        launcher_for(spec, "eagle3", kind="process")
    assert e.value.exit_code == 2
    (draft / "model.safetensors").unlink()
    (draft / "sub" / "config.json").unlink()
    (draft / "sub").rmdir()
    draft.rmdir()
    with pytest.raises(ToolkitError, match="env.yaml:[0-9]+:[0-9]+: weights.*does not exist"):
        launcher_for(spec, "eagle3", kind="process")
    launcher_for(spec, "baseline", kind="process")  # a pin the preset does not read is not required


def test_a_malformed_pin_is_refused_at_its_line(tmp_path):
    model, draft = _folders(tmp_path)
    from toolkit.errors import SpecError

    with pytest.raises(SpecError) as e:
        _spec(tmp_path, model, draft, {model: "abc"})
    assert "weights" in str(e.value)
