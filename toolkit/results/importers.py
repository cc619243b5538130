"""`toolkit results import`: results of other benchmark clients into an archive, so they can be diffed.

- sglang: the JSON lines file of `python -m sglang.bench_serving --output-file F` (one line per run;
  per-request `ttfts`, `itls`, `input_lens`, `output_lens`, `errors` only with `--output-details`).
- vllm: the JSON file of `vllm bench serve --save-result` (per-request lists only with `--save-detailed`).

Each run becomes one cell. The tool's own aggregate figures become the cell's Stats (as the tool
reported them); per-request lists, when present, become RequestRecords and the diff's samples:
ttft = ttfts[i], chunk arrival = ttft + cumulative itls[i] (one chunk per ITL entry), e2e = the last
chunk's arrival (neither tool stores a per-request end time). Without the lists the cell is summary-only
and the diff shows its numbers without a test. Times in both files are seconds; the archive uses ms.

Each file is checked before the archive is made (_load): a run whose keys are the other tool's is refused
naming it (looks_like), and impossible numbers are bad input, not failed requests (_bad_run: lists of one
entry per request, times finite and >= 0, counts whole numbers >= 0).
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path

from toolkit.engines import sglang
from toolkit.schema.manifest import ArmRecord, ArmState, Derived, Manifest, SourceRecord
from toolkit.schema.records import CellSummary, RequestRecord, Stat
from toolkit.errors import ToolkitError, did_you_mean
from toolkit.numbers import problem
from toolkit.results.archive import ArchiveWriter

FORMATS = ("sglang", "vllm")
# archive metric -> key stem in the tools' result files
STEMS = {"sglang": {"ttft_ms": "ttft_ms", "tpot_ms": "tpot_ms", "itl_ms": "itl_ms", "e2e_ms": "e2e_latency_ms"},
         "vllm": {"ttft_ms": "ttft_ms", "tpot_ms": "tpot_ms", "itl_ms": "itl_ms", "e2e_ms": "e2el_ms"}}


# keys only one tool writes: its end-to-end latency stem and its own metadata (sglang bench_serving.py `result`,
# vllm benchmarks/serve.py `result_json`)
MARKS = {"sglang": ("mean_e2e_latency_ms", "median_e2e_latency_ms", "p99_e2e_latency_ms", "server_info",
                    "sharegpt_output_len", "random_output_len", "total_output_tokens_retokenized"),
         "vllm": ("mean_e2el_ms", "median_e2el_ms", "p99_e2el_ms", "endpoint_type", "model_id", "tokenizer_id",
                  "date")}
# per-request lists: one entry per request, as many as `ttfts`
LISTS = ("ttfts", "itls", "input_lens", "output_lens", "errors", "start_times")


def looks_like(run: object) -> str | None:
    """The tool whose result a run's keys say it is (the format with more of its own keys), or None."""
    if not isinstance(run, dict):
        return None
    score = {fmt: sum(k in run for k in keys) for fmt, keys in MARKS.items()}
    best = max(score, key=score.get)
    return best if score[best] > min(score.values()) else None


def _parse(text: str, fmt: str, path: Path) -> tuple[list, list[int | None]]:
    """The runs of a file as `fmt` lays them out, and each run's line (None where unknown)."""
    whole = "expected the JSON file written by `vllm bench serve --save-result`"
    if fmt == "sglang":
        runs, lines = [], []
        for i, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
            except json.JSONDecodeError as exc:
                try:  # one JSON document over many lines: another tool's file, sniffed below
                    doc = json.loads(text)
                except json.JSONDecodeError:
                    raise ToolkitError(f"line is not JSON ({exc.msg})", file=path, line=i,
                                       hint="expected the JSON lines file written by sglang.bench_serving "
                                            "--output-file") from None
                return (doc if isinstance(doc, list) else [doc]), [None]
            items = doc if isinstance(doc, list) else [doc]  # a list on a line: another tool's, sniffed below
            runs += items
            lines += [i] * len(items)
        return runs, lines
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolkitError(f"not JSON ({exc.msg})", file=path, line=exc.lineno, hint=whole) from None
    runs = doc if isinstance(doc, list) else [doc]
    return runs, [None] * len(runs)


def _load(path: Path, fmt: str) -> list[dict]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ToolkitError(f"cannot read {path}: {exc.strerror}", file=path) from None
    runs, lines = _parse(text, fmt, path)
    for i, r in enumerate(runs, 1):
        line = lines[i - 1] if i <= len(lines) else None
        other = looks_like(r)
        if other not in (None, fmt):
            own = [k for k in MARKS[other] if k in r][:3]
            raise ToolkitError(f"run {i} looks like a {other} result ({', '.join(own)}), not {fmt}", file=path,
                               line=line, hint=f"give --format {other}")
        if not isinstance(r, dict) or "completed" not in r or "duration" not in r:
            raise ToolkitError(f"run {i} lacks `completed`/`duration`: not a {fmt} serving benchmark result",
                               file=path, line=line, hint=f"is --format {fmt} right? (sglang | vllm)")
        why = _bad_run(r)
        if why:
            raise ToolkitError(f"run {i}: {why}", file=path, line=line,
                               hint="a result file as the tool wrote it: per-request lists of one length, times "
                                    "finite and >= 0, counts whole numbers >= 0")
    return runs


