"""The Ledger's arm facts are ArmState from creation, and summary.json keeps the fields each launch set
(exclude_unset): a later launch keeps the cells' states of the earlier ones, a stop that escalated is a warning
on the arm and a methodology check."""

from __future__ import annotations

from toolkit.bench import derive
from toolkit.bench.ledger import Ledger
from toolkit.schema.manifest import ArmState, Check, Derived
from toolkit.specs.matrix import Matrix


def test_arm_facts_merge_cells_and_dump_as_set() -> None:
    ledger = Ledger(writer=None)
    ledger.set_arm("spec", ArmState(launcher="ProcessLauncher", speculative_algorithm="EAGLE3"))
    ledger.cell_state("spec", "coding__c1__r0", {"avg_spec_accept_length": 2.5})
    ledger.set_arm("spec", ArmState(launcher="ProcessLauncher", max_running_requests=48))  # the next launch
    ledger.stop_warnings("spec", ["server did not exit within 5 s of SIGINT"])
    ledger.stop_warnings("base", ["base did not exit"])  # an arm whose server never said anything
    info = ledger.arm_info["spec"]
    assert isinstance(info, ArmState) and info.cells == {"coding__c1__r0": {"avg_spec_accept_length": 2.5}}
    dumped = Derived(arm_info=ledger.arm_info).model_dump(mode="json", exclude_unset=True)["arm_info"]
    assert dumped == {"spec": {"launcher": "ProcessLauncher", "max_running_requests": 48,
                               "stop_warnings": ["server did not exit within 5 s of SIGINT"],
                               "cells": {"coding__c1__r0": {"avg_spec_accept_length": 2.5}}},
                      "base": {"stop_warnings": ["base did not exit"], "cells": {}}}
    m = Matrix(kind="Matrix", name="m", environment="e.yaml", arms=["base", "spec"], workloads=["coding"],
               concurrency=[1], requests=10, warmup=1)
    got = derive.methodology_checks(matrix=m, cells=[], records={}, arm_info=ledger.arm_info)
    assert all(isinstance(c, Check) for c in got)
    assert [c.check for c in got] == ["server-stop-escalated", "server-stop-escalated"]
