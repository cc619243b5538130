"""What SGLang (0.5.17, /work/shared/FACTS.md) means by its flags: the one place that knows them.

    meaning(preset)              PresetMeaning: speculative or not, the algorithm, the cap it implies
                                 (48 with speculation on and max-running-requests unset), dummy weights
    canonical(params)            what SGLang would really run for these speculative flags, or why it refuses
    FACTS.knobs                  the server flags the tuner may search (each value is a server launch)
    CAP_LINE, SERVER_INFO_SPEC_FIELDS   how the server says so itself (its log, its /server_info)
    STARTUP_MARKS                the start-up's phases as its log shows them (toolkit.serve.logs.startup_phases)
    command(args, python)        the exact `python -m sglang.launch_server --flag value ...` of a preset
    server_state(info)           the arm facts its /server_info gives (bench's runner; results' import)
    acceptance_counters(metrics) its /metrics acceptance counters (tokens, verify steps, requests)
    ENGINE                       the Engine the registry returns for `engine: sglang` (toolkit/engines/base.py)

Flags are written as in a preset: dashes, no leading `--`.
"""

from __future__ import annotations

import re
from typing import Any

from toolkit.engines.base import AcceptanceCounts, Engine, flag_args
from toolkit.engines.facts import EngineFacts, KnobInfo, PresetMeaning, ServerState

ALGORITHM = "speculative-algorithm"
DRAFT_MODEL = "speculative-draft-model-path"
MODEL = "model-path"
SERVED_NAME = "served-model-name"
MAX_RUNNING = "max-running-requests"
LOAD_FORMAT = "load-format"
DUMMY_LOAD_FORMAT = "dummy"          # random weights SGLang fills itself
DETERMINISTIC = "enable-deterministic-inference"
THRESHOLD = "speculative-disable-batch-threshold"  # the toolkit's patch (envs/patches/)
STEPS, TOPK, DRAFT = "speculative-num-steps", "speculative-eagle-topk", "speculative-num-draft-tokens"
ADAPTIVE, REJECTION = "speculative-adaptive", "speculative-use-rejection-sampling"

# Synthetic acceptance (SGLang 0.5.17, sglang/srt/speculative/spec_utils.py, read by the server process at start):
# the speculative step accepts this mean length whatever the drafter proposes (off when < 0). The Matrix's
# `synthetic_acceptance:` sets them per arm launch (docs/bench.md#synthetic-acceptance).
SIMULATE_ACC_LEN = "SGLANG_SIMULATE_ACC_LEN"
SIMULATE_ACC_METHOD, SIMULATE_ACC_METHOD_DEFAULT = "SGLANG_SIMULATE_ACC_METHOD", "match-expected"
SIMULATE_ACC_TOKEN_MODE, SIMULATE_ACC_TOKEN_MODE_DEFAULT = "SGLANG_SIMULATE_ACC_TOKEN_MODE", "fixed"


def simulate_env(accept_len: float) -> dict[str, str]:  # data-keyed: variable names
    """A server's environment forcing a mean acceptance length: the length and, written out, the defaults of
    the method and token mode (so the archive says them even if a later SGLang changes its defaults)."""
    return {SIMULATE_ACC_LEN: f"{float(accept_len):g}", SIMULATE_ACC_METHOD: SIMULATE_ACC_METHOD_DEFAULT,
            SIMULATE_ACC_TOKEN_MODE: SIMULATE_ACC_TOKEN_MODE_DEFAULT}


def simulated_length(env: dict | None) -> float | None:
    """The acceptance length a server environment forces (SIMULATE_ACC_LEN >= 0), else None."""
    raw = (env or {}).get(SIMULATE_ACC_LEN)
    try:
        value = float(raw) if raw is not None else None
    except ValueError:
        return None
    return value if value is not None and value >= 0 else None


