"""The search space of `toolkit bench tune`: which knobs an engine has, which values it accepts (vLLM: each
value against the pinned vLLM's own parser table), and SGLang's own rules between its speculative flags, all
checked before any server starts.

    space = check_space(matrix_spec, env_spec, "ngram")
    space.candidates      # distinct settings SGLang (or transformers) would really run, in grid order
    space.level           # "request" (no restart between trials) or "server"

Knobs of the embedded engine (`engine: transformers`) are per-request `generation_config` keys: every
trial runs on one server. Knobs of SGLang are server flags: every trial is a server launch. The knobs and
SGLang's rules between them (0.5.17: sglang.canonical) are the engines' own (toolkit/engines/); this
module checks a Matrix's space against them. Each message names the SGLang line it comes from. A value SGLang rejects, or a value no feasible combination
can use, is an error at its line in the spec; a combination SGLang would silently rewrite into another
one (topk 1 forces draft tokens = steps + 1) is dropped and named in `notes`.
"""

from __future__ import annotations

import difflib
import itertools
from dataclasses import dataclass, field
from typing import Any

from toolkit import engines, targets
from toolkit.engines import KnobInfo, sglang, transformers
from toolkit.errors import SpecError, did_you_mean
from toolkit.specs import LoadedSpec

TRANSFORMERS_KNOBS = transformers.FACTS.knobs
STEPS, TOPK, DRAFT = sglang.STEPS, sglang.TOPK, sglang.DRAFT


@dataclass
class Space:
    arm: str
    engine: str
    level: str                                   # "request" or "server"
    knobs: list[str]
    candidates: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)
    base: dict[str, Any] = field(default_factory=dict)  # the arm's own values of the knobs (the incumbent)


def _where(arm: str, knob: str, i: int | None = None) -> tuple:
    return ("tune", "space", arm, knob) + ((i,) if i is not None else ())


def check_space(mspec: LoadedSpec, env_spec: LoadedSpec, arm: str) -> Space:
    """The checked space of one arm; SpecError at the tune block's line on the first problem."""
    m, env = mspec.model, env_spec.model
    if m.tune is None:
        raise mspec.error((), "this matrix has no `tune:` block: nothing to search",
                          hint=f"add `tune: {{space: {{{arm}: {{KNOB: [values]}}}}}}` (docs/tune.md)")
    if m.rates is not None or m.sweep is not None:
        raise mspec.error(("rates" if m.rates is not None else "sweep",), "`bench tune` searches at concurrency "
                          "levels; this matrix sends open-loop rates", hint="tune on a copy with `concurrency:` (docs/tune.md); open-loop "
                                                    "tuning is not built yet")
    if m.traces:
        raise mspec.error(("workloads",), "`bench tune` searches at concurrency levels; this matrix replays traces "
                                          "open loop", hint="tune on a copy with bundled or file workloads and "
                                                            "`concurrency:` (docs/tune.md)")
    if arm not in m.tune.space:
        raise mspec.error(("tune", "space"), f"no search space for arm {arm!r}",
                          hint=did_you_mean(arm, list(m.tune.space)) or
                          f"spaces here: {', '.join(m.tune.space)}; or add `{arm}:` under tune.space")
    if arm not in m.arm_names:
        raise mspec.error(("tune", "space", arm), f"arm {arm!r} is not one of the matrix's arms {m.arm_names}",
                          hint=did_you_mean(arm, list(m.arm_names)) or
                          f"add {arm!r} to `arms:`: a tuned arm is one the matrix compares, so its baseline is "
                          "the matrix's baseline")
    if arm == m.baseline_arm:
        raise mspec.error(("tune", "space", arm), f"{arm!r} is the baseline: trials are measured against it",
                          hint="tune a speculative arm; the baseline stays as it is")
    for which in (arm, m.baseline_arm):  # trials are presets written into a copy of the matrix's Environment
        src = m.arm_source(which)
        if src is not None:
            raise mspec.error(("arms", m.arm_index(which)), f"arm {which!r} is preset {src.preset!r} of "
                              f"{src.environment}, not of the matrix's environment {m.environment}: `bench tune` "
                              "searches presets of the matrix's own Environment (each trial a preset written into "
                              "a copy of it)", hint=f"tune it from a matrix whose `environment:` is {src.environment} "
                                                    f"(arms: its baseline and {src.preset})")
    if arm not in env.servers:
        raise mspec.error(("arms",), f"arm {arm!r} is not a server preset of {m.environment}",
                          hint=f"presets there: {', '.join(env.servers)}")
    knobs = m.tune.space[arm]
    for knob, values in knobs.items():
        seen = [repr(v) for v in values]
        for i, v in enumerate(seen):
            if v in seen[:i]:
                raise mspec.error(_where(arm, knob, i), f"{knob} lists {v} twice: each value is one trial",
                                  hint="remove the second one")
    eng = engines.get(env.engine)
    if not eng.reads_generation_config and not eng.tunes_server_flags:
        raise mspec.error(("tune", "space", arm), f"bench tune does not know engine {eng.name!r}'s flags yet (which "
                          "values its server rewrites or refuses)", hint="tune an SGLang, vLLM or embedded-engine "
                          "arm, or compare presets with `toolkit bench matrix`")
    space = (_transformers if eng.reads_generation_config else _server_flags)(mspec, env, arm, knobs)
    if space.level == "server" and not targets.get(m.target.kind).starts_servers:
        raise mspec.error(("target",), f"tuning {', '.join(space.knobs)} restarts the server for every "
                          "trial, and an external target's servers were started by someone else",
                          hint="tune server flags on a target the toolkit launches (local or hosts)")
    if space.level == "request" and m.tune.confirm_launches > 1:
        raise mspec.error(("tune", "confirm_launches"), f"{m.tune.confirm_launches} launches per arm, but the knobs of "
                          f"{arm} ({', '.join(space.knobs)}) are request parameters, measured on one shared server "
                          "with no launch between the arms: there is no launch to repeat",
                          hint="remove `confirm_launches:` (it is for server flags, where each arm is a launch); "
                               "for a narrower confirmation raise `confirm_requests:`")
    return space


