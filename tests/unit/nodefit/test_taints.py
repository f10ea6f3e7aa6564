"""TaintToleration and NodeUnschedulable: which tolerations match which taints."""

from __future__ import annotations

import pytest

from admission.core.models import Taint, Toleration
from admission.core.nodefit import tolerates_unschedulable, untolerated_taint

GPU = Taint("gpu", "true", "NoSchedule")


@pytest.mark.parametrize(("toleration", "tolerates"), [
    (Toleration("gpu", "Equal", "true", "NoSchedule"), True),
    (Toleration("gpu", "Equal", "true"), True),  # no effect: every effect
    (Toleration("gpu", "Equal", "false"), False),
    (Toleration("gpu", "Exists"), True),
    (Toleration("gpu", "Exists", effect="NoExecute"), False),
    (Toleration("", "Exists"), True),  # empty key with Exists: everything
    (Toleration("other", "Exists"), False),
    (Toleration("gpu", "Gt", "1"), False),  # an operator the filter does not know
])
def test_one_toleration_against_one_taint(toleration: Toleration, tolerates: bool) -> None:
    assert toleration.tolerates(GPU) is tolerates


def test_noschedule_and_noexecute_must_be_tolerated_prefer_noschedule_is_ignored() -> None:
    taints = (Taint("spot", "", "PreferNoSchedule"), GPU, Taint("maintenance", "", "NoExecute"))
    assert untolerated_taint(taints, ()) == GPU
    assert untolerated_taint(taints, (Toleration("gpu", "Exists"),)) == Taint("maintenance", "", "NoExecute")
    assert untolerated_taint(taints, (Toleration("gpu", "Exists"), Toleration("maintenance", "Exists"))) is None
    assert untolerated_taint(taints, (Toleration("", "Exists"),)) is None


def test_cordoned_nodes_take_pods_tolerating_the_unschedulable_taint() -> None:
    assert not tolerates_unschedulable(())
    assert tolerates_unschedulable((Toleration("node.kubernetes.io/unschedulable", "Exists", effect="NoSchedule"),))
    assert tolerates_unschedulable((Toleration("", "Exists"),))
    assert not tolerates_unschedulable((Toleration("node.kubernetes.io/unschedulable", "Exists",
                                                   effect="NoExecute"),))
