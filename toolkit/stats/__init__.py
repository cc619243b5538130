"""The statistics of the toolkit, in one place: pure math on numbers (no archive, no spec, no stage), each
function defined once, its statistics stated in its docstring. Every stage that judges a figure calls it:
`results diff` and `reproduce` (tests, margins, equivalence), the paired speed-ups and their verdicts, SLO
certainty, `bench noise`/power, and tune's scores. It imports no toolkit package (tests/test_import_cycles.py
FLOORS); tests/test_stats_home.py fails when a second definition appears elsewhere.

    scale.py        the log-ratio scale and its distributions: quantile, upper_tail (t, normal), satterthwaite,
                    logs, log_of_pct, pct_of_log, geomean, geomean_of_logs, delta_pct, cv_of_var, floor_pct,
                    beyond_margin, se_of_interval, error_interval
    samples.py      per-request samples: median_ci, quantile_ci (order statistics, exact binomial), wilson,
                    mann_whitney / mwu_asymptotic, fisher_p, rate, paired_bootstrap_ratio (PairedRatio)
    launches.py     the launch as the unit: Noise, launch_noise (pooled, Satterthwaite df), cell_noise, the
                    defaults, MachineVar (the machine level), machine_prior, machine_var_from_pairs, with_machine
    comparisons.py  on the log ratio: compare (t/Welch), combine (weighted geometric mean, a shared variance
                    once), of_interval, tost_p (TOST equivalence), exceeds_p / beyond_p (one-sided beyond a
                    margin), from_delta, interval, stein_interval (Stein's two-stage), widen
    planning.py     power (noncentral t), launches_needed, requests_per_launch, mde_pct
    multiple.py     holm (Holm step-down, derived duplicates adjusted in their member's place)

Import from the package: `from toolkit.stats import compare, Noise`.
"""

from __future__ import annotations

import importlib

# name -> the module of the package that defines it (imported on first use: the shared types read the
# per-request intervals without loading scipy, so the load generator starts as fast as before)
_WHERE = {
    "comparisons": ["Comparison", "beyond_p", "combine", "compare", "exceeds_p", "from_delta", "interval",
                    "of_interval", "stein_interval", "tost_p", "widen"],
    "launches": ["DEFAULT", "DEFAULT_FLOOR_PCT", "DEFAULT_LAUNCH_CV", "MACHINE_PRIOR_CV", "SHARED", "MachineVar",
                 "Noise", "cell_noise", "launch_noise", "machine_prior", "machine_var_from_pairs", "with_machine"],
    "multiple": ["holm"],
    "planning": ["MAX_LAUNCHES", "launches_needed", "mde_pct", "power", "requests_per_launch"],
    "samples": ["BOOTSTRAP", "MIN_SAMPLES", "PairedRatio", "fisher_p", "mann_whitney", "median_ci", "mwu_asymptotic",
                "paired_bootstrap_ratio", "quantile_ci", "rate", "wilson"],
    "scale": ["ALPHA", "POWER", "beyond_margin", "cv_of_var", "delta_pct", "error_interval", "floor_pct", "geomean",
              "geomean_of_logs", "log_of_pct", "logs", "pct_of_log", "quantile", "satterthwaite", "se_of_interval",
              "upper_tail"],
}
_HOME = {name: module for module, names in _WHERE.items() for name in names}
__all__ = sorted(_HOME)


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module 'toolkit.stats' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"toolkit.stats.{_HOME[name]}"), name)
    globals()[name] = value
    return value