def check_matrix(mspec: LoadedSpec) -> None:
    """Everything a run of this Matrix refuses before it starts (`toolkit validate` calls it): what
    bench.plan.check_matrix checks (target, workloads), then the `tune:` block as `bench tune` checks it.
    It lives here, on the tuner's floor, because the tuner sits above bench."""
    from toolkit.bench.plan import check_matrix as check_run, plan_target

    check_tune(mspec, check_run(mspec))
    plan = plan_target(mspec)
    target = targets.get(mspec.model.target.kind)
    target.endpoints(plan, keys=False)  # a CA bundle of the target's URLs that does not load
    try:
        target.endpoints(plan)  # the API key's variable: unset here is a warning (validate may run elsewhere)
    except SpecError as exc:
        mspec.warnings.append(f"{exc.message}: the run refuses to start without it ({exc.hint})")


def check_tune(mspec: LoadedSpec, env_spec: LoadedSpec) -> None:
    """A Matrix's `tune:` block as `bench tune --arm ARM` checks it, for every arm it names (toolkit validate);
    nothing when there is none. SGLang's flags against its source are left to the tune run (check_sglang_flags
    needs that source)."""
    if mspec.model.tune is not None:
        for arm in mspec.model.tune.space:
            check_space(mspec, env_spec, arm)


