"""The pinned SGLang source for preflight: fetch it (wheel via `pip download`, or a git checkout),
copy it to a scratch tree, apply the spec's patches with GNU patch (the same command the Dockerfile
runs, `--fuzz=0` unless the spec allows fuzz for a patch) and byte-compile every touched file. Failures
name the patch, file, hunk and line.
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

from toolkit.settings import cache_dir
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
    number: int          # 1-based within its file section
    line: int            # line of the @@ header in the patch file
    header: str
    new_lines: dict[int, int] = field(default_factory=dict)  # line in the patched file -> line in the patch
    old_start: int = 0   # first line of the hunk in the file it applies to, by its header
    old: list[str] = field(default_factory=list)  # the lines the hunk expects there (context and removed)


def patch_sections(path: Path, info: PatchInfo) -> list[tuple[str, list[Hunk]]]:
    """The patch's file sections in order: (package-relative file, its hunks with where each lies). A hunk's
    body is as long as its header's line counts say, so a removed line that reads `-- x` is not a header."""
    sections: list[tuple[str, list[Hunk]]] = []
    current: list[Hunk] | None = None
    new_no = old_left = new_left = 0
    files = iter(info.files)
    for lineno, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if current and (old_left > 0 or new_left > 0):
            tag, hunk = line[:1], current[-1]
            if tag == "\\":  # "\ No newline at end of file"
                continue
            if tag in (" ", ""):  # a context line (some tools strip the space of an empty one)
                hunk.old.append(line[1:])
                old_left, new_left, new_no = old_left - 1, new_left - 1, new_no + 1
            elif tag == "-":
                hunk.old.append(line[1:])
                old_left -= 1
            elif tag == "+":
                hunk.new_lines[new_no] = lineno
                new_left, new_no = new_left - 1, new_no + 1
            continue
        if line.startswith("+++ "):
            current = None
            if line.split()[1] != "/dev/null":
                current = []
                sections.append((next(files), current))
            continue
        m = HUNK_RE.match(line)
        if m and current is not None:
            current.append(Hunk(len(current) + 1, lineno, line.split(" @@")[0] + " @@", old_start=int(m.group(1))))
            new_no = int(m.group(3))
            old_left = int(m.group(2)) if m.group(2) is not None else 1
            new_left = int(m.group(4)) if m.group(4) is not None else 1
    return sections


def patch_hunks(path: Path, info: PatchInfo) -> dict[str, list[Hunk]]:  # data-keyed: file path
    """Per package-relative file: its hunks, with where each lies in the patch file."""
    out: dict[str, list[Hunk]] = {}
    for rel, hunks in patch_sections(path, info):
        out.setdefault(rel, []).extend(hunks)
    return out


MAX_FUZZ = 3  # GNU patch's largest useful fuzz (3 context lines per side); a spec may allow up to this


@dataclass
class HunkResult:
    file: str
    number: int
    line: int            # where GNU patch put it (in the file as it is being patched)
    fuzz: int = 0
    offset: int = 0
    failed: bool = False
    hunk: Hunk | None = None

    def where(self) -> str:
        return f"hunk #{self.number} of {self.file}" + (f" (`{self.hunk.header}`)" if self.hunk else "")


@dataclass
class PatchOutcome:
    """What applying one patch did: warnings to show, and the per-hunk fuzz/offset for the build record."""
    warnings: list[str] = field(default_factory=list)
    fuzz_allowed: int = 0
    hunks: list[dict] = field(default_factory=list)   # only hunks that needed an offset or fuzz


def _patch_cmd(root: Path, path: Path, info: PatchInfo, fuzz: int, dry_run: bool) -> list[str]:
    """The GNU patch command line; the Dockerfile runs the same (with the spec's `fuzz`, default 0)."""
    return ["patch", "--forward", "--batch", "--no-backup-if-mismatch", "-r", "-", f"--fuzz={fuzz}",
            f"-p{info.strip}", "-d", str(root), "-i", str(path.resolve())] + (["--dry-run"] if dry_run else [])


def _run_patch(root: Path, path: Path, info: PatchInfo, fuzz: int, dry_run: bool):
    proc = _run(_patch_cmd(root, path, info, fuzz, dry_run), timeout=120)
    sections: dict[str, list[list[Hunk]]] = {}
    for rel, hunks in patch_sections(path, info):
        sections.setdefault(rel, []).append(hunks)
    seen: dict[str, int] = {}
    current, hunks, results = None, [], []
    for line in proc.stdout.splitlines():
        if m := re.match(r"^(?:patching|checking) file '?([^']+)'?$", line.strip()):
            current = m.group(1)
            k = seen.get(current, 0)
            seen[current] = k + 1
            hunks = sections.get(current, [])[k] if k < len(sections.get(current, [])) else []
            continue
        m = re.match(r"^Hunk #(\d+) (FAILED|succeeded) at (\d+)(?: with fuzz (\d+))?(?: \(offset (-?\d+) lines?\))?",
                     line.strip())
        if m:
            n = int(m.group(1))
            results.append(HunkResult(current or "?", n, int(m.group(3)), int(m.group(4) or 0), int(m.group(5) or 0),
                                      m.group(2) == "FAILED", hunks[n - 1] if n <= len(hunks) else None))
    return proc, current, results


