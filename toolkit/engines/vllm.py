"""What vLLM (0.24.0, pinned in the Environment's `packages:`) means by its flags: the one place that knows them.
Read from the 0.24.0 wheel's own source (vllm/engine/arg_utils.py, vllm/config/speculative.py,
vllm/v1/spec_decode/metrics.py, vllm/entrypoints/...); no GPU run of it has been made here yet.

    meaning(preset)              PresetMeaning: speculative or not (the method of --speculative-config), the cap
                                 (--max-num-seqs when set), dummy weights (--load-format dummy), model folders
    speculative_config(preset)   the --speculative-config JSON as a dict ({} when absent or not JSON)
    pinned_version(env)          the vllm version the Environment pins in `packages:`
    knob_error(env, knob, value) one tuned value checked against the same parser table (bench tune)
    spec_errors(env)             each preset checked against the pinned vLLM's own parser (toolkit/engines/vllm_flags.py)
    acceptance_counters(metrics) its /metrics spec-decode counters (accepted tokens, draft tokens, drafts, requests)
    acceptance_counts(metrics)   the same as AcceptanceCounts (tokens, steps, requests), every engine's shape
    acceptance_length(c0, c1)    1 + accepted / drafts between two samples: tokens per verification step
    command(args, python)        `python -m vllm.entrypoints.cli.main serve MODEL --flag ...` (process, container, job)
    server_state(info)           the arm facts of /version and, in dev mode, /server_info?config_format=json
    last_error_line(log)         vLLM's own last word in a crashed server's log (not its "see root cause above")
    ENGINE                       the Engine the registry returns for `engine: vllm` (toolkit/engines/base.py)

Presets are written as `vllm serve MODEL --flag value`: dashes, no leading `--`; `model:` is the positional
MODEL; `speculative-config:` is the JSON string vLLM takes, e.g.
`'{"method": "eagle3", "model": "/models/drafter", "num_speculative_tokens": 3}'` or
`'{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4}'`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from toolkit.engines import vllm_flags
from toolkit.engines.base import AcceptanceCounts, Engine, flag_args
from toolkit.engines.facts import EngineFacts, KnobInfo, PresetMeaning, ServerState

PACKAGE = "vllm"               # the `packages:` entry that pins it
MODEL = "model"                # the positional MODEL of `vllm serve`
SERVED_NAME = "served-model-name"
SPEC_CONFIG = vllm_flags.SPEC_FLAG
MAX_SEQS = "max-num-seqs"      # requests scheduled at once (vLLM's cap; its default depends on the GPU)
LOAD_FORMAT, DUMMY_LOAD_FORMAT = "load-format", "dummy"
TOKENIZER = "tokenizer"
DISABLE_LOG_STATS = "disable-log-stats"  # turns the /metrics counters off

# its /metrics counters (vllm/v1/spec_decode/metrics.py:229-231; prometheus_client exposes counters with
# `_total`; labels engine and model_name), and the finished requests (vllm/v1/metrics/loggers.py:678,
# label finished_reason)
ACCEPTED, DRAFT_TOKENS, DRAFTS = ("vllm:spec_decode_num_accepted_tokens", "vllm:spec_decode_num_draft_tokens",
                                  "vllm:spec_decode_num_drafts")
REQUESTS = "vllm:request_success"
COUNTERS = (ACCEPTED, DRAFT_TOKENS, DRAFTS, REQUESTS)

FACTS = EngineFacts("vllm", {k.name: k for k in (
    KnobInfo(MAX_SEQS, "server", 1, "requests vLLM schedules at once"),
    KnobInfo("max-num-batched-tokens", "server", 1, "tokens per scheduler step"),
)}, level="server")


def speculative_config(preset: dict[str, Any]) -> dict[str, Any]:  # json-edge: vLLM's --speculative-config JSON
    """The preset's --speculative-config as vLLM parses it ({} when absent or not a JSON object)."""
    raw = preset.get(SPEC_CONFIG)
    try:
        cfg = json.loads(raw) if isinstance(raw, str) else None
    except json.JSONDecodeError:
        return {}
    return cfg if isinstance(cfg, dict) else {}


