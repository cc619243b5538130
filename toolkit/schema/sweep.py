"""A Matrix `sweep:` as the archive records it: the rates its run measured at and where they came from.

    sweep_rates(1.2, 5.0, 3)                # -> [2.15, 3.1, 4.05]: three rates evenly inside (sync, saturation)
    sweep_rates(1.2, 5.0, 3, "geometric")   # -> [1.71, 2.45, 3.5]: at a constant ratio, dense at low load

The baseline arm's two probes (toolkit.bench.sweep) measure the synchronous rate (one request in flight,
closed loop) and the saturation rate (the throughput probe: many in flight); the sweep's open-loop cells
run at `points` rates spread between them (`spacing`: evenly, or at a constant ratio), the same for every
arm. The record lives in
manifest.json (`sweep`), so `--resume` and `results reproduce` run the recorded rates and never probe again.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# linear: evenly spaced (guidellm's sweep); geometric: at a constant ratio, so most points lie at low load, where
# speculative decoding's crossover is (near one request at a time)
Spacing = Literal["linear", "geometric"]
SIGNIFICANT = 3  # a sweep rate keeps 3 significant digits: keys and labels stay short (r=2.15/s)


def _round(rate: float) -> float:
    digits = SIGNIFICANT - 1 - math.floor(math.log10(abs(rate)))
    return round(rate, digits)


def sweep_rates(sync_rate: float, saturation_rate: float, points: int, spacing: Spacing = "linear") -> list[float]:
    """`points` rates strictly between the synchronous and the saturation rate (the probes themselves measured
    the two ends), each to 3 significant digits, in increasing order: linear, evenly spaced, low + (high - low)
    * i / (points + 1), as guidellm's sweep does; geometric, at a constant ratio, low * (high / low) ** (i /
    (points + 1)), i = 1..points. A server that served fewer requests per second with many in flight than with one (a
    saturation rate below the synchronous one: e.g. a CPU engine that does not batch) still gets the rates
    between the two, from the lower; equal rates leave one rate, there is no range to spread over."""
    if sync_rate <= 0 or saturation_rate <= 0:
        raise ValueError(f"a sweep needs rates > 0 (synchronous {sync_rate:g}, saturation {saturation_rate:g})")
    if points < 1:
        raise ValueError(f"a sweep needs at least one point, not {points}")
    low, high = sorted((sync_rate, saturation_rate))
    fractions = [i / (points + 1) for i in range(1, points + 1)]
    if spacing == "geometric":
        return sorted({_round(low * (high / low) ** f) for f in fractions})
    if spacing != "linear":
        raise ValueError(f"a sweep's spacing is linear or geometric, not {spacing!r}")
    return sorted({_round(low + (high - low) * f) for f in fractions})


FLAT_GAIN = 1.2  # a throughput probe under 1.2x the synchronous rate: the sweep spans next to nothing


def rates_note(sync: float, sat: float, conc: int, points: int, rates: list[float], probe_requests: int,
               probe_s: float) -> str | None:
    """What to know about a sweep's rates, from its probes: saturation below sync, a throughput probe that gained
    little over one request in flight (every rate is then near capacity), points that rounded together."""
    notes = []
    if sat < sync:
        notes.append(f"the saturation rate ({sat:.3g} req/s, {conc} in flight) is below the synchronous rate "
                     f"({sync:.3g}): the server lost throughput to concurrency; the rates span the two from the lower")
    elif sat < FLAT_GAIN * sync:
        notes.append(f"the throughput probe served only {(sat / sync - 1) * 100:.0f}% more requests per second with "
                     f"{conc} in flight than with one ({probe_requests} requests in {probe_s:.2g} s): a server that "
                     "does not batch, or a probe too short to tell; every rate of the sweep is near its capacity, "
                     "and requests queue")
    if len(rates) < points:
        notes.append(f"{points} points rounded to {len(rates)} distinct rate{'s' * (len(rates) != 1)} "
                     f"({SIGNIFICANT} significant digits)")
    return "; ".join(notes) or None


class SweepRecord(BaseModel):
    """manifest.json `sweep`: how a sweep run's rates were chosen and what they are."""

    model_config = ConfigDict(extra="allow")

    arm: str = Field(description="the arm whose probes set the rates (the baseline); every arm runs them")
    points: int = Field(description="the Matrix's sweep.points")
    sync_rate: float = Field(description="the synchronous probe's req/s (one request in flight, closed loop)")
    saturation_rate: float = Field(description="the throughput probe's req/s (probe_concurrency in flight)")
    probe_concurrency: int = Field(description="requests in flight in the throughput probe")
    spacing: Spacing = Field("linear", description="the Matrix's sweep.spacing; written only when not linear "
                                                   "(a record without it, as every one before geometric sweeps: "
                                                   "linear)")
    rates: list[float] = Field(description="the open-loop rates every arm ran, req/s: sweep_rates(sync, "
                                           "saturation, points, spacing)")
    probes: dict[str, str] = Field(default_factory=dict, description="probe kind (sync, throughput) -> its cell "
                                   "summary under probes/ (not a cell: no verdict uses a probe)")
    source: str = Field("probed", description="probed: this run's own probes; else the run whose record it "
                                              "replays (`results reproduce`)")
    note: str | None = Field(None, description="what to know about the rates (e.g. saturation below sync)")

    def written(self) -> dict:  # json-edge: manifest.json `sweep` as written
        """The record as manifest.json stores it: no unset note; the spacing only when not linear, so a linear
        sweep's manifest reads as every one written before geometric sweeps."""
        linear = {"spacing"} if self.spacing == "linear" else None
        return self.model_dump(mode="json", exclude_none=True, exclude=linear)
