"""API paths built only from names that Kubernetes could have given an object.

Every name and namespace that goes into a path is checked against the Kubernetes name rules and
escaped, so a name taken from an AdmissionReview (which anyone who reaches the webhook port can
send) can never address another resource, such as `team-a/configmaps/victim` for a namespace.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote

from admission.core.errors import DraqError

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class InvalidName(DraqError):
    """A name or namespace that no Kubernetes object can have; nothing was sent to the API server."""


def check_namespace(namespace: str) -> str:
    """A namespace is a DNS-1123 label: at most 63 lowercase letters, digits and '-'."""
    if len(namespace) > 63 or not _DNS_LABEL.match(namespace):
        raise InvalidName(f"{namespace[:80]!r} is not a valid namespace name (a DNS-1123 label: "
                          "lowercase letters, digits and '-', at most 63 characters)")
    return namespace


def check_name(name: str) -> str:
    """Object names are DNS-1123 subdomains (the loosest rule of the kinds draq addresses)."""
    if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        raise InvalidName(f"{name[:80]!r} is not a valid object name (a DNS-1123 subdomain: "
                          "lowercase letters, digits, '-' and '.', at most 253 characters)")
    return name


def _segment(text: str) -> str:
    return quote(text, safe="")


@dataclass(frozen=True, slots=True)
class Resource:
    """One API resource: its group/version, plural, kind and scope."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    label_names: bool = False  # names are DNS-1123 labels (Namespaces), not subdomains

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def _prefix(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    def list_path(self) -> str:
        """Every object of the resource, across namespaces."""
        return f"{self._prefix}/{self.plural}"

    def collection_path(self, namespace: str | None = None) -> str:
        """Where objects are created (in `namespace` for a namespaced resource)."""
        if not self.namespaced:
            return self.list_path()
        if namespace is None:
            raise InvalidName(f"{self.kind} is namespaced: a namespace is needed")
        return f"{self._prefix}/namespaces/{_segment(check_namespace(namespace))}/{self.plural}"

    def object_path(self, namespace: str | None, name: str, subresource: str = "") -> str:
        checked = check_namespace(name) if self.label_names else check_name(name)
        path = f"{self.collection_path(namespace)}/{_segment(checked)}"
        return f"{path}/{subresource}" if subresource else path
