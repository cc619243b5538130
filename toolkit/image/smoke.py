"""Smoke check of a built image, run in a throw-away container (no network):
the SGLang version equals the pin, every patched file carries the patch's added lines, the presets'
flags exist in the image's own SGLang (static read of the installed package; SGLang's own parser too
when the image has its dependencies), `import sglang` works when the image installed its deps, and,
with GPUs on the host, torch sees CUDA. An image of an engine checked when its spec loads (vllm): its pinned
packages' versions (run_version_smoke).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from toolkit.image import flags_static
from toolkit.image.flags import EXACT_SCRIPT, MARK, PLACEHOLDER_MODEL
from toolkit.errors import ToolFailure

SMOKE_MAIN = r"""
import importlib.metadata, importlib.util, json, os, subprocess, sys
d = json.loads(os.environ["TOOLKIT_SMOKE"])
res = {"python": sys.version.split()[0], "failures": [], "notes": []}
try:
    res["sglang_version"] = importlib.metadata.version("sglang")
except importlib.metadata.PackageNotFoundError:
    res["sglang_version"] = None
if res["sglang_version"] != d["version"]:
    res["failures"].append(f"sglang version in the image is {res['sglang_version']}, the spec pins {d['version']}")
spec = importlib.util.find_spec("sglang")
pkg = os.path.dirname(spec.origin) if spec and spec.origin else None
if pkg is None:
    res["failures"].append("the sglang package is not installed")
else:
    base = os.path.dirname(pkg)
    for rel, lines in d["patched"].items():
        try:
            text = open(os.path.join(base, rel), encoding="utf-8").read()
        except OSError as e:
            res["failures"].append(f"{rel}: {e}")
            continue
        missing = [ln for ln in lines if ln not in text]
        if missing:
            res["failures"].append(f"{rel} lacks the patched line {missing[0]!r}")
    res["patched_files_checked"] = len(d["patched"])
    names = {n[2:] for f in static_flags(pkg) for n in f["names"] if n.startswith("--")}
    res["flags_static"] = len(names)
    for preset, keys in d["preset_keys"].items():
        for k in keys:
            if k not in names:
                res["failures"].append(f"preset {preset}: --{k} is not a flag of the installed sglang")
try:
    import sglang  # noqa: F401
    res["import_sglang"] = "ok"
except Exception as e:  # noqa: BLE001
    res["import_sglang"] = f"{type(e).__name__}: {e}"
    (res["failures"] if d["deps"] else res["notes"]).append(
        f"import sglang: {res['import_sglang']}" + ("" if d["deps"] else " (expected: the spec installs sglang without deps)"))
p = subprocess.run([sys.executable, "-c", d["exact_script"]], input=json.dumps(d["argv"]), capture_output=True, text=True)
line = next((ln for ln in p.stdout.splitlines() if ln.startswith(d["mark"])), None)
if line:
    parses = json.loads(line[len(d["mark"]):])["parses"]
    res["presets_parsed_by_sglang"] = True
    for name, e in parses.items():
        if e:
            res["failures"].append(f"preset {name}: SGLang's parser in the image rejects it: {e}")
else:
    res["presets_parsed_by_sglang"] = False
    tail = [ln for ln in p.stderr.splitlines() if ln.strip()]
    res["notes"].append("SGLang's parser does not import in the image (" + (tail[-1] if tail else "?") + "): flags checked statically")
print(d["mark"] + json.dumps(res))
"""


def smoke_script() -> str:
    src = Path(flags_static.__file__).read_text(encoding="utf-8")
    src = src.split('if __name__ == "__main__":')[0]
    return src + "\n" + SMOKE_MAIN


def added_lines(patches: list[dict]) -> dict[str, list[str]]:  # data-keyed: file path
    """Package-relative file -> the distinctive lines the patches add to it (stripped, non-trivial)."""
    from toolkit.image.source import patch_hunks
    from toolkit.patches import read_patch

    out: dict[str, list[str]] = {}
    for p in patches:
        path = Path(p["path"])
        info = read_patch(path)
        lines = path.read_text(encoding="utf-8").splitlines()
        for rel, hunks in patch_hunks(path, info).items():
            for h in hunks:
                for pl in h.new_lines.values():
                    text = lines[pl - 1][1:].strip()
                    if len(text) > 12:
                        out.setdefault(rel, []).append(text)
    return out


VERSIONS = r"""
import importlib.metadata, json, os
pins, res = json.loads(os.environ["TOOLKIT_SMOKE"]), {"versions": {}, "failures": [], "notes": []}
for name, pin in pins.items():
    base = name.split("[", 1)[0]
    try:
        got = importlib.metadata.version(base)
    except importlib.metadata.PackageNotFoundError:
        got = None
    res["versions"][base] = got
    if got is None or got.split("+", 1)[0] != pin:  # a local build label (2.11.0+cu130) is that version
        res["failures"].append(f"{base} in the image is {got or 'not installed'}, the spec pins {pin}")
print("MARK" + json.dumps(res))
"""


# json-edge: what the container's script printed
def run_version_smoke(client, image: str, pins: dict[str, str]) -> dict:
    """The smoke check of an image whose engine's flags were checked when its spec loaded (vllm): every pinned
    package is installed at its pin (read from its metadata, not imported: vLLM's import probes for a GPU);
    with GPUs on the host, torch sees CUDA."""
    from toolkit.docker_api import run_python

    code, output = run_python(client, image, VERSIONS.replace("MARK", MARK), {"TOOLKIT_SMOKE": json.dumps(pins)})
    line = next((ln for ln in output.splitlines() if ln.startswith(MARK)), None)
    if line is None:
        raise ToolFailure(f"smoke check in {image} did not finish (exit {code}):\n" + "\n".join(output.splitlines()[-15:]))
    return _cuda(client, image, json.loads(line[len(MARK):]))


def _cuda(client, image: str, res: dict) -> dict:  # json-edge: what the container's script printed
    from toolkit.docker_api import run_python

    if shutil.which("nvidia-smi"):
        gcode, gout = run_python(client, image, "import torch; assert torch.cuda.is_available(); "
                                 "print(torch.cuda.device_count(), torch.cuda.get_device_name(0))", {}, gpus=True)
        res["cuda"] = gout.strip().splitlines()[-1] if gout.strip() else f"exit {gcode}"
        if gcode != 0:
            res["failures"].append(f"CUDA check failed: {res['cuda']}")
    else:
        res["notes"].append("no GPU on this host: CUDA check skipped")
    return res


def run_smoke(client, image: str, env, report) -> dict:  # json-edge: what the container's script printed
    from toolkit.docker_api import run_python

    data = {
        "version": env.sglang.version, "deps": env.sglang.deps, "mark": MARK, "exact_script": EXACT_SCRIPT,
        "patched": added_lines(report.patches),
        "preset_keys": {name: list(args) for name, args in env.servers.items()},
        "argv": {name: ["--model-path", PLACEHOLDER_MODEL, *argv] for name, argv in report.presets.items()},
    }
    code, output = run_python(client, image, smoke_script(), {"TOOLKIT_SMOKE": json.dumps(data)})
    line = next((ln for ln in output.splitlines() if ln.startswith(MARK)), None)
    if line is None:
        raise ToolFailure(f"smoke check in {image} did not finish (exit {code}):\n" + "\n".join(output.splitlines()[-15:]))
    return _cuda(client, image, json.loads(line[len(MARK):]))