def _bad_run(r: dict) -> str | None:
    """What makes a run's numbers impossible (None when nothing does): the counts, the duration, and the
    per-request lists, which must be as long as `ttfts` and hold finite times >= 0 and counts >= 0."""
    for key in ("completed", "failed"):
        if r.get(key) is not None and (why := problem(r[key], inclusive=True, integer=True)):
            return f"{key}: {why}"
        if r.get(key) is not None and r[key] != int(r[key]):
            return f"{key}: {r[key]!r} is not a whole number"
    if why := problem(r["duration"], inclusive=True):
        return f"duration: {why}"
    if r["duration"] == 0 and (r.get("completed") or 0) > 0:
        return f"duration: 0 seconds for {r['completed']} completed request(s): no rate can be taken from it"
    if r.get("max_concurrency") is not None and (why := problem(r["max_concurrency"], lower=1, inclusive=True,
                                                                integer=True)):
        return f"max_concurrency: {why}"
    ttfts = r.get("ttfts")
    if ttfts is None:
        return None
    counted = (r.get("completed") or 0) + (r.get("failed") or 0)
    if isinstance(ttfts, list) and counted > len(ttfts):
        return (f"completed{' + failed' if r.get('failed') else ''} is {counted}, but the per-request lists hold "
                f"{len(ttfts)} requests: more requests counted than recorded")
    present = {k: r[k] for k in LISTS if r.get(k) is not None}
    for key, values in present.items():
        if not isinstance(values, list):
            return f"{key}: expected a list (one entry per request), got {type(values).__name__}"
        if len(values) != len(ttfts):
            return f"{key} has {len(values)} entries and ttfts {len(ttfts)}: one per request in each"
    for key in ("ttfts", "start_times", "input_lens", "output_lens"):
        for j, v in enumerate(present.get(key, [])):
            if v is None:
                continue
            why = problem(v, inclusive=True, integer=key.endswith("_lens"))
            if why or (key.endswith("_lens") and v != int(v)):
                return f"{key}[{j}]: {why or f'{v!r} is not a whole number'}"
    for j, gaps in enumerate(present.get("itls", [])):
        if not isinstance(gaps, list):
            return f"itls[{j}]: expected a list of gaps in seconds, got {gaps!r}"
        for g in gaps:
            if why := problem(g, inclusive=True):
                return f"itls[{j}]: {why}"
    return None


def _stat(r: dict, fmt: str, metric: str, n: int) -> Stat | None:
    stem = STEMS[fmt][metric]
    mean, p50 = r.get(f"mean_{stem}"), r.get(f"median_{stem}", r.get(f"p50_{stem}"))
    if mean is None and p50 is None:
        return None
    p90, p99 = r.get(f"p90_{stem}"), r.get(f"p99_{stem}")
    unreliable = [p for p, need, v in (("p90", 10, p90), ("p99", 100, p99)) if v is not None and n < need]
    return Stat(mean=mean, p50=p50, p90=p90, p99=p99, n=n, unreliable=unreliable)


def _records(r: dict, arm: str, domain: str, conc: int, ids: list[str] | None = None) -> list[RequestRecord]:
    """Per-request records from the lists; `ids`: per request its prompt's hash (else its index)."""
    ttfts = r.get("ttfts")
    if not isinstance(ttfts, list):
        return []
    n = len(ttfts)
    itls = r.get("itls") or [[]] * n
    out_lens = r.get("output_lens") or [0] * n
    in_lens = r.get("input_lens") or [None] * n
    errors = r.get("errors") or [""] * n
    starts = r.get("start_times")
    t0 = min(starts) if isinstance(starts, list) and starts else None
    recs = []
    for i in range(n):
        err = errors[i] if i < len(errors) else ""
        ttft = ttfts[i]
        ok = not err and ttft is not None and ttft > 0
        chunk_ms: list[float] = []
        if ok:
            t = ttft * 1000.0
            chunk_ms.append(round(t, 4))
            for gap in itls[i] or []:
                t += gap * 1000.0
                chunk_ms.append(round(t, 4))
        toks = int(out_lens[i] or 0)
        recs.append(RequestRecord(
            arm=arm, domain=domain, concurrency=conc, prompt_id=ids[i] if ids and i < len(ids) else str(i),
            send_s=float(starts[i] - t0) if t0 is not None else 0.0,
            ttft_ms=round(ttft * 1000.0, 4) if ok else None, e2e_ms=chunk_ms[-1] if chunk_ms else None,
            input_tokens=in_lens[i], output_tokens=toks, chunk_ms=chunk_ms,
            chunk_tokens=[1] * len(chunk_ms) if len(chunk_ms) == toks else [],
            tokens_source="tokenizer", error=(err or "request failed") if not ok else None))
    return recs


