"""Semantic versions (semver 2.0.0) as used by DRA `version` attributes and CEL's semver library."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

_STRICT = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)


class SemverError(ValueError):
    """Text that is not a semantic version."""


@dataclass(frozen=True, slots=True)
class Semver:
    major: int
    minor: int
    patch: int
    prerelease: tuple[str, ...] = ()
    build: tuple[str, ...] = ()
    # The canonical text, made once: versions are compared by it in claim constraints.
    text: str = field(default="", compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.text:
            text = f"{self.major}.{self.minor}.{self.patch}"
            if self.prerelease:
                text += "-" + ".".join(self.prerelease)
            if self.build:
                text += "+" + ".".join(self.build)
            object.__setattr__(self, "text", text)

    def _key(self) -> tuple[int, int, int, int, tuple[tuple[int, int, str], ...]]:
        # A release sorts after its prereleases; numeric identifiers sort before alphanumeric ones.
        pre = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in self.prerelease)
        return (self.major, self.minor, self.patch, 0 if self.prerelease else 1, pre)

    def compare(self, other: Semver) -> int:
        a, b = self._key(), other._key()
        return (a > b) - (a < b)

    # Equality ignores build metadata, as semver precedence does.
    def __eq__(self, other: object) -> bool:
        return isinstance(other, Semver) and self.compare(other) == 0

    def __hash__(self) -> int:
        return hash(self._key())

    def __lt__(self, other: Semver) -> bool:
        return self.compare(other) < 0

    def __str__(self) -> str:
        return self.text


@lru_cache(maxsize=4096)
def parse_semver(text: str, normalize: bool = False) -> Semver:
    """Parse a strict semver string; with `normalize`, accept `v1`, `1.2` and leading zeros."""
    candidate = _normalized(text) if normalize else text
    match = _STRICT.match(candidate)
    if not match:
        raise SemverError(f"{text!r} is not a semantic version (expected e.g. 1.2.3)")
    major, minor, patch, pre, build = match.groups()
    return Semver(int(major), int(minor), int(patch),
                  tuple(pre.split(".")) if pre else (), tuple(build.split(".")) if build else ())


def _normalized(text: str) -> str:
    core, sep, rest = text.removeprefix("v").partition("-")
    if not sep:
        core, sep, rest = core.partition("+")
    parts = core.split(".")
    if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        return text
    parts = [str(int(p)) for p in parts] + ["0"] * (3 - len(parts))
    return ".".join(parts) + (sep + rest if sep else "")
