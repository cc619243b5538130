"""The pinned SGLang source for preflight: fetch it (wheel via `pip download`, or a git checkout),
copy it to a scratch tree, apply the spec's patches with GNU patch (the same command the Dockerfile
runs) and byte-compile every touched file. Failures name the patch, file, hunk and line.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from toolkit.build.records import cache_dir
from toolkit.errors import SpecError, ToolFailure
from toolkit.patches import PatchInfo

HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def _run(cmd: list[str], timeout: float = 900, **kw) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    except FileNotFoundError:
        raise ToolFailure(f"{cmd[0]} is not installed", hint=f"install {cmd[0]} (apt-get install {cmd[0]})") from None
    except subprocess.TimeoutExpired:
        raise ToolFailure(f"{' '.join(cmd[:4])} ... took over {timeout:.0f} s") from None


def fetch_sglang(sg, python: str, log=print) -> Path:
    """Folder that holds the pristine `sglang/` package of the pinned version (cached; a file lock
    keeps parallel runs from fetching or unpacking the same version at once)."""
    lock_path = cache_dir() / "sglang" / ".fetch.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _fetch(sg, python, log)


def _fetch(sg, python: str, log) -> Path:
    if sg.source == "git":
        ref = sg.git_ref or f"v{sg.version}"
        url_key = hashlib.sha256(sg.git_url.encode()).hexdigest()[:10]
        dest = cache_dir() / "sglang" / "git" / f"{url_key}-{re.sub(r'[^A-Za-z0-9._-]', '_', ref)}"
        if not (dest / "python" / "sglang").is_dir():
            tmp = dest.with_name(dest.name + ".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            log(f"git clone {sg.git_url} at {ref}")
            proc = _run(["git", "clone", "--quiet", "--depth", "1", "--branch", ref, sg.git_url, str(tmp)])
            if proc.returncode != 0:
                raise ToolFailure(f"git clone of {sg.git_url} at {ref} failed: {proc.stderr.strip()[-400:]}",
                                  hint="check sglang.git_url / git_ref and network access")
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp, dest)
        return dest / "python"
    dest = cache_dir() / "sglang" / sg.version / f"py{python}"
    src = dest / "src"
    if (src / "sglang").is_dir():
        return src
    wheels = sorted(dest.glob("sglang-*.whl"))
    if not wheels:
        log(f"pip download sglang=={sg.version} (Python {python} wheel, no dependencies)")
        proc = _run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                     "--python-version", python, "--dest", str(dest), f"sglang=={sg.version}"])
        wheels = sorted(dest.glob("sglang-*.whl"))
        if proc.returncode != 0 or not wheels:
            tail = "\n".join(ln for ln in proc.stderr.strip().splitlines() if not ln.startswith("WARNING"))[-600:]
            raise ToolFailure(f"pip download sglang=={sg.version} failed: {tail}",
                              hint="is the version on PyPI for this Python? (or use `source: git`)")
    tmp = Path(tempfile.mkdtemp(prefix="src.", dir=dest))
    with zipfile.ZipFile(wheels[0]) as zf:
        zf.extractall(tmp, [n for n in zf.namelist() if n.startswith("sglang/")])
    os.replace(tmp, src)
    return src


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def scratch_tree(pristine: Path, touched: set[str]) -> Path:
    """A scratch folder with `sglang/` linked from the cache; files a patch touches are real copies."""
    base = cache_dir() / "scratch"
    base.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="preflight-", dir=base))
    shutil.copytree(pristine / "sglang", root / "sglang", copy_function=_link_or_copy,
                    ignore=shutil.ignore_patterns("__pycache__"))
    for rel in touched:
        f = root / rel
        if f.exists():
            f.unlink()
            shutil.copy2(pristine / rel, f)
    return root


@dataclass
class Hunk:
    number: int          # 1-based within its file
    line: int            # line of the @@ header in the patch file
    header: str
    new_lines: dict[int, int] = field(default_factory=dict)  # line in the patched file -> line in the patch


def patch_hunks(path: Path, info: PatchInfo) -> dict[str, list[Hunk]]:
    """Per package-relative file: its hunks, with where each lies in the patch file."""
    out: dict[str, list[Hunk]] = {}
    current: list[Hunk] | None = None
    new_no = 0
    files = iter(info.files)
    for lineno, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if line.startswith("+++ "):
            current = out.setdefault(next(files), []) if line.split()[1] != "/dev/null" else None
            continue
        m = HUNK_RE.match(line)
        if m and current is not None:
            current.append(Hunk(len(current) + 1, lineno, line.split(" @@")[0] + " @@"))
            new_no = int(m.group(3))
            continue
        if current and line[:1] in ("+", " ") and not line.startswith("+++"):
            if line[:1] == "+":
                current[-1].new_lines[new_no] = lineno
            new_no += 1
    return out


def apply_patch(root: Path, path: Path, info: PatchInfo, version: str) -> list[str]:
    """Apply one patch to the scratch tree; raise SpecError naming patch, file and hunk; return warnings."""
    proc = _run(["patch", "--forward", "--batch", "--no-backup-if-mismatch", "-r", "-", f"-p{info.strip}",
                 "-d", str(root), "-i", str(path.resolve())], timeout=120)
    hunks = patch_hunks(path, info)
    current, warnings = None, []
    for line in proc.stdout.splitlines():
        if m := re.match(r"^(?:patching|checking) file '?([^']+)'?$", line.strip()):
            current = m.group(1)
            continue
        m = re.match(r"^Hunk #(\d+) (FAILED|succeeded) at (\d+)(?: with fuzz (\d+))?(?: \(offset (-?\d+) lines?\))?",
                     line.strip())
        if not m:
            continue
        n = int(m.group(1))
        hunk = hunks.get(current or "", [None] * n)[n - 1] if current in hunks and n <= len(hunks[current]) else None
        where = f"hunk #{n} of {current}" + (f" (`{hunk.header}`)" if hunk else "")
        if m.group(2) == "FAILED":
            raise SpecError(f"{where} does not apply to sglang {version}: its context no longer matches the source",
                            hint=f"regenerate {path.name} against sglang {version} (or pin the version it was "
                                 "written for)", file=path, line=hunk.line if hunk else None)
        if m.group(4) or m.group(5):
            warnings.append(f"{path.name}: {where} applied with "
                            + ", ".join(x for x in (f"fuzz {m.group(4)}" if m.group(4) else "",
                                                    f"offset {m.group(5)} lines" if m.group(5) else "") if x))
    if proc.returncode != 0:
        text = (proc.stdout + proc.stderr).strip()
        line = None
        if m := re.search(r"can't find file to patch at input line (\d+)", text):
            line = int(m.group(1))
            msg = f"the file a patch section names does not exist in sglang {version}"
        elif "Reversed (or previously applied) patch detected" in text:
            msg = f"{current or 'a file'} already carries this change (patch reversed or applied twice)"
        else:
            msg = f"patch failed: {text.splitlines()[-1] if text else f'exit {proc.returncode}'}"
        raise SpecError(msg, hint="check the patch's layout and target version", file=path, line=line)
    return warnings


def compile_touched(root: Path, touched: dict[str, tuple[Path, PatchInfo]]) -> None:
    """Byte-compile each patched Python file; a syntax error names the file, its line, the compiler's
    message, and the patch line that wrote it."""
    for rel, (patch_path, info) in sorted(touched.items()):
        f = root / rel
        if not rel.endswith(".py") or not f.is_file():
            continue
        try:
            compile(f.read_bytes(), rel, "exec", dont_inherit=True)
        except SyntaxError as exc:
            hunks = patch_hunks(patch_path, info).get(rel, [])
            patch_line = next((h.new_lines[exc.lineno] for h in hunks if exc.lineno in h.new_lines), None)
            if patch_line is None:  # the error shows on a context line: point at the nearest added line above
                added = sorted((n, pl) for h in hunks for n, pl in h.new_lines.items() if n <= (exc.lineno or 0))
                patch_line = added[-1][1] if added else None
            text = (exc.text or "").rstrip()
            raise SpecError(f"{rel}:{exc.lineno}: {exc.msg} (after applying {patch_path.name})"
                            + (f"\n    {text.strip()}" if text else ""),
                            hint="fix the patch: the patched file must be valid Python",
                            file=patch_path, line=patch_line) from None


PARSER_DEPS = ["triton", "msgspec", "pyzmq", "pybase64", "orjson", "IPython"]


def install_parser_deps(log=print) -> Path:
    """pip install --target the packages SGLang's parser imports beyond what the toolkit venv has."""
    from toolkit.build.flags import parser_deps_dir

    target = parser_deps_dir()
    log(f"pip install --target {target} {' '.join(PARSER_DEPS)}")
    proc = _run([sys.executable, "-m", "pip", "install", "--quiet", "--upgrade", "--target", str(target),
                 *PARSER_DEPS], timeout=1800)
    if proc.returncode != 0:
        raise ToolFailure(f"pip install of the parser deps failed: {proc.stderr.strip()[-600:]}")
    return target