def method(cfg: dict[str, Any]) -> str | None:
    """The speculative method vLLM runs for this config (its __post_init__: a model "ngram" without a method
    is ngram, another model without one is draft_model)."""
    if not cfg:
        return None
    if cfg.get("method"):
        return str(cfg["method"])
    return "ngram" if cfg.get("model") in ("ngram", "[ngram]") else "draft_model" if cfg.get("model") else None


def model_folders(preset: dict[str, Any]) -> list[tuple[str, str]]:
    """(key, folder) of each model folder the preset reads: the model and the draft model."""
    out = [(MODEL, preset[MODEL])] if isinstance(preset.get(MODEL), str) else []
    cfg = speculative_config(preset)
    draft = cfg.get("model")
    if isinstance(draft, str) and method(cfg) not in ("ngram", "ngram_gpu", "suffix"):
        out.append((f"{SPEC_CONFIG}.model", draft))
    return out


def meaning(preset: dict[str, Any]) -> PresetMeaning:
    m = method(speculative_config(preset))
    cap = preset.get(MAX_SEQS)
    return PresetMeaning("vllm", speculative=m is not None, algorithm=m, cap=int(cap) if cap is not None else None,
                         dummy_weights=preset.get(LOAD_FORMAT) == DUMMY_LOAD_FORMAT,
                         reads=frozenset(folder for _, folder in model_folders(preset)))


def render_args(args: dict[str, Any]) -> list[str]:
    """`{model: M, max-num-seqs: 64, enable-prefix-caching: false, x: true}` ->
    `M --max-num-seqs 64 --no-enable-prefix-caching --x`: MODEL first (positional); false is the flag's
    --no- form (vLLM's on/off flags are BooleanOptionalAction; the preset check refuses false for one without)."""
    args = dict(args)
    return ([str(args.pop(MODEL))] if MODEL in args else []) + flag_args(args, false="no-")


def command(args: dict[str, Any], python: str = "python") -> list[str]:
    """`python -m vllm.entrypoints.cli.main serve MODEL --flag ...`: the module the `vllm` script calls."""
    return [python, "-m", "vllm.entrypoints.cli.main", "serve", *render_args(args)]


def served_name(preset: dict[str, Any]) -> str | None:
    """The model name the server answers to: the first --served-model-name, else MODEL."""
    name = preset.get(SERVED_NAME)
    if isinstance(name, list):
        name = name[0] if name else None
    return name or preset.get(MODEL)


def pinned_version(env: Any) -> str | None:
    for pkg in getattr(env, "packages", None) or []:
        if pkg.name.split("[", 1)[0].lower() == PACKAGE:
            return pkg.version
    return None


def spec_errors(env: Any) -> list[tuple[tuple, str, str | None]]:
    """Mistakes of an `engine: vllm` Environment before any server starts, each at its own key: no pinned vLLM,
    a preset without MODEL, a flag or value the pinned vLLM's parser refuses, a malformed speculative config."""
    version = pinned_version(env)
    if version is None:
        return [(("engine",), "a vllm environment pins its vLLM: no `vllm` under `packages:`",
                 "add `packages: [{name: vllm, version: 0.24.0}]` (docs/engines.md)")]
    out: list[tuple[tuple, str, str | None]] = []
    table = vllm_flags.load_table(version)
    for name, preset in env.servers.items():
        args = dict(preset)
        if not isinstance(args.get(MODEL), str):
            out.append((("servers", name), f"preset {name} has no `model:` (vllm serve MODEL)",
                        "add `model: /path/to/model` (the folder or hub id vLLM serves)"))
        if table is None:
            continue
        args.pop(MODEL, None)  # positional
        for key, msg, hint in vllm_flags.check_preset(args, table):
            out.append((("servers", name, key), msg, hint))
    return out


def spec_warnings(env: Any) -> list[str]:
    version = pinned_version(env)
    if version is None or vllm_flags.load_table(version) is not None:
        return []
    return [f"vllm {version}: its server flags were not checked (the toolkit ships the table of "
            f"{', '.join(shipped()) or 'no version'}); make one with `python -m toolkit.engines.vllm_flags SRC DEPS` "
            "from that version's wheel (docs/engines.md)"]


