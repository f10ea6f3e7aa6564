"""Closed by default: a ClusterQueue without spec.namespaceSelector serves no namespace; `{}` serves every one."""

from __future__ import annotations

from admission.core.cycle import Admit, Wait, WaitReason
from admission.core.quota import parse_cluster_queue
from tests.support.builders import cluster_queue, model, quota
from tests.unit.cycle.cycle_builders import NS, cycle, gang, gpu_node

NODES = gpu_node("node-a")


def test_a_queue_without_namespace_selector_serves_no_namespace() -> None:
    closed = model(cluster_queue("main", quota("gpus", 8), namespace_selector=None))
    result = cycle(NODES + gang("train", 1, 4), [closed])
    wait = result.decision(f"{NS}/train")
    assert isinstance(wait, Wait) and wait.reason is WaitReason.NO_QUEUE and wait.cluster_queue == "main"
    assert wait.message == (f"ClusterQueue main has no spec.namespaceSelector, so it serves no namespace (LocalQueue "
                            f"{NS}/lq points to it); its administrator sets namespaceSelector to a selector matching "
                            "the namespace, or {} for every namespace")


def test_an_empty_selector_serves_every_namespace() -> None:
    open_queue = model(cluster_queue("main", quota("gpus", 8), namespace_selector={}))
    assert isinstance(cycle(NODES + gang("train", 1, 4), [open_queue]).decision(f"{NS}/train"), Admit)


def test_the_parsed_queue_says_which_namespaces_it_serves() -> None:
    closed = parse_cluster_queue(cluster_queue("a", namespace_selector=None))
    every = parse_cluster_queue(cluster_queue("b", namespace_selector={}))
    some = parse_cluster_queue(cluster_queue("c", namespace_selector={"matchLabels": {"team": "ml"}}))
    assert closed.namespace_selector is None and not closed.serves({}) and not closed.serves({"team": "ml"})
    assert every.serves({}) and every.serves({"team": "ml"})
    assert some.serves({"team": "ml"}) and not some.serves({"team": "web"})
