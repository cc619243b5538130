"""One home for the statistics (issue 44, item 4): every test, interval, combination and distribution is defined
in toolkit/stats/ and nowhere else. Read from the source (nothing imported): a second definition of a core
function, a distribution's quantile or tail read from scipy, a hard-coded normal quantile or a log-ratio formula
outside toolkit/stats/ fails here, naming the file and line. Call toolkit.stats instead (its __init__ lists
what is where)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "toolkit"
HOME = PKG / "stats"

# what only toolkit/stats/ may write: scipy at all, a quantile / tail / cdf of a distribution, the tests scipy
# has, a normal quantile typed in, the log-ratio conversions, a bootstrap's resampling of pair indices
FORBIDDEN = {
    "scipy": re.compile(r"\bscipy\b"),
    "a distribution's quantile or tail (.ppf/.sf/.cdf/.isf)": re.compile(r"\.(ppf|sf|cdf|isf)\("),
    "a test of scipy's": re.compile(r"\b(mannwhitneyu|fisher_exact|ttest_\w+|binomtest|nct|binom)\b\s*[.(]"),
    "a hard-coded normal quantile": re.compile(r"\b1\.9599|\b1\.96\b"),
    "a log-ratio conversion (toolkit.stats log_of_pct, pct_of_log, cv_of_var)": re.compile(r"\b(expm1|log1p)\("),
}
# the core functions, each defined once (in toolkit/stats/): a def of one of these names elsewhere is a second one
CORE = {"holm", "geomean", "geomean_of_logs", "delta_pct", "mann_whitney", "mwu_asymptotic", "fisher_p", "median_ci",
        "quantile_ci", "wilson", "compare", "combine", "of_interval", "tost_p", "exceeds_p", "beyond_p",
        "beyond_margin", "from_delta", "interval", "stein_interval", "widen", "power", "mde_pct", "launches_needed",
        "requests_per_launch", "launch_noise", "cell_noise", "machine_prior", "machine_var_from_pairs", "with_machine",
        "satterthwaite", "quantile", "upper_tail", "se_of_interval", "cv_of_var", "floor_pct", "error_interval",
        "log_of_pct", "pct_of_log", "paired_bootstrap_ratio", "logs"}


def _outside() -> list[Path]:
    return [p for p in sorted(PKG.rglob("*.py")) if HOME not in p.parents]


def _code_lines(path: Path) -> list[tuple[int, str]]:
    """The lines of a module that are code: docstrings and comments left out (they may name a formula)."""
    src = path.read_text()
    doc = set()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            doc.update(range(node.lineno, node.end_lineno + 1))
    return [(i, line.split("#", 1)[0]) for i, line in enumerate(src.splitlines(), 1) if i not in doc]


def test_no_statistics_outside_the_package() -> None:
    found = [f"{p.relative_to(ROOT)}:{i}: {what}: {line.strip()}"
             for p in _outside() for i, line in _code_lines(p)
             for what, rx in FORBIDDEN.items() if rx.search(line)]
    assert not found, ("statistics outside toolkit/stats/ (call toolkit.stats instead):\n" + "\n".join(found))


def test_each_core_function_is_defined_once_in_the_package() -> None:
    defs: dict[str, list[str]] = {}
    for p in sorted(PKG.rglob("*.py")):
        for parent in ast.walk(ast.parse(p.read_text())):
            if isinstance(parent, ast.ClassDef):  # a method (Comparison.delta_pct) is its object's, not a function
                continue
            for node in ast.iter_child_nodes(parent):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in CORE:
                    defs.setdefault(node.name, []).append(f"{p.relative_to(ROOT)}:{node.lineno}")
    twice = {n: w for n, w in defs.items() if len(w) > 1 or not w[0].startswith("toolkit/stats/")}
    assert not twice, f"core statistics defined outside toolkit/stats/ or twice: {twice}"
    assert set(defs) == CORE, f"not defined in toolkit/stats/: {sorted(CORE - set(defs))}"


def test_the_rules_catch_a_second_definition(tmp_path: Path) -> None:
    """The patterns above are not vacuous: each catches the line it is meant for."""
    samples = ["from scipy import stats", "q = sps.t.ppf(0.975, df)", "p = fisher_exact([[1, 2], [3, 4]])",
               "z = 1.959964", "d = math.log1p(x / 100)"]
    for line, (what, rx) in zip(samples, FORBIDDEN.items()):
        assert rx.search(line), what
