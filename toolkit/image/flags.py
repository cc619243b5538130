"""Server presets checked against the flags of one SGLang source tree (pinned version + patches).

Exact where SGLang's own parser imports (`ServerArgs.add_cli_args` on the patched scratch copy, in a
subprocess), otherwise read statically from the source (flags_static). Names must match exactly:
argparse would accept a unique prefix (`--tp` for `--tp-size`), but a later SGLang version can make
it ambiguous, as happened to `cuda-graph-max-bs` in 0.5.23.
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit.image.flags_static import static_flags
from toolkit.errors import SpecError
from toolkit.engines import sglang as sglang_engine
from toolkit.specs import LoadedSpec

MARK = "@@TOOLKIT-FLAGS@@"
PLACEHOLDER_MODEL = "/toolkit-preflight-placeholder-model"

# Flags whose absence has a story: the message says what happened and what to write instead.
TRAPS = {
    "cuda-graph-max-bs": "removed in SGLang 0.5.23 (split into --cuda-graph-max-bs-decode and "
                         "--cuda-graph-max-bs-prefill); argparse now rejects it as an ambiguous abbreviation",
    "enable-flashinfer-allreduce-fusion": "replaced by --flashinfer-allreduce-fusion-backend {auto,trtllm,mnnvl,cutedsl}",
}

EXACT_SCRIPT = r"""
import argparse, contextlib, io, json, sys
data = json.load(sys.stdin)
from sglang.srt.server_args import ServerArgs
p = argparse.ArgumentParser(allow_abbrev=False)
ServerArgs.add_cli_args(p)
flags = []
for a in p._actions:
    if not a.option_strings or isinstance(a, argparse._HelpAction):
        continue
    t = a.type
    typ = None if a.nargs == 0 else {int: "int", float: "float", str: "str", None: "str"}.get(t, "custom")
    ch = None
    if a.choices is not None:
        ch = sorted(str(c) for c in a.choices) if isinstance(a.choices, (set, frozenset)) else [str(c) for c in a.choices]
    h = " ".join((a.help or "").split())
    flags.append({"names": list(a.option_strings), "takes_value": a.nargs != 0, "nargs": a.nargs, "type": typ,
                  "choices": ch, "kind": type(a).__name__, "deprecated": "deprecated" in h.lower()[:60],
                  "help": h[:240]})
parses = {}
for name, argv in data.items():
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            p.parse_args(argv)
        parses[name] = None
    except SystemExit:
        lines = err.getvalue().strip().splitlines()
        parses[name] = lines[-1] if lines else "argparse rejected the arguments"
print(%r + json.dumps({"flags": flags, "parses": parses}))
""" % MARK


@dataclass
class FlagTable:
    flags: list[dict]
    mode: str                      # "exact" (SGLang's argparse) or "static" (read from the source)
    reason: str = ""               # why static was used
    exact_parses: dict[str, str | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.by_name = {n[2:]: f for f in self.flags for n in f["names"] if n.startswith("--")}

    def names(self) -> list[str]:
        return sorted(self.by_name)


def parser_deps_dir() -> Path:
    from toolkit.settings import cache_dir

    return cache_dir() / "parser-deps"


def exact_table(root: Path, presets: dict[str, list[str]], python: str = sys.executable,
                timeout: float = 180) -> FlagTable | str:
    """SGLang's own parser on the tree at `root` (the folder holding `sglang/`), or why it failed."""
    path = [str(root)]
    if parser_deps_dir().is_dir():
        path.append(str(parser_deps_dir()))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path), PYTHONDONTWRITEBYTECODE="1",
               SGLANG_DISABLE_REQUEST_LOGGING="1")
    argvs = {name: ["--model-path", PLACEHOLDER_MODEL, *argv] for name, argv in presets.items()}
    try:
        proc = subprocess.run([python, "-c", EXACT_SCRIPT], input=json.dumps(argvs), capture_output=True,
                              text=True, timeout=timeout, env=env, cwd=root)
    except subprocess.TimeoutExpired:
        return f"importing sglang.srt.server_args took over {timeout:.0f} s"
    for line in proc.stdout.splitlines():
        if line.startswith(MARK):
            data = json.loads(line[len(MARK):])
            return FlagTable(data["flags"], "exact", exact_parses=data["parses"])
    tail = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    return tail[-1] if tail else f"exit {proc.returncode}"


def flag_table(root: Path, presets: dict[str, list[str]], mode: str = "auto") -> FlagTable:
    """mode: auto (exact when SGLang imports, else static), exact, static."""
    reason = "static mode requested"
    if mode in ("auto", "exact"):
        got = exact_table(root, presets)
        if isinstance(got, FlagTable):
            return got
        reason = f"SGLang's parser does not import here ({got}); `toolkit build parser-deps` installs what it needs"
        if mode == "exact":
            raise SpecError(f"exact flag check impossible: {reason}")
    return FlagTable(static_flags(root / "sglang"), "static", reason=reason)