def _unknown(mspec: LoadedSpec, arm: str, knob: str, catalogue: dict, engine: str) -> None:
    names, eng = list(catalogue), engines.get(engine)
    alt = knob.replace("_" if eng.knob_separator == "-" else "-", eng.knob_separator)
    close = [alt] if alt in catalogue else difflib.get_close_matches(knob, names, n=1, cutoff=0.75)
    if eng.reads_generation_config:
        from toolkit.specs.genconfig import unknown_key

        bad = None if "-" in knob else unknown_key(knob)  # one check of generation_config keys (spec/genconfig.py)
        if bad:
            raise mspec.error(_where(arm, knob), f"unknown knob {knob!r}: {bad[0]}", hint=bad[1])
        what = ("a generation_config key of the embedded engine (engine: transformers), which has no server "
                "flags to tune" if "-" in knob else "a generation_config key the embedded engine's tuner knows")
        raise mspec.error(_where(arm, knob), f"unknown knob {knob!r}: not {what}",
                          hint=f"did you mean {close[0]!r}?" if close else f"knobs here: {', '.join(names)}")
    raise mspec.error(_where(arm, knob), f"unknown knob {knob!r}: {eng.title}'s flags are written with dashes "
                      f"and without the leading --", hint=f"did you mean {close[0]!r}?" if close else
                      f"e.g. {', '.join(names[:3])}")


def _ints(mspec: LoadedSpec, arm: str, knob: str, values: list, info: KnobInfo) -> None:
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, int):
            raise mspec.error(_where(arm, knob, i), f"{knob} takes whole numbers, got {v!r}",
                              hint="write the value without quotes or decimals, e.g. 4")
        if v < info.minimum:
            raise mspec.error(_where(arm, knob, i), f"{knob}: {v} is out of range: it must be >= {info.minimum}",
                              hint=f"{info.help}; allowed: a whole number >= {info.minimum}")


def _transformers(mspec: LoadedSpec, env, arm: str, knobs: dict[str, list]) -> Space:
    gen = transformers.generation_config(env.request_params.get(arm))
    for knob, values in knobs.items():
        info = TRANSFORMERS_KNOBS.get(knob)
        if info is None:
            _unknown(mspec, arm, knob, TRANSFORMERS_KNOBS, "transformers")
        _ints(mspec, arm, knob, values, info)
    lookup, size = transformers.PROMPT_LOOKUP, transformers.NGRAM_SIZE
    if size in knobs and lookup not in knobs and not gen.get(lookup):
        raise mspec.error(_where(arm, size), f"{size} has no effect without "
                          f"prompt lookup: neither the space nor the preset sets {lookup}",
                          hint=f"add {lookup} to tune.space.{arm} or to request_params.{arm}")
    names = list(knobs)
    cands = [dict(zip(names, combo)) for combo in itertools.product(*(knobs[k] for k in names))]
    return Space(arm, "transformers", transformers.FACTS.level, names, cands, base={k: gen.get(k) for k in names})


def _tree_reason(draft: int, knobs: dict, preset: dict) -> str:
    """Why no combination holds `draft` tokens: the largest draft tree the space allows is too small."""
    steps = max(knobs.get(STEPS) or [preset.get(STEPS) or 1])
    topk = max(knobs.get(TOPK) or [preset.get(TOPK) or 1])
    return (f"the largest draft tree here ({steps} steps x topk {topk}) holds {sglang.tree_capacity(steps, topk)} "
            f"candidates (topk + (steps-1) x topk^2) and SGLang verifies draft tokens - 1 of them: torch.topk "
            "fails at start-up (sglang 0.5.17 srt/speculative/eagle_utils.py:106-110)")