IMPLICIT_SPEC_CAP = 48    # speculation on and max-running-requests unset: SGLang resets the cap to 48
DUMMY_WEIGHT_SEED = 1234  # initialize_dummy_weights(seed=1234) in 0.5.x: the same random weights each launch
DUMMY_WEIGHT_SOURCE = "sglang weight_utils.initialize_dummy_weights"
# its start-up line when it applies the implicit cap (srt/arg_groups/speculative_hook.py)
CAP_LINE = re.compile(r"Max running requests is reset to (\d+)")
# Its log lines: `[2026-12-04 14:59:04] text` (`[... TP0] ` with a rank), local time of its host, whole seconds.
LOG_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?: [^\]]*)?\] ")
LOG_STAMP_FORMAT = "%Y-%m-%d %H:%M:%S"
# Where a start-up's time goes: the first line holding each text in 0.5.17's log (name, text, report label);
# `first_line` is any stamped line: the main process has imported SGLang.
STARTUP_MARKS = (
    ("first_line", None, "first log line"),                  # the main process imported SGLang
    ("server_args", "server_args=", "server_args"),          # its arguments resolved
    ("scheduler", "Init torch distributed begin", "scheduler"),  # the scheduler process started and imported
    ("memory_pool", "Memory pool end", "memory pool"),       # weights loaded, KV cache allocated
    ("ready", "The server is fired up", "ready"),            # CUDA graphs captured
)
# the speculative settings /server_info reports (ServerArgs fields at top level)
SERVER_INFO_SPEC_FIELDS = ("speculative_algorithm", "speculative_draft_model_path", "speculative_num_steps",
                           "speculative_eagle_topk", "speculative_num_draft_tokens",
                           "speculative_disable_batch_threshold")
SERVER_INFO_LOAD_FORMAT = "load_format"
EAGLE_FAMILY = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE")
SG = "sglang 0.5.17 srt/arg_groups/speculative_hook.py"

FACTS = EngineFacts("sglang", {k.name: k for k in (
    KnobInfo(STEPS, "server", 1, "draft steps per verification (EAGLE family)"),
    KnobInfo(TOPK, "server", 1, "branches per draft step (EAGLE family)"),
    KnobInfo(DRAFT, "server", 2, "tokens verified per step"),
    KnobInfo("speculative-ngram-max-bfs-breadth", "server", 1, "NGRAM: widest draft tree (becomes the topk)"),
    KnobInfo("speculative-ngram-min-bfs-breadth", "server", 1, "NGRAM: narrowest draft tree"),
    KnobInfo("speculative-ngram-max-trie-depth", "server", 1, "NGRAM: longest suffix matched"),
    KnobInfo(MAX_RUNNING, "server", 1, f"requests a server runs at once ({IMPLICIT_SPEC_CAP} with speculation unset)"),
    KnobInfo(THRESHOLD, "server", 1, "stop drafting from this many running requests (the toolkit's patch in "
             "envs/patches/)"),
)}, level="server")


def meaning(preset: dict[str, Any]) -> PresetMeaning:
    speculative = ALGORITHM in preset
    implicit = speculative and MAX_RUNNING not in preset
    cap = preset.get(MAX_RUNNING)
    return PresetMeaning(
        "sglang", speculative=speculative, algorithm=preset.get(ALGORITHM) or None,
        cap=int(cap) if cap is not None else IMPLICIT_SPEC_CAP if implicit else None, cap_implicit=implicit,
        dummy_weights=preset.get(LOAD_FORMAT) == DUMMY_LOAD_FORMAT,
        reads=frozenset(folder for _, folder in model_folders(preset)))


def model_folders(preset: dict[str, Any]) -> list[tuple[str, str]]:
    """(flag, folder) of each model folder the preset reads: the model and a draft model."""
    return [(f, preset[f]) for f in (MODEL, DRAFT_MODEL) if isinstance(preset.get(f), str)]


def render_args(args: dict[str, Any]) -> list[str]:
    """`{tp-size: 8, trust-remote-code: true, x: false, l: [a, b]}` -> `--tp-size 8 --trust-remote-code --l a b`."""
    return flag_args(args, false=None)


def command(args: dict[str, Any], python: str = "python") -> list[str]:
    return [python, "-m", "sglang.launch_server", *render_args(args)]


def model_path(preset: dict[str, Any]) -> str | None:
    return preset.get(MODEL) or preset.get("model")


def served_name(preset: dict[str, Any]) -> str | None:
    """The model name the server answers to (the name clients send)."""
    return preset.get(SERVED_NAME) or preset.get(MODEL)