def preset_argv(args: dict[str, Any], table: FlagTable | None = None) -> list[str]:
    """A preset mapping as command-line arguments: true -> --flag, false -> omitted (or --no-flag for
    --flag/--no-flag pairs), a list -> --flag a b, anything else -> --flag value."""
    argv: list[str] = []
    for key, value in args.items():
        info = table.by_name.get(key) if table else None
        if value is True:
            argv.append(f"--{key}")
        elif value is False:
            if info and info["kind"] in ("boolean_optional", "BooleanOptionalAction"):
                argv.append(f"--no-{key}")
        elif isinstance(value, list):
            argv += [f"--{key}", *(str(v) for v in value)]
        else:
            argv += [f"--{key}", str(value)]
    return argv


def _convert(value: Any, typ: str | None) -> tuple[bool, Any]:
    if typ == "int":
        if isinstance(value, (bool, float)):
            return False, value
        try:
            return True, int(value)
        except (TypeError, ValueError):
            return False, value
    if typ == "float":
        if isinstance(value, bool):
            return False, value
        try:
            return True, float(value)
        except (TypeError, ValueError):
            return False, value
    return True, value


def _unknown(key: str, table: FlagTable) -> tuple[str, str]:
    names = table.names()
    close = difflib.get_close_matches(key, names, n=3, cutoff=0.6)
    prefixed = [n for n in names if n.startswith(key)]
    msg = f"unknown SGLang server flag --{key}"
    if key in TRAPS:
        msg += f": {TRAPS[key]}"
    elif len(prefixed) > 1:
        msg += f" (argparse would reject it as an ambiguous abbreviation of {', '.join('--' + p for p in prefixed[:4])})"
    elif len(prefixed) == 1:
        msg += f" (argparse would take it as an abbreviation of --{prefixed[0]}; names must be exact)"
    candidates = prefixed[:2] if prefixed else close
    hint = f"did you mean {' or '.join(repr(c) for c in candidates)}?" if candidates \
        else "see `python -m sglang.launch_server --help` for the version you pin"
    return msg, hint


def check_presets(spec: LoadedSpec, table: FlagTable, version: str) -> list[str]:
    """Raise SpecError (file:line of the preset key) on the first bad argument; return warnings."""
    warnings: list[str] = []
    for preset, args in spec.model.servers.items():
        for key, value in args.items():
            where = ("servers", preset, key)
            info = table.by_name.get(key)
            if info is None:
                msg, hint = _unknown(key, table)
                raise spec.error(where, f"{msg} in sglang {version}", hint=hint)
            nargs = info["nargs"]
            if not info["takes_value"]:
                if not isinstance(value, bool):
                    raise spec.error(where, f"--{key} is an on/off flag and takes no value, got {value!r}",
                                     hint="write `true` to pass it, or remove the key")
            else:
                if isinstance(value, bool):
                    if value is True and nargs in ("?", "*"):
                        pass
                    else:
                        raise spec.error(where, f"--{key} needs a value, got {value!r}",
                                         hint=f"write the value it takes ({info['type'] or 'str'}"
                                              f"{', one of ' + ', '.join(info['choices'][:8]) if info['choices'] else ''})")
                else:
                    values = value if isinstance(value, list) else [value]
                    if isinstance(value, list) and nargs in (None, "?"):
                        raise spec.error(where, f"--{key} takes one value, got a list", hint="write a single value")
                    for v in values:
                        ok, conv = _convert(v, info["type"])
                        if not ok:
                            raise spec.error(where, f"--{key} takes {'an' if info['type'] == 'int' else 'a'} "
                                             f"{info['type']}, got {v!r}", hint="fix the value's type")
                        if info["choices"] is not None and str(conv) not in info["choices"]:
                            close = difflib.get_close_matches(str(conv), info["choices"], n=1)
                            raise spec.error(where, f"--{key}: {conv!r} is not one of "
                                             f"{', '.join(info['choices'][:12])}",
                                             hint=f"did you mean {close[0]!r}?" if close else None)
            if info["deprecated"]:
                warnings.append(f"servers.{preset}.{key}: deprecated in sglang {version}: {info['help'][:160]}")
        cap = sglang_engine.implicit_cap_warning(preset, args)
        if cap:
            warnings.append(cap)
        parse_error = table.exact_parses.get(preset)
        if parse_error:
            raise spec.error(("servers", preset), f"SGLang's own parser rejects this preset: {parse_error}")
    return warnings