def _output_len(r: dict, fmt: str, recs: list[RequestRecord]) -> int:
    if fmt == "sglang":
        if str(r.get("dataset_name", "")).startswith("random") and r.get("random_output_len"):
            return int(r["random_output_len"])
        if r.get("sharegpt_output_len"):
            return int(r["sharegpt_output_len"])
    return max((x.output_tokens for x in recs), default=0)


def _server_args(info: dict | None) -> dict:  # data-keyed: server arg name
    if not isinstance(info, dict):
        return {}
    return {k: v for k, v in info.items() if isinstance(v, (str, int, float, bool)) or v is None}


def _arm_name(runs: list[dict], fmt: str) -> str:
    first = runs[0]
    return str(first.get("label") or first.get("backend") or first.get("endpoint_type") or fmt)


def _source(path: Path, fmt: str, runs: list[dict]) -> SourceRecord:
    first = runs[0]
    meta_keys = ("backend", "endpoint_type", "label", "model_id", "tokenizer_id", "dataset_name", "tag",
                 "num_prompts", "request_rate", "burstiness")
    return SourceRecord(format=fmt, tool="sglang.bench_serving" if fmt == "sglang" else "vllm bench serve",
                        file=path.name, sha256=hashlib.sha256(path.read_bytes()).hexdigest(), runs=len(runs),
                        **{k: first[k] for k in meta_keys if first.get(k) is not None})


def import_file(path: str | Path, fmt: str, root: str | Path = "results", *, matrix: str | None = None,
                arm: str | None = None, domain: str | None = None, output_len: int | None = None,
                workload_hash: str = "") -> Path:
    """Write an archive from a result file; returns the run folder."""
    return import_files([path], fmt, root, matrix=matrix, arms=[arm] if arm else None, domain=domain,
                        output_len=output_len, workload_hash=workload_hash)


def import_files(paths: list[str | Path], fmt: str, root: str | Path = "results", *, matrix: str | None = None,
                 arms: list[str] | None = None, baseline: str | None = None, domain: str | None = None,
                 output_len: int | None = None, workload_hash: str = "", same_prompts: bool = False) -> Path:
    """Write one archive from result files, one arm per file (toolkit/results/importarms.py says when they
    are compared paired); returns the run folder. Everything is checked before the archive is created."""
    from toolkit.results import importarms
    from toolkit.results.archive import open_archive
    from toolkit.results.report import summary_markdown

    paths = [Path(p) for p in paths]
    files, baseline = _read_all(paths, fmt, arms, baseline)
    names = list(files)
    file_of = {a: p.name for a, p in zip(names, paths)}
    pairing = importarms.pairing_of(files, same_prompts)
    checks = importarms.align(files, file_of, baseline, domain) if len(files) > 1 else []
    if pairing == "asserted":
        importarms.check_asserted(files, baseline, domain, file_of)
    infos = {a: runs[0].get("server_info") if fmt == "sglang" else None for a, runs in files.items()}
    manifest = _manifest(dict(zip(names, paths)), files, fmt, baseline, pairing, infos)
    writer = ArchiveWriter.create(root, matrix or f"imported-{fmt}", manifest)  # the writer scrubs it
    cells: list[CellSummary] = []
    records: dict[tuple, list[RequestRecord]] = {}
    for a in names:
        for summary, recs in _cells(files[a], fmt, a, domain, output_len, workload_hash, manifest.source.tool,
                                    hashed=pairing == "prompt-hashes"):
            writer.write_cell(summary, recs)
            cells.append(summary)
            records.setdefault((a, summary.domain, summary.concurrency), []).extend(recs)
    derived = Derived()
    if len(files) > 1:
        spec = {a for a, i in infos.items() if isinstance(i, dict) and i.get("speculative_algorithm")} \
            or {a for a in names if a != baseline}  # vllm files name no algorithm: every other arm is compared
        arm_info = {a: ArmState().add_state(sglang.imported_state(infos[a])) for a in names}
        derived = importarms.import_derived(cells, records, baseline, pairing, spec, arm_info, checks)
    writer.finalize("complete", derived=derived, report_md=summary_markdown(open_archive(writer.path)))
    return writer.path