def _raise_for_failure(proc, current: str | None, results: list[HunkResult], path: Path, version: str) -> None:
    failed = next((r for r in results if r.failed), None)
    if failed:
        raise SpecError(f"{failed.where()} does not apply to sglang {version}: its context no longer matches the "
                        "source" + (f" (looked near line {failed.hunk.old_start} of {failed.file})"
                                    if failed.hunk else ""),
                        hint=f"regenerate {path.name} against sglang {version} (or pin the version it was "
                             "written for)", file=path, line=failed.hunk.line if failed.hunk else None)
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


def _context_table(root: Path, r: HunkResult, max_width: int = 58) -> str:
    """The lines the hunk expects beside the lines the source has where GNU patch would put it; `!` marks
    each line that differs."""
    if r.hunk is None:
        return ""
    start = r.hunk.old_start + r.offset  # in the file before this patch (offset is from the header's line)
    try:
        src = (root / r.file).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        src = []
    pairs = [(start + i, want, src[start + i - 1] if 0 < start + i <= len(src) else "<end of file>")
             for i, want in enumerate(r.hunk.old)]
    # drop the indentation every shown line shares, so the differences fit the width
    indent = min((len(t) - len(t.lstrip()) for _, w, h in pairs for t in (w, h) if t.strip()), default=0)
    width = min(max_width, max([len("the patch expects")] + [len(w) - indent for _, w, _ in pairs]))
    cut = lambda t: t if len(t) <= width else t[:width - 1] + "…"  # noqa: E731
    rows = [f"    {'line':>6}   {'the patch expects':<{width}} | the source has"]
    for n, want, have in pairs:
        mark = "!" if have != want else " "
        rows.append(f"    {n:>6} {mark} {cut(want[indent:]):<{width}} | {cut(have[indent:])}")
    return "\n".join(rows)


def apply_patch_checked(root: Path, path: Path, info: PatchInfo, version: str, fuzz: int = 0) -> PatchOutcome:
    """Apply one patch to the scratch tree, strictly: every hunk must match its context exactly (an offset, the
    same context at another line, is allowed and reported). A hunk that needs fuzz is an error naming the
    patch, the hunk, the target file and line, with the expected context beside the source's lines, unless
    the spec allows that much fuzz for this patch (`fuzz: N`). A dry run at fuzz 3 first learns what each
    hunk needs, so nothing is written unless the whole patch is acceptable."""
    probe, current, results = _run_patch(root, path, info, MAX_FUZZ, dry_run=True)
    _raise_for_failure(probe, current, results, path, version)
    fuzzy = [r for r in results if r.fuzz > fuzz]
    if fuzzy:
        r = fuzzy[0]
        more = f" ({len(fuzzy) - 1} more hunk(s) of this patch need fuzz too)" if len(fuzzy) > 1 else ""
        at = r.hunk.old_start + r.offset if r.hunk else r.line
        raise SpecError(
            f"{r.where()} does not apply exactly to sglang {version}: it needs fuzz {r.fuzz} at line {at} of "
            f"{r.file} (some of its context lines differ from the source, so it may land in the wrong place)"
            f"{more}\n{_context_table(root, r)}",
            hint=f"regenerate {path.name} against sglang {version}; or, having checked where the hunk lands, "
                 f"allow it with `fuzz: {r.fuzz}` beside this patch's path and sha256 in the spec",
            file=path, line=r.hunk.line if r.hunk else None)
    proc, current, applied = _run_patch(root, path, info, fuzz, dry_run=False)
    _raise_for_failure(proc, current, applied, path, version)
    out = PatchOutcome(fuzz_allowed=fuzz)
    for r in applied:
        if not (r.fuzz or r.offset):
            continue
        out.hunks.append({"file": r.file, "hunk": r.number, "header": r.hunk.header if r.hunk else None,
                          "line": r.line, "offset": r.offset, "fuzz": r.fuzz})
        parts = ([f"fuzz {r.fuzz} (allowed by `fuzz: {fuzz}`)"] if r.fuzz else []) + \
                ([f"offset {r.offset} lines"] if r.offset else [])
        out.warnings.append(f"{path.name}: {r.where()} applied with {', '.join(parts)}")
    return out


def apply_patch(root: Path, path: Path, info: PatchInfo, version: str, fuzz: int = 0) -> list[str]:
    """apply_patch_checked, returning only its warnings (offsets; fuzz where the spec allows it)."""
    return apply_patch_checked(root, path, info, version, fuzz).warnings


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
    """pip install --target the packages SGLang's parser imports beyond what the toolkit venv has.

    Installed into a folder beside the cache's and renamed into place: a preflight running meanwhile (another
    build, a parallel test) finds the old set or the new one, never a half-written one."""
    from toolkit.image.flags import parser_deps_dir

    target = parser_deps_dir()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{target.name}.new.", dir=target.parent))
    log(f"pip install --target {target} {' '.join(PARSER_DEPS)}")
    try:
        proc = _run([sys.executable, "-m", "pip", "install", "--quiet", "--upgrade", "--target", str(tmp),
                     *PARSER_DEPS], timeout=1800)
        if proc.returncode != 0:
            raise ToolFailure(f"pip install of the parser deps failed: {proc.stderr.strip()[-600:]}")
        old = target.with_name(f"{tmp.name}.old")
        if target.exists():
            os.replace(target, old)
        os.replace(tmp, target)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target
