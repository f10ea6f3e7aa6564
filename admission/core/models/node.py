"""core/v1 Node: what DRA node selection, extended resources and the scheduler's node filters look at."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from admission.core.models._fields import Fields
from admission.core.models.meta import ObjectMeta, parse_meta
from admission.core.models.node_selector import NAME_FIELD
from admission.core.models.taint import Taint, parse_taint
from admission.core.quantity import Quantity


@dataclass(frozen=True, slots=True)
class Node:
    meta: ObjectMeta
    allocatable: Mapping[str, Quantity] = field(default_factory=dict)
    unschedulable: bool = False
    taints: tuple[Taint, ...] = ()
    # status.declaredFeatures: node features the scheduler may rely on (e.g. DRAOptionalNodeOperations).
    declared_features: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.meta.name

    @property
    def key(self) -> str:
        return self.meta.key

    @property
    def labels(self) -> Mapping[str, str]:
        return self.meta.labels

    @property
    def fields(self) -> Mapping[str, str]:
        """The fields a node selector may match (`matchFields`)."""
        return {NAME_FIELD: self.meta.name}


def parse_node(obj: str, manifest: Fields) -> Node:
    spec, status = manifest.map("spec"), manifest.map("status")
    return Node(
        meta=parse_meta(obj, manifest, namespaced=False),
        allocatable=status.quantity_map("allocatable"),
        unschedulable=spec.bool("unschedulable"),
        taints=tuple(parse_taint(t) for t in spec.maps("taints")),
        declared_features=status.str_list("declaredFeatures"),
    )
