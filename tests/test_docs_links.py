"""Every link in the docs resolves: relative Markdown links in README.md and docs/**/*.md name an existing file
(and, for a Markdown file, an existing heading when they carry an anchor), and every `docs/<page>.md#<anchor>` that
the code, the tests, the golden outputs or the benchmarks cite names a page and heading that exist.

Anchors are GitHub's: the heading lowercased, punctuation dropped (hyphens and underscores kept), spaces made
hyphens, a repeated heading suffixed -1, -2, ...; headings inside code fences do not count.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
CITED = re.compile(r"(?<![\w/.-])(docs/[\w./-]+\.md)(#[\w-]+)?")
CITERS = ["toolkit", "tests", "benchmarks", "templates", "playbooks", "envs"]


def _outside_fences(text: str) -> list[str]:
    lines, fence = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
        elif not fence:
            lines.append(line)
    return lines


@cache
def anchors(page: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in _outside_fences(page.read_text()):
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    out.update(re.findall(r'<a (?:id|name)="([^"]+)"', page.read_text()))  # an anchor kept for old citations
    return frozenset(out)


def _broken(page: Path, target: str, base: Path) -> str | None:
    path, _, anchor = target.partition("#")
    dest = (base / path).resolve() if path else page
    if not dest.exists():
        return "no such file"
    if anchor and dest.suffix == ".md" and anchor.lower() not in anchors(dest):
        return f"no heading #{anchor} in {dest.relative_to(ROOT)}"
    return None


def test_every_relative_link_in_the_docs_resolves():
    bad = []
    for page in PAGES:
        text = "\n".join(_outside_fences(page.read_text()))
        text = re.sub(r"`[^`\n]*`", "", text)  # inline code is not a link
        for m in LINK.finditer(text):
            target = m.group(1) or m.group(2)
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            why = _broken(page, target, page.parent)
            if why:
                bad.append(f"{page.relative_to(ROOT)}: ({target}): {why}")
    assert not bad, "broken links:\n" + "\n".join(bad)


def test_every_docs_page_cited_by_the_code_and_tests_exists():
    files = [p for d in CITERS for p in (ROOT / d).rglob("*") if p.is_file() and p.suffix in
             {".py", ".md", ".txt", ".sh", ".yaml", ".yml", ".j2", ".json"}]
    bad = []
    for f in [*files, *PAGES]:
        try:
            text = f.read_text()
        except UnicodeDecodeError:
            continue
        for m in CITED.finditer(text):
            why = _broken(ROOT / "README.md", m.group(1) + (m.group(2) or ""), ROOT)
            if why:
                bad.append(f"{f.relative_to(ROOT)}: {m.group(0)}: {why}")
    assert not bad, "docs cited that do not exist:\n" + "\n".join(sorted(set(bad)))


def test_the_lab_record_has_an_index_that_lists_every_lab_page():
    lab = ROOT / "docs" / "lab"
    index = (lab / "README.md").read_text()
    missing = [p.name for p in lab.glob("*.md") if p.name != "README.md" and f"({p.name}" not in index]
    assert not missing, f"lab pages not in docs/lab/README.md: {missing}"