def implicit_cap_warning(name: str, preset: dict[str, Any]) -> str | None:
    """The spec warning for a preset that leaves SGLang's implicit cap in place."""
    m = meaning(preset)
    if not (m.cap_implicit and m.algorithm):
        return None
    return (f"servers.{name}: {ALGORITHM} {m.algorithm} without {MAX_RUNNING}: SGLang caps it at "
            f"{IMPLICIT_SPEC_CAP}; set it explicitly")


def server_says_dummy(server_info: dict | None) -> bool:
    """Does a running server say it serves random weights (its /server_info's load format)?"""
    return (server_info or {}).get(SERVER_INFO_LOAD_FORMAT) == DUMMY_LOAD_FORMAT


def _algorithm(params: dict) -> str | None:
    algo = params.get(ALGORITHM)
    return str(algo).upper() if algo else None


def canonical(params: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """What SGLang 0.5.17 would run for these preset values: (the values, "") or (None, why it refuses).
    A rewrite SGLang makes by itself is applied, so two spellings of one setting compare equal."""
    p = dict(params)
    algo = _algorithm(p)
    steps, topk, draft = p.get(STEPS), p.get(TOPK), p.get(DRAFT)
    tuned_spec = any(k in p for k in (STEPS, TOPK, DRAFT))
    if algo is None:
        return (None, f"{', '.join(k for k in (STEPS, TOPK, DRAFT) if k in p)} without {ALGORITHM} "
                      "does nothing") if tuned_spec else (p, "")
    adaptive = bool(p.get(ADAPTIVE))
    if algo in ("DFLASH", "DSPARK") and (steps not in (None, 1) or topk not in (None, 1)):
        line = 175 if algo == "DFLASH" else 325
        return None, f"{algo} runs one step with topk 1 and overrides other values ({SG}:{line})"
    if algo == "NGRAM" and TOPK in p:
        return None, (f"with NGRAM SGLang replaces {TOPK} by speculative-ngram-max-bfs-breadth "
                      f"({SG}:699); tune that flag instead")
    if algo not in EAGLE_FAMILY:
        return p, ""
    if adaptive:
        if DRAFT in p:
            return None, f"with {ADAPTIVE} SGLang sets draft tokens to num-steps + 1 ({SG}:796)"
        return p, ""
    if steps is None:
        if topk is not None or draft is not None:
            return None, (f"{TOPK} and {DRAFT} need {STEPS}: "
                          f"without it SGLang chooses all three and asserts the other two are unset ({SG}:588-595)")
        return p, ""
    if topk is None or draft is None:
        return None, (f"give {STEPS}, {TOPK} and {DRAFT} together: "
                      f"SGLang asserts them set or unset as one ({SG}:588-595)")
    if topk > 1 and str(p.get("attention-backend", "")) == "trtllm_mha":
        return None, f"attention-backend trtllm_mha supports topk 1 only ({SG}:603-606)"
    if topk != 1 and p.get(REJECTION):
        return None, f"{REJECTION} requires topk 1 ({SG}:620-623)"
    backend = p.get("attention-backend")
    if topk > 1 and int(p.get("page-size", 1) or 1) > 1 and backend and backend not in ("flashinfer", "fa3", "triton"):
        return None, f"topk > 1 with page-size > 1 needs attention-backend flashinfer, fa3 or triton ({SG}:666-681)"
    if topk == 1:
        p[DRAFT] = steps + 1  # SGLang's own rewrite, with a warning (speculative_hook.py:657-665)
    elif draft - 1 > tree_capacity(steps, topk):
        return None, (f"{draft} draft tokens need more than the {tree_capacity(steps, topk)} candidates a tree "
                      f"of {steps} steps x topk {topk} holds (topk + (steps-1) x topk^2): torch.topk fails at start-up "
                      "(sglang 0.5.17 srt/speculative/eagle_utils.py:106-110)")
    return p, ""


def tree_capacity(steps: int, topk: int) -> int:
    """Candidates an EAGLE draft tree of `steps` x `topk` holds; SGLang verifies draft tokens - 1 of them."""
    return topk + (steps - 1) * topk * topk


def server_state(info: dict | None) -> ServerState:
    """What a running SGLang server says about itself, from its /server_info (0.5.x: the ServerArgs fields
    at top level, the scheduler's live state under internal_states[0]). None where it said nothing.

    `max_running_requests` is the scheduler's effective limit (internal_states[0]; 0.5.17 also writes the
    resolved value back to the top-level field: 48 when speculation is on and the flag unset, None for a
    plain server whose limit comes from its KV-cache size). Whether the flag was given is the preset's to say."""
    if not info:
        return ServerState.of(engine="sglang", server_info_read=False)
    states = info.get("internal_states") or [{}]
    st0 = states[0] if isinstance(states, list) and states and isinstance(states[0], dict) else {}
    mrr = st0.get("max_running_requests", info.get("max_running_requests"))
    return ServerState.of(engine="sglang", server_info_read=True, engine_version=info.get("version"),
                          max_running_requests=mrr,
                          speculative={k: info[k] for k in SERVER_INFO_SPEC_FIELDS if info.get(k) is not None},
                          avg_spec_accept_length=st0.get("avg_spec_accept_length"))


# what an imported client's result file (sglang.bench_serving) keeps of /server_info: the tree's shape only
IMPORTED_SPEC_FIELDS = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")


def imported_state(info: dict | None) -> ServerState:
    """The arm facts of a /server_info another client saved beside its results (toolkit results import):
    the top-level fields only (no live scheduler state), the tree's shape where speculation is on. Nothing
    said without one."""
    if not isinstance(info, dict):
        return ServerState()
    algo = info.get("speculative_algorithm")
    return ServerState.of(server_info_read=True, engine="sglang", engine_version=info.get("version"),
                          speculative_algorithm=algo, max_running_requests=info.get("max_running_requests"),
                          speculative={k: info[k] for k in IMPORTED_SPEC_FIELDS if info.get(k) is not None and algo})


# its acceptance counters in /metrics (with --enable-metrics): tokens generated, verify steps, requests done
ACCEPT_TOKENS, ACCEPT_STEPS, ACCEPT_REQUESTS = ("sglang:generation_tokens_total", "sglang:spec_verify_calls_total",
                                                "sglang:num_requests_total")


def acceptance_counters(metrics: dict[str, float]) -> dict[str, float] | None:  # data-keyed: /metrics series names
    """The three counters of a /metrics sample ({"name{labels}": value}), summed over their label sets; None
    without them (no --enable-metrics)."""
    out = {name: 0.0 for name in (ACCEPT_TOKENS, ACCEPT_STEPS, ACCEPT_REQUESTS)}
    seen = False
    for key, v in metrics.items():
        name = key.split("{", 1)[0]
        if name in out:
            out[name] += v
            seen = True
    return out if seen else None


class SGLangEngine(Engine):
    name, title = "sglang", "SGLang"
    top_k_off = (-1,)  # SamplingParams.verify: "top_k must be -1 (disable), or at least 1"
    facts = FACTS
    launchers = frozenset({"docker", "process", "container"})
    slurm_jobs = True
    tunes_server_flags = True
    builds_image = True
    image_template = "Dockerfile.j2"
    requires_image = True
    flag_check = "build"
    reports_server_info = True
    spans_nodes = True
    exclusive_gpus = True
    synthetic_acceptance = True
    ignore_eos = True  # SamplingParams.ignore_eos: /generate's sampling_params, a /v1 body's top level
    knob_separator = "-"
    dummy_weight_seed = DUMMY_WEIGHT_SEED
    acceptance = "metrics"

    def meaning(self, env: Any, arm: str) -> PresetMeaning:
        return meaning(env.servers.get(arm, {}) or {})

    def server_command(self, args: dict, python: str) -> list[str]:
        return command(args, python)

    def canonical(self, params: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
        return canonical(params)

    def served_name(self, args: dict) -> str | None:
        return served_name(args)

    def pinned_version(self, env: Any) -> str | None:
        return env.sglang.version if getattr(env, "sglang", None) else None

    def server_state(self, info: dict | None) -> ServerState:
        return server_state(info)

    def acceptance_counts(self, metrics: dict[str, float]) -> AcceptanceCounts | None:
        c = acceptance_counters(metrics)
        return None if c is None else AcceptanceCounts(c[ACCEPT_TOKENS], c[ACCEPT_STEPS], c[ACCEPT_REQUESTS])


ENGINE = SGLangEngine()