def _server_flags(mspec: LoadedSpec, env, arm: str, knobs: dict[str, list]) -> Space:
    """Server-flag knobs (SGLang, vLLM): each value as the engine's own parser takes it (Engine.knob_error:
    vLLM's parser table; SGLang's source is read later, check_sglang_flags), then every combination as the
    engine would run it (Engine.canonical: SGLang's rules between its speculative flags)."""
    eng = engines.get(env.engine)
    preset = dict(env.servers[arm])
    for knob, values in knobs.items():
        if "_" in knob:
            _unknown(mspec, arm, knob, eng.knobs, eng.name)
        for i, v in enumerate(values):  # in the parser's own words first, where the engine has them
            said = eng.knob_error(env, knob, v)
            if said:
                raise mspec.error(_where(arm, knob, i), f"{knob}: {v!r}: {said[0]}", hint=said[1])
        info = eng.knobs.get(knob)
        if info is not None:
            _ints(mspec, arm, knob, values, info)
        elif difflib.get_close_matches(knob, list(eng.knobs), n=1, cutoff=0.85):
            _unknown(mspec, arm, knob, eng.knobs, eng.name)  # a near miss of a known flag: say so now
    names = list(knobs)
    seen: dict[str, dict] = {}
    used: dict[tuple[str, int], bool] = {}
    why: dict[tuple[str, int], str] = {}
    rewritten = refused = 0
    for combo in itertools.product(*(list(enumerate(knobs[k])) for k in names)):
        given = {k: v for k, (_, v) in zip(names, combo)}
        canon, reason = eng.canonical({**preset, **given})
        if canon is None:
            refused += 1
            for k, (i, _) in zip(names, combo):
                why.setdefault((k, i), reason)
            continue
        cand = {k: canon.get(k) for k in names}
        for k, (i, _) in zip(names, combo):
            if cand[k] == given[k]:
                used[(k, i)] = True
        rewritten += cand != given
        seen.setdefault(repr(sorted(cand.items())), cand)
    for k in names:
        for i, v in enumerate(knobs[k]):
            if not used.get((k, i)):
                reason = why.get((k, i)) or (f"SGLang rewrites it in every combination: with topk 1 it sets "
                                              f"draft tokens to num-steps + 1 ({sglang.SG}:657-665)")
                if k == DRAFT and "torch.topk" in reason:
                    reason = _tree_reason(v, knobs, preset)
                raise mspec.error(_where(arm, k, i), f"{k}: {v!r} is never run as written: {reason}",
                                  hint="remove the value, or change the other knobs so some combination uses it")
    notes = []
    if rewritten:
        notes.append(f"{rewritten} combination(s) run as SGLang rewrites them (topk 1 sets draft tokens = "
                     f"num-steps + 1, {sglang.SG}:657-665); duplicates merged")
    if refused:
        notes.append(f"{refused} combination(s) SGLang refuses were left out (the rules: docs/tune.md)")
    if not seen:
        raise mspec.error(("tune", "space", arm), f"no combination of these values is one {eng.title} accepts")
    return Space(arm, eng.name, eng.level, names, list(seen.values()), notes, base={k: preset.get(k) for k in names})


def check_sglang_flags(mspec: LoadedSpec, env_spec: LoadedSpec, space: Space, log=print) -> list[str]:
    """Every knob value as a flag of the pinned SGLang (with the environment's patches), through the same
    preflight `toolkit build env` runs: one preset per knob value, each error at the value's line in the tune
    block. Needs SGLang's source (fetched once with `pip download`, then cached). Returns warnings."""
    from toolkit.errors import SpecError
    from toolkit.image.preflight import preflight
    from toolkit.specs.yamlsrc import Marks

    env, arm = env_spec.model, space.arm
    preset = dict(env.servers[arm])
    knobs = mspec.model.tune.space[arm]
    servers: dict[str, dict] = {}
    marks = Marks(env_spec.marks)
    for k, values in knobs.items():
        for i, v in enumerate(values):
            name = f"tune-{len(servers)}"
            servers[name] = {**preset, k: v}
            for key in preset:
                if env_spec.mark(("servers", arm, key)):
                    marks[("servers", name, key)] = env_spec.mark(("servers", arm, key))
            marks[("servers", name, k)] = mspec.mark(_where(arm, k, i))
    derived = env.model_copy(update={"servers": servers, "request_params": {}})
    probe = LoadedSpec(path=env_spec.path, model=derived, marks=marks, files=env_spec.files)
    try:
        report = preflight(probe, flag_mode="static", log=log)
    except SpecError as exc:
        for name in sorted(servers, key=len, reverse=True):
            exc.message = exc.message.replace(f"servers.{name}", f"tune.space.{arm}")
        raise
    out = set()
    for w in report.warnings:
        for name in sorted(servers, key=len, reverse=True):
            w = w.replace(f"servers.{name}", f"servers.{arm} (tuned)")
        out.add(w)
    return sorted(out)
