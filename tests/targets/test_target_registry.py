"""One Target adapter per kind of place arms run, looked up by `target.kind` (toolkit/targets/__init__.py):
nothing in bench/ branches on a target kind, imports a kind's module or probes a launcher with getattr; an
unknown kind is refused at its line; and a fourth kind registered here runs a matrix end to end on the
embedded CPU engine through the registry alone (no runner module knows it)."""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from toolkit import targets
from toolkit.errors import ToolkitError
from toolkit.specs import load_spec
from toolkit.schema.manifest import Hardware, TargetRecord
from toolkit.targets import LaunchArgs, Slot, Target, TargetSpec, deal

from tests.helpers import write_matrix

TOOLKIT = Path(__file__).resolve().parent.parent.parent / "toolkit"
RUNNERS = [TOOLKIT / "bench", TOOLKIT / "tune"]  # the runner and the tuner that drives it
KINDS = r"(local|hosts|external|slurm)"
# a target kind compared with a name, a slot target or launcher told apart by its class, a kind's own module
# imported, a launcher's capability found by getattr: the Target (plan.target) or the Launcher protocol is asked
BRANCHES = [
    re.compile(r"\bkind\s*(==|!=)\s*[\"']"),
    re.compile(r"\bkind\s+(not\s+)?in\s*[(\[{]"),
    re.compile(rf"(==|!=)\s*[\"']{KINDS}[\"']"),
    re.compile(rf"[\"']{KINDS}[\"']\s*(==|!=)"),
    re.compile(r"isinstance\([^,]+,\s*\(?[\w., ]*(Target|Launcher)\b"),
    re.compile(r"\bfrom toolkit\.(slurm|targets\.\w+)\b|\bimport toolkit\.slurm\b"),
    re.compile(r"getattr\(\s*(self\.)?launcher\s*,"),
    re.compile(rf"[\"']kind[\"']\s*:\s*[\"']{KINDS}[\"']"),  # a target made by naming its kind
]


