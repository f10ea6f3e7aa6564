"""Where a pod outside every queue stands: allowed off queue in a managed namespace, outside in another."""

from __future__ import annotations

from admission.core.gaps.membership import Place, place_of
from admission.core.labels import DEFAULT_QUEUE_LABEL, DEVICE_POLICY_LABEL, MANAGED_LABEL
from admission.core.models import Pod
from tests.support.builders import model, pod

DS = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "u", "controller": True}
NAMESPACES = {"open": {MANAGED_LABEL: "true", DEVICE_POLICY_LABEL: "allow"}, "strict": {MANAGED_LABEL: "true"},
              "queued": {DEFAULT_QUEUE_LABEL: "batch"}, "plain": {}}


def place(namespace: str, owner: dict[str, object] | None = None) -> tuple[Place, str]:
    found = model(pod("p", namespace, owner=owner))
    assert isinstance(found, Pod)
    where = place_of(found, NAMESPACES, {}, {})
    return where.place, where.reason


def test_pods_off_queue_in_managed_namespaces_are_allowed_with_why() -> None:
    assert place("open") == (Place.ALLOWED, "namespace open allows devices outside queues "
                                            "(draq.io/device-policy=allow)")
    assert place("strict")[0] is Place.ALLOWED and "default device policy is allow" in place("strict")[1]
    assert place("queued", DS) == (Place.ALLOWED, "a pod of DaemonSet agent outside every queue, as the webhook "
                                                  "allows when its owner kind is exempt and the owner is verified")


def test_unmanaged_namespaces_stay_outside_and_unlabelled_pods_of_a_default_queue_bypass() -> None:
    assert place("plain", DS)[0] is Place.OUTSIDE
    assert place("queued")[0] is Place.BYPASSED
