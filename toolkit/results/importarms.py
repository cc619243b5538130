"""`toolkit results import A B --arm base --arm spec`: several result files as the arms of one run.

What makes them comparable, checked before anything is written (bad input: exit 2):
- alignment: every arm shares at least one (domain, concurrency) cell with the baseline, and where both
  ran unbounded (concurrency 0) at a request rate, the same rate. Levels only one side ran are imported and
  named in a methodology note; they get no speed-up.
- pairing: a speed-up is paired only when the arms saw the same prompts in the same order. Neither
  sglang.bench_serving nor `vllm bench serve` writes the prompts (their per-request lists are input_lens,
  output_lens, ttfts, itls, generated_texts, errors, vllm also start_times), so by default the arms are
  unpaired: the report shows the throughput ratio and says why there is no paired CI. A file that carries
  the prompts (a `prompts` list beside the per-request lists, as a patched client can write) is paired by
  prompt hash, request by request. `--same-prompts` asserts what the files cannot show (the same dataset,
  seed and order): the requests pair by index, after the per-request input lengths, where the files carry
  them, were checked equal; the assertion is recorded in the archive (source.pairing).
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict

from toolkit.errors import ToolkitError
from toolkit.schema.manifest import ArmState, Check, Derived
from toolkit.schema.records import CellSummary, RequestRecord

PAIRINGS = ("prompt-hashes", "asserted", "unpaired", "one-arm")
UNPAIRED_WHY = ("unpaired: the result files carry no prompts, so nothing shows the arms saw the same ones "
                "(pass --same-prompts when they were recorded with the same dataset, seed and order)")


def prompt_hashes(run: dict) -> list[str] | None:
    """Per request, the sha256 (16 hex) of its prompt, when the run carries a `prompts` list; else None."""
    prompts = run.get("prompts")
    if not isinstance(prompts, list) or not prompts:
        return None
    return [hashlib.sha256((p if isinstance(p, str) else json.dumps(p, sort_keys=True)).encode()).hexdigest()[:16]
            for p in prompts]


def cell_of(run: dict, domain: str | None) -> tuple[str, int]:
    mc = run.get("max_concurrency")
    return str(domain or run.get("dataset_name") or "default"), int(mc) if isinstance(mc, (int, float)) and mc else 0


def pairing_of(files: dict[str, list[dict]], same_prompts: bool) -> str:
    if len(files) == 1:
        return "one-arm"
    if all(prompt_hashes(r) is not None for runs in files.values() for r in runs):
        return "prompt-hashes"
    return "asserted" if same_prompts else "unpaired"


def align(files: dict[str, list[dict]], names: dict[str, str], baseline: str, domain: str | None) -> list[Check]:
    """Refuse files that cannot be compared; returns methodology checks for levels only one side ran."""
    def levels(arm: str) -> dict[tuple[str, int], set]:  # data-keyed: cell
        out: dict[tuple[str, int], set] = defaultdict(set)
        for r in files[arm]:
            out[cell_of(r, domain)].add(str(r.get("request_rate")))
        return out

    base = levels(baseline)
    checks: list[Check] = []
    for arm in files:
        if arm == baseline:
            continue
        mine = levels(arm)
        common = sorted(set(mine) & set(base))
        if not common:
            raise ToolkitError(
                f"arm {arm} ({names[arm]}) shares no cell with the baseline {baseline} ({names[baseline]}): "
                f"{arm} ran {_fmt(mine)}, {baseline} ran {_fmt(base)}",
                hint="import files measured at the same concurrency levels and dataset (or name one --domain "
                     "for both when only the dataset names differ)")
        for key in common:
            if key[1] == 0 and mine[key] != base[key]:
                raise ToolkitError(
                    f"arm {arm} and the baseline {baseline} both ran {key[0]} without a concurrency cap but at "
                    f"different request rates ({', '.join(sorted(mine[key]))} vs {', '.join(sorted(base[key]))}): "
                    "their cells cannot be aligned", hint="import runs of the same request rate")
        only = sorted((set(mine) ^ set(base)) - set(common))
        if only:
            checks.append(Check(check="import-levels-not-shared", severity="warning",
                                message=f"{arm} vs {baseline}: cells only one side ran get no speed-up: {_fmt(only)}"))
    return checks


def _fmt(keys) -> str:
    return ", ".join(f"{d} c={c}" for d, c in sorted(keys)) or "nothing"


def check_asserted(files: dict[str, list[dict]], baseline: str, domain: str | None, names: dict[str, str]) -> None:
    """--same-prompts: the per-request input lengths, where both files carry them, must agree request by request."""
    def lens(arm: str) -> dict:  # data-keyed: cell
        out = {}
        for r in files[arm]:
            key = cell_of(r, domain)
            if isinstance(r.get("input_lens"), list) and key not in out:
                out[key] = r["input_lens"]
        return out

    base = lens(baseline)
    for arm in files:
        if arm == baseline:
            continue
        for key, xs in lens(arm).items():
            ys = base.get(key)
            if ys is None:
                continue
            bad = next((i for i, (x, y) in enumerate(zip(xs, ys)) if x != y), None)
            if len(xs) != len(ys) or bad is not None:
                what = (f"request {bad} has {xs[bad]} input tokens in {names[arm]} and {ys[bad]} in {names[baseline]}"
                        if bad is not None else f"{len(xs)} requests in {names[arm]}, {len(ys)} in {names[baseline]}")
                raise ToolkitError(f"--same-prompts, but at {key[0]} c={key[1]} the files differ: {what}",
                                   hint="these files were not recorded with the same prompts; import without "
                                        "--same-prompts (unpaired)")


def prompt_checks(records: dict[tuple, list[RequestRecord]], baseline: str) -> list[Check]:
    """Paired by prompt hash: cells where the arms' prompts differ pair only over the common ones."""
    out = []
    for (arm, domain, conc), recs in sorted(records.items()):
        base = records.get((baseline, domain, conc))
        if arm == baseline or base is None:
            continue
        a, b = {r.prompt_id for r in recs}, {r.prompt_id for r in base}
        if a != b:
            out.append(Check(check="arms-saw-different-prompts", severity="warning", message=(
                f"{arm} vs {baseline} {domain} c={conc}: {len(a & b)} prompts in common of {len(a)} and "
                f"{len(b)}: the paired ratio is over the common ones only")))
    return out