def test_no_target_kind_branch_in_bench_or_tune() -> None:
    found = []
    for path in sorted(p for d in RUNNERS for p in d.rglob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if any(p.search(line) for p in BRANCHES):
                found.append(f"{path.relative_to(TOOLKIT.parent)}:{n}: {line.strip()}")
    assert not found, "ask the Target (plan.target, toolkit.targets.get(kind)) instead:\n" + "\n".join(found)


def test_the_pattern_list_catches_a_branch() -> None:
    for line in ('if plan.m.target.kind == "slurm":', "if t.kind != 'external':", 'if kind in ("local", "hosts"):',
                 'return {**kw, "kind": "slurm"} if x == "slurm" else kw', "if isinstance(t, ExternalTarget):",
                 "if isinstance(launcher, (SlurmLauncher, Foo)):", "from toolkit.slurm.launcher import slurm_launcher",
                 'step = getattr(launcher, "cell_step", None)', 'getattr(self.launcher, "hardware", None)',
                 'return {"kind": "external", "urls": {a: url for a in arms}}', "t.get('kind') == 'external'"):
        assert any(p.search(line) for p in BRANCHES), line


def test_the_registry_names_each_kind() -> None:
    assert targets.names()[:4] == ["local", "hosts", "external", "slurm"]
    assert not targets.get("external").starts_servers and targets.get("slurm").starts_servers
    assert targets.get("hosts").reads_hosts_spec and not targets.get("local").reads_hosts_spec
    with pytest.raises(ToolkitError) as e:
        targets.get("slurn")
    assert "unknown target kind 'slurn'" in e.value.message and "did you mean 'slurm'?" in e.value.hint
    assert targets.lookup("zzz") is None and targets.lookup(None) is None
    with pytest.raises(ToolkitError):
        targets.unregister("local")


@dataclass(frozen=True)
class CloudTarget:
    """Where the fake cloud runs a slot's arms."""

    region: str
    kind: ClassVar[str] = "fakecloud"

    def record(self) -> TargetRecord:
        return TargetRecord(kind="fakecloud", region=self.region)


def cloud_launcher(env_spec, preset: str, log_path: Path):
    """The embedded engine, as a launcher that has two of the protocol's optional capabilities."""
    from toolkit.serve import model_dir_for
    from toolkit.serve.transformers import TransformersLauncher

    class CloudLauncher(TransformersLauncher):
        hardware = Hardware(host="cloud-node-1", gpus="all")

        def archive_files(self) -> dict[str, str]:
            return {f"cloud/{preset}.txt": f"{preset} placed by the fake cloud\n"}

    return CloudLauncher(model_dir_for(env_spec), args=dict(env_spec.model.servers[preset]), log_path=log_path)


class FakeCloud(Target):
    """A fourth kind: one slot per region, the servers started here on the embedded engine."""

    kind = "fakecloud"

    def __init__(self) -> None:
        self.preflights = 0

    def slots(self, spec, engine, hosts_spec) -> list[Slot]:
        return deal([Slot(f"cloud-{r}", CloudTarget(r), hardware=Hardware(host=f"cloud-{r}", gpus="all"))
                     for r in ("eu", "us")], spec.model.arms)

    def preflight(self, plan) -> list:
        self.preflights += 1
        return super().preflight(plan)

    def launcher_kwargs(self, plan, slot, arm: str, log_dir: Path) -> LaunchArgs:
        return LaunchArgs(Path(log_dir) / f"{arm}.log")

    def launcher(self, plan, arm: str, kw: LaunchArgs):
        return cloud_launcher(plan.env_spec, plan.preset_name(arm), kw.log_path)


MATRIX = """\
    arms: [baseline, ngram]
    workloads: [coding]
    concurrency: [1]
    requests: 2
    output_len: 8
    seed: 7
    target: {kind: fakecloud}
    """


@pytest.fixture
def fake_cloud():
    t = targets.register(FakeCloud())
    try:
        yield t
    finally:
        targets.unregister(t.kind)


def test_an_unregistered_kind_is_refused_at_its_line(tmp_path: Path) -> None:
    m = write_matrix(tmp_path, MATRIX)
    with pytest.raises(ToolkitError) as e:
        load_spec(m)
    assert e.value.line == 10 and "expected 'local', 'hosts', 'external' or 'slurm', got 'fakecloud'" in str(e.value)


@pytest.mark.slow
def test_a_registered_fourth_target_runs_a_matrix(tmp_path: Path, fake_cloud) -> None:
    from toolkit.bench.matrix import run_matrix
    from toolkit.results.archive import open_archive
    from toolkit.results.verify import errors, verify_run

    m = write_matrix(tmp_path, MATRIX)
    result = run_matrix(load_spec(m), results_root=tmp_path / "results", log=lambda _: None)
    assert result.status == "complete", result.why
    assert fake_cloud.preflights == 1 and len(result.cells) == 2
    assert all(c.status == "ok" for c in result.cells)
    manifest = open_archive(result.path).manifest
    assert [(s.name, s.arms, s.target.model_dump(exclude_unset=True)) for s in manifest.slots] == [
        ("cloud-eu", ["baseline"], {"kind": "fakecloud", "region": "eu"}),
        ("cloud-us", ["ngram"], {"kind": "fakecloud", "region": "us"})]
    assert manifest.matrix.resolved["target"]["kind"] == "fakecloud"
    for arm in ("baseline", "ngram"):  # the launcher's capabilities, asked through the protocol
        assert (result.path / f"cloud/{arm}.txt").read_text() == f"{arm} placed by the fake cloud\n"
    assert not errors(verify_run(result.path)), textwrap.indent("\n".join(map(str, verify_run(result.path))), "  ")


@pytest.mark.slow
def test_a_registered_fourth_target_runs_a_matrix_through_the_cli(tmp_path: Path, fake_cloud) -> None:
    """The same kind, registered in this process (the registry has no plug-in loader), through the real Typer app
    of `toolkit bench matrix`: its spec validated, its slots run and archived, the run verified by the CLI too."""
    from typer.testing import CliRunner

    from toolkit.cli import app
    from toolkit.results.archive import open_archive

    m = write_matrix(tmp_path, MATRIX)
    out = CliRunner().invoke(app, ["bench", "matrix", str(m), "--results", str(tmp_path / "results")])
    assert out.exit_code == 0, out.output
    (run,) = sorted((tmp_path / "results").glob("*/*/manifest.json"))
    manifest = open_archive(run.parent).manifest
    assert [s.target.model_dump(exclude_unset=True) for s in manifest.slots] == [{"kind": "fakecloud", "region": "eu"},
                                                                                {"kind": "fakecloud", "region": "us"}]
    assert fake_cloud.preflights == 1 and (run.parent / "cloud/ngram.txt").is_file()
    verified = CliRunner().invoke(app, ["results", "verify", str(run.parent)])
    assert verified.exit_code == 0, verified.output


def test_tune_asks_the_adapter_for_its_generated_matrices_target() -> None:
    """What bench tune's generated matrices are sent to (toolkit/tune/servers.py), asked of the adapters."""
    assert targets.get("local").runs_here and not any(targets.get(k).runs_here for k in ("hosts", "external", "slurm"))
    def written(t: TargetSpec) -> dict:  # as a generated matrix writes it (toolkit/tune/specs.py run_matrix)
        return t.model_dump(mode="json", exclude_defaults=True)

    assert written(targets.serving({"a": "http://h:1"})) == {"kind": "external", "urls": {"a": "http://h:1"}}
    ext = targets.get("external")
    assert written(ext.for_arms(TargetSpec(kind="external", url="http://one"), {"t1": "base", "base": "base"})) == \
        {"kind": "external", "urls": {"t1": "http://one", "base": "http://one"}}
    assert written(ext.for_arms(TargetSpec(kind="external", urls={"base": "http://b", "spec": "http://s"},
                                           independent=True), {"trial-1": "spec", "base": "base"})) == \
        {"kind": "external", "urls": {"trial-1": "http://s", "base": "http://b"}, "independent": True}
    local = TargetSpec(kind="local", gpus=["0"])
    assert targets.get("local").for_arms(local, {"t1": "base"}) == local