def shipped() -> list[str]:
    return sorted(p.stem.removeprefix("vllm-") for p in vllm_flags.DATA.glob("vllm-*.json"))


def _sum(metrics: dict[str, float], name: str) -> tuple[float, bool]:
    total, seen = 0.0, False
    for key, v in metrics.items():
        base = key.split("{", 1)[0]
        if base in (name, name + "_total"):
            total += v
            seen = True
    return total, seen


def acceptance_counters(metrics: dict[str, float]) -> dict[str, float] | None:  # data-keyed: /metrics series names
    """The spec-decode counters of a /metrics sample ({"name{labels}": value}), summed over their label sets
    (engines, finish reasons) and keyed by their names without `_total`; None without them (no speculation,
    or --disable-log-stats)."""
    out: dict[str, float] = {}
    any_spec = False
    for name in COUNTERS:
        out[name], seen = _sum(metrics, name)
        any_spec = any_spec or (seen and name != REQUESTS)
    return out if any_spec else None


def acceptance_counts(metrics: dict[str, float]) -> AcceptanceCounts | None:
    """The counters in the engines' common shape (toolkit/engines/base.py acceptance_counts): tokens made by
    drafting steps (accepted + one per draft), the steps (drafts), finished requests. Their difference over a
    cell gives 1 + accepted / drafts, as acceptance_length."""
    c = acceptance_counters(metrics)
    return None if c is None else AcceptanceCounts(c[ACCEPTED] + c[DRAFTS], c[DRAFTS], c[REQUESTS])


@dataclass(frozen=True)
class AcceptanceBetween:
    """vLLM's speculation between two counter samples (acceptance_length)."""

    accept_length: float  # tokens per verification step: 1 + accepted / drafts
    tokens: float  # accepted + one per draft (what the verify steps emitted)
    steps: float  # drafts
    requests: float  # finished requests
    draft_tokens: float
    acceptance_rate: float  # accepted / draft tokens (0 without draft tokens)


def acceptance_length(before: dict[str, float] | None, after: dict[str, float] | None) -> AcceptanceBetween | None:
    """Tokens per verification step between two counter samples (acceptance_counters): 1 + accepted / drafts
    (each draft's verify emits its accepted tokens and one of the target's own), with the counts behind it;
    None without drafts."""
    if not before or not after:
        return None
    d = {k: after[k] - before[k] for k in COUNTERS}
    if d[DRAFTS] <= 0:
        return None
    return AcceptanceBetween(accept_length=1 + d[ACCEPTED] / d[DRAFTS], tokens=d[ACCEPTED] + d[DRAFTS],
                             steps=d[DRAFTS], requests=d[REQUESTS], draft_tokens=d[DRAFT_TOKENS],
                             acceptance_rate=d[ACCEPTED] / d[DRAFT_TOKENS] if d[DRAFT_TOKENS] > 0 else 0.0)


def server_state(info: dict | None) -> ServerState:
    """What a running vLLM says about itself: `version` (GET /version) and, where the server runs with
    VLLM_SERVER_DEV_MODE=1, `vllm_config` (GET /server_info?config_format=json: the resolved VllmConfig, whose
    scheduler_config.max_num_seqs is the effective cap and speculative_config the resolved speculation)."""
    if not info:
        return ServerState.of(engine="vllm", server_info_read=False)
    cfg = info.get("vllm_config") if isinstance(info.get("vllm_config"), dict) else {}
    sched = cfg.get("scheduler_config") or {}
    spec = cfg.get("speculative_config") or {}
    return ServerState.of(engine="vllm", server_info_read=bool(cfg), engine_version=info.get("version"),
                          max_running_requests=sched.get("max_num_seqs") if isinstance(sched, dict) else None,
                          speculative={k: spec[k] for k in ("method", "model", "num_speculative_tokens",
                                                            "prompt_lookup_min", "prompt_lookup_max")
                                       if isinstance(spec, dict) and spec.get(k) is not None})