def _read_all(paths: list[Path], fmt: str, arms: list[str] | None,
              baseline: str | None) -> tuple[dict[str, list[dict]], str]:
    """arm -> the runs of its file (in the files' order), and the baseline arm; bad input refused."""
    if fmt not in FORMATS:
        raise ToolkitError(f"--format: unknown format {fmt!r}",
                           hint=did_you_mean(fmt, list(FORMATS)) or "sglang (bench_serving JSON lines) or vllm (bench "
                           "serve JSON)")
    if not paths:
        raise ToolkitError("no result file given", hint="toolkit results import FILE... --format sglang|vllm")
    if arms and len(arms) != len(paths):
        raise ToolkitError(f"{len(paths)} file(s) but {len(arms)} --arm name(s)",
                           hint="name one arm per file, in the files' order: --arm baseline --arm eagle3")
    loaded = []
    for path in paths:
        runs = _load(path, fmt)
        if not runs:
            raise ToolkitError("no benchmark runs in the file", file=path,
                               hint="give the file the tool wrote after a finished benchmark (it is empty, or "
                                    "holds only blank lines)")
        loaded.append(runs)
    names = list(arms) if arms else [_arm_name(runs, fmt) for runs in loaded]
    dup = sorted({a for a in names if names.count(a) > 1})
    if dup:
        raise ToolkitError(f"two files would be arm {dup[0]!r}", hint="name each file's arm: --arm A --arm B (in order)")
    baseline = baseline or names[0]
    if baseline not in names:
        raise ToolkitError(f"--baseline {baseline!r} is none of the arms ({', '.join(names)})",
                           hint="name one of the --arm names (default: the first file's arm)")
    return dict(zip(names, loaded)), baseline


def _manifest(paths: dict[str, Path], files: dict[str, list[dict]], fmt: str, baseline: str, pairing: str,
              infos: dict) -> Manifest:
    """The import's manifest: the baseline file's source (and with several, every arm's), server args per arm."""
    first = files[baseline][0]
    info = infos[baseline]
    versions = {"sglang": info["version"]} if isinstance(info, dict) and info.get("version") else {}
    source = _source(paths[baseline], fmt, files[baseline])
    if len(files) > 1:
        source.arms = {a: _source(p, fmt, files[a]).model_dump(mode="json", exclude_none=True) for a, p in paths.items()}
        source.pairing = pairing
        source.baseline = baseline
    manifest = Manifest(source=source, arms={a: ArmRecord(preset=_server_args(infos[a])) for a in files},
                        engine_versions=versions, baseline=baseline if len(files) > 1 else None)
    if fmt == "vllm" and first.get("date"):
        try:
            manifest.started_at = datetime.strptime(first["date"], "%Y%m%d-%H%M%S").replace(tzinfo=timezone.utc) \
                .strftime("%Y-%m-%dT%H:%M:%S.000000Z")
        except ValueError:
            pass
    return manifest


def _cells(runs: list[dict], fmt: str, arm: str, domain: str | None, output_len: int | None, workload_hash: str,
           tool: str | None, *, hashed: bool):
    """(CellSummary, records) per run of one file: repeats numbered per concurrency level."""
    from toolkit.results.importarms import cell_of, prompt_hashes

    repeats: dict[int, int] = {}
    for r in runs:
        dom, conc = cell_of(r, domain)
        recs = _records(r, arm, dom, conc, prompt_hashes(r) if hashed else None)
        for rec in recs:
            rec.repeat = repeats.get(conc, 0)
        n = int(r.get("completed") or 0)
        metrics = {m: s for m in STEMS[fmt] if (s := _stat(r, fmt, m, n)) is not None}
        if r.get("output_throughput") is not None:
            metrics["output_tok_s"] = Stat(mean=r["output_throughput"], p50=r["output_throughput"], n=1)
        if r.get("request_throughput") is not None:
            metrics["request_s"] = Stat(mean=r["request_throughput"], p50=r["request_throughput"], n=1)
        acc = r.get("accept_length") or r.get("spec_decode_acceptance_length")
        if isinstance(acc, (int, float)):
            metrics["accept_length"] = Stat(mean=float(acc), p50=float(acc), n=n)
        failed = int(r.get("failed") or sum(1 for x in recs if not x.ok))
        total = n + failed
        summary = CellSummary(
            arm=arm, domain=dom, concurrency=conc, repeat=repeats.get(conc, 0),
            output_len=output_len or _output_len(r, fmt, recs), workload_hash=workload_hash, sampling={},
            n_requests=total, n_errors=failed, error_rate=failed / total if total else 0.0,
            duration_s=float(r.get("duration") or 0.0),
            itl_convention=f"per-chunk gap as reported by {tool}", metrics=metrics)
        repeats[conc] = repeats.get(conc, 0) + 1
        yield summary, recs