def import_derived(cells: list[CellSummary], records: dict[tuple, list[RequestRecord]], baseline: str,
                   pairing: str, speculative: set[str], arm_info: dict[str, ArmState], checks: list[Check]) -> Derived:
    """The derived block of a several-arm import: speed-ups (paired or not, as `pairing` says), the verdicts
    the runner makes from them, and the methodology notes. One server launch per file: the paired CIs are
    widened by the default launch noise of both sides (toolkit/stats/comparisons.py widen)."""
    from toolkit.stats import DEFAULT_LAUNCH_CV
    from toolkit.results.speedups import speedups
    from toolkit.results.verdicts import verdicts

    rows = speedups(cells, records, baseline)
    if pairing == "unpaired":
        for r in rows:
            r.paired_ratio, r.ci_low, r.ci_high, r.n_pairs, r.ci_method = None, None, None, 0, UNPAIRED_WHY
        checks = [*checks, Check(check="import-unpaired", severity="warning", message=(
            f"speed-ups are {UNPAIRED_WHY}; no paired CI, so no crossover or threshold verdict"))]
    elif pairing == "asserted":
        checks = [*checks, Check(check="import-pairing-asserted", severity="warning", message=(
            "paired by request index because --same-prompts said the files were recorded with "
            "the same prompts in the same order (the files carry no prompts to check it by)"))]
    else:
        checks = [*checks, *prompt_checks(records, baseline)]
    v = verdicts(rows, cells, arm_info, speculative)
    return Derived(baseline=baseline, **v._asdict(), speculative_arms=sorted(speculative), methodology=checks,
                   arm_info=arm_info, noise={"source": "default", "launch_cv": DEFAULT_LAUNCH_CV})
