"""Topology: the ordered levels of a cluster's layout (zones, blocks, racks, NVLink cliques), and what a group
asks of them (`required` or `preferred` level).

A level's domains are the distinct values of a node label (every node with the label belongs to the domain
of its value) or of a device attribute published in ResourceSlices (every device with the attribute
belongs to the domain of its value; a node may then hold devices of several domains).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from admission.core.errors import InvalidInput
from admission.core.labels import API_VERSION
from admission.core.models._fields import Fields
from admission.core.models.meta import object_label

TOPOLOGY_REQUIRED_ANNOTATION = "draq.io/topology-required"
"""On a member pod (set in the workload's pod template): the level all members must share one domain of."""
TOPOLOGY_PREFERRED_ANNOTATION = "draq.io/topology-preferred"
"""On a member pod: the level whose domains the members should span as few of as possible."""

_LEVEL_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$")
_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class TopologyMode(StrEnum):
    REQUIRED = "required"  # every member in one domain of the level, or wait
    PREFERRED = "preferred"  # as few domains of the level as possible, the smallest that fit first


@dataclass(frozen=True, slots=True)
class TopologyLevel:
    """One level: its name, and where its domains come from (exactly one of the two is set)."""

    name: str
    node_label: str | None = None
    device_attribute: str | None = None  # fully qualified: `<domain>/<name>`

    @property
    def source(self) -> str:
        """What the domains are values of, for messages: `node label X` or `device attribute X`."""
        if self.node_label is not None:
            return f"node label {self.node_label}"
        return f"device attribute {self.device_attribute}"


@dataclass(frozen=True, slots=True)
class Topology:
    name: str
    levels: tuple[TopologyLevel, ...]  # broadest first

    def level(self, name: str) -> TopologyLevel | None:
        return next((level for level in self.levels if level.name == name), None)


@dataclass(frozen=True, slots=True)
class TopologyRequest:
    """What a group asks: a mode and the name of a level of its ClusterQueue's Topology."""

    mode: TopologyMode
    level: str

    def describe(self) -> str:
        return f"{self.mode.value}: {self.level}"


def parse_topology(manifest: Mapping[str, Any]) -> Topology:
    """A `draq.io/v1alpha1` Topology; every error names the field and what to write instead."""
    obj = object_label("Topology", manifest)
    fields = Fields(obj, manifest)
    if fields.raw("apiVersion") != API_VERSION or fields.raw("kind") != "Topology":
        raise InvalidInput(obj, "apiVersion/kind",
                           f"expected {API_VERSION} Topology, got {fields.raw('apiVersion')} {fields.raw('kind')}")
    spec = fields.map("spec")
    levels: list[TopologyLevel] = []
    for at, entry in enumerate(spec.maps("levels")):
        level = _level(entry)
        if any(other.name == level.name for other in levels):
            raise spec.fail(f"levels[{at}].name", f"duplicate level {level.name!r}: level names must be unique")
        levels.append(level)
    if not levels:
        raise spec.fail("levels", "must name at least one level (broadest first), e.g. "
                        "[{name: rack, nodeLabel: example.com/rack}]")
    return Topology(fields.map("metadata").str("name", required=True), tuple(levels))


def _level(entry: Fields) -> TopologyLevel:
    name = entry.str("name", required=True)
    if not _LEVEL_NAME.match(name):
        raise entry.fail("name", f"{name!r} is not a level name: lowercase letters, digits and '-', at most 63")
    label, attribute = entry.opt_str("nodeLabel"), entry.opt_str("deviceAttribute")
    if (label is None) == (attribute is None):
        raise entry.fail("nodeLabel", f"level {name!r} must set exactly one of nodeLabel and deviceAttribute")
    if label is not None:
        if not _qualified(label, prefix_required=False):
            raise entry.fail("nodeLabel", f"{label!r} is not a label key ([prefix/]name, e.g. "
                             "topology.kubernetes.io/zone)")
        return TopologyLevel(name, node_label=label)
    assert attribute is not None
    if not _qualified(attribute, prefix_required=True):
        raise entry.fail("deviceAttribute", f"{attribute!r} is not a qualified device attribute: write "
                         "<domain>/<name> as the driver publishes it, e.g. gpu.nvidia.com/cliqueID")
    return TopologyLevel(name, device_attribute=attribute)


def _qualified(key: str, *, prefix_required: bool) -> bool:
    prefix, sep, name = key.rpartition("/")
    if not sep:
        return not prefix_required and bool(_NAME_PART.match(name))
    return bool(_PREFIX.match(prefix)) and len(prefix) <= 253 and bool(_NAME_PART.match(name))


def parse_topology_request(fields: Fields) -> TopologyRequest | None:
    """`{required: <level>}` or `{preferred: <level>}` (a PodGroup's spec.topology); None when absent."""
    required, preferred = fields.opt_str("required"), fields.opt_str("preferred")
    if required is not None and preferred is not None:
        raise fields.fail("required", "set required or preferred, not both")
    for mode, level in ((TopologyMode.REQUIRED, required), (TopologyMode.PREFERRED, preferred)):
        if level is not None:
            if not _LEVEL_NAME.match(level):
                raise fields.fail(mode.value, f"{level!r} is not a level name of a Topology")
            return TopologyRequest(mode, level)
    return None


def annotated_request(annotations: Mapping[str, str]) -> TopologyRequest | str | None:
    """A member pod's request from its annotations; a string says what is wrong with them."""
    required = annotations.get(TOPOLOGY_REQUIRED_ANNOTATION)
    preferred = annotations.get(TOPOLOGY_PREFERRED_ANNOTATION)
    if required is not None and preferred is not None:
        return (f"annotations {TOPOLOGY_REQUIRED_ANNOTATION} and {TOPOLOGY_PREFERRED_ANNOTATION} are both set; "
                "keep one")
    for mode, key, level in ((TopologyMode.REQUIRED, TOPOLOGY_REQUIRED_ANNOTATION, required),
                             (TopologyMode.PREFERRED, TOPOLOGY_PREFERRED_ANNOTATION, preferred)):
        if level is not None:
            if not _LEVEL_NAME.match(level):
                return f"annotation {key}: {level!r} is not a level name of a Topology"
            return TopologyRequest(mode, level)
    return None