# Its log lines: `(APIServer pid=12) ERROR 12-06 21:03:28 [core.py:123] text` (vllm/logger.py _FORMAT; the
# process prefix since the V1 engine). A failed start ends with the front end's wrapper, which only points
# above: the engine core's own exception is the last word worth showing (vllm/v1/engine/utils.py:1273).
WRAPPERS = ("See root cause above", "Engine core initialization failed", "EngineCore failed to start",
            "Worker failed with error", "Traceback (most recent call last)")
EXCEPTION = re.compile(r"^(?:\([^)]*\)\s+)?(?:[A-Za-z_][\w.]*\.)?([A-Z]\w*(?:Error|Exception|Exit)):\s*(.+)$")
ERROR_LEVEL = re.compile(r"^(?:\([^)]*\)\s+)?(?:ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d \[[^\]]+\] (.+)$")


def last_error_line(log: str) -> str | None:
    """The last exception line (`ValueError: ...`) that is not a wrapper pointing elsewhere; else the last
    ERROR-level line; else argparse's `error:` line (an unknown flag); None when the log says none."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    for pattern in (EXCEPTION, ERROR_LEVEL):
        for line in reversed(lines):
            if pattern.match(line) and not any(w in line for w in WRAPPERS):
                return line[:300]
    for line in reversed(lines):
        if ": error: " in line or line.startswith("error:"):
            return line[:300]
    return None


def knob_error(env: Any, knob: str, value: Any) -> tuple[str, str | None] | None:
    """What the pinned vLLM's parser says of `--knob value` (bench tune's values, each before any launch):
    (message, hint), or None when it takes it (or no table ships for that version: spec_warnings says so)."""
    table = vllm_flags.load_table(pinned_version(env))
    if table is None:
        return None
    if knob == MODEL:
        return (f"`{MODEL}` is vllm serve's positional MODEL, the served model itself: not a knob",
                "tune server flags (e.g. max-num-seqs, max-num-batched-tokens) or the speculative config")
    errors = vllm_flags.check_preset({knob: value}, table)
    return (errors[0][1], errors[0][2]) if errors else None


class VLLMEngine(Engine):
    name, title = "vllm", "vLLM"
    facts = FACTS
    # a process where vLLM is installed; a container of the image `toolkit build env` builds (docker), or of
    # a Slurm target's image (container); the Slurm job's server command is `command` (docs/engines.md)
    launchers = frozenset({"process", "docker", "container"})
    builds_image = True
    image_template = "engines/vllm/Dockerfile.j2"  # vllm (and torch) as the Environment's `packages:` pin them
    slurm_jobs = True
    tunes_server_flags = True   # knob values checked against the pinned vLLM's parser table (toolkit/tune/space.py)
    flag_check = "load"
    exclusive_gpus = True
    ignore_eos = True  # a /v1 body's top-level ignore_eos (its extension of the OpenAI API)
    knob_separator = "-"
    acceptance = "metrics"
    metrics_counters = f"vLLM /metrics counters 1 + {ACCEPTED} / {DRAFTS}"

    def meaning(self, env: Any, arm: str) -> PresetMeaning:
        return meaning(env.servers.get(arm, {}) or {})

    def server_command(self, args: dict, python: str) -> list[str]:
        return command(args, python)

    def served_name(self, args: dict) -> str | None:
        return served_name(args)

    def pinned_version(self, env: Any) -> str | None:
        return pinned_version(env)

    def knob_error(self, env: Any, knob: str, value: Any) -> tuple[str, str | None] | None:
        return knob_error(env, knob, value)

    def server_state(self, info: dict | None) -> ServerState:
        return server_state(info)

    def acceptance_counts(self, metrics: dict[str, float]) -> AcceptanceCounts | None:
        return acceptance_counts(metrics)

    def spec_errors(self, env: Any) -> list[tuple[tuple, str, str | None]]:
        return spec_errors(env)

    def spec_warnings(self, env: Any) -> list[str]:
        return spec_warnings(env)


ENGINE = VLLMEngine()
