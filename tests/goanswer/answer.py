"""Write a conformance case's expectation from the real allocator's answer.

    PYTHONPATH=. python tests/goanswer/answer.py tests/cases/allocator/<case> [...]

A case directory holds `objects.yaml` and a `question.yaml` (k8s_versions, features, node, claims,
notes). For each listed release the Go program beside this file is built against that release's
`k8s.io/dynamic-resource-allocation` through the Go module proxy (cached in ~/.cache/draq/goanswer/),
asked twenty times, and the answer becomes `expect.yaml`. Releases that answer differently are an
error: such a question is split into one case per answer.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

SOURCE = Path(__file__).resolve().parent
CACHE = Path.home() / ".cache" / "draq" / "goanswer"
# The patch release of each minor whose allocator answers (the releases the kit runs).
MODULES = {"1.35": "v0.35.8", "1.36": "v0.36.3", "1.37": "v0.37.2"}


def binary(release: str) -> Path:
    """The program built against `release`'s allocator, built on first use."""
    module = MODULES.get(release)
    if module is None:
        raise SystemExit(f"release {release}: no allocator module known; use one of {', '.join(MODULES)}")
    digest = hashlib.sha256((SOURCE / "main.go").read_bytes() + module.encode()).hexdigest()[:12]
    target = CACHE / f"{release}-{digest}" / "goanswer"
    if target.exists():
        return target
    go = shutil.which("go")
    if go is None:
        raise SystemExit("answer.py needs the go command (Go 1.25 or later) on PATH")
    work = target.parent / "src"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    shutil.copy(SOURCE / "main.go", work / "main.go")
    if module == MODULES["1.37"]:
        shutil.copy(SOURCE / "go.mod", work / "go.mod")
        shutil.copy(SOURCE / "go.sum", work / "go.sum")
    else:  # only the direct requirements: tidy finds what this release needs
        (work / "go.mod").write_text("module draq.example/tests/goanswer\n\ngo 1.25.0\n\nrequire (\n" + "".join(
            f"\t{m} {module}\n" for m in ("k8s.io/api", "k8s.io/apimachinery", "k8s.io/dynamic-resource-allocation"))
            + ")\n")
    env = dict(os.environ, CGO_ENABLED="0", GOFLAGS="-mod=mod", GOTOOLCHAIN="local")
    print(f"building goanswer for {release} ({module}) into {target}...", file=sys.stderr, flush=True)
    for step in ([go, "mod", "tidy"], [go, "build", "-o", str(target), "."]):
        done = subprocess.run(step, cwd=work, env=env, capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(step[:3])} failed for {release}:\n{done.stderr[-4000:]}")
    return target


def ask(release: str, case: Path, question: dict[str, Any]) -> dict[str, Any]:
    args = [str(binary(release)), str(case / "objects.yaml"), question["node"], ",".join(question["claims"]),
            ",".join(question.get("features") or [])]
    done = subprocess.run(args, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"{case.name} on {release}: {done.stderr.strip()}")
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def expectation(question: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    versions = ", ".join(MODULES[v] for v in question["k8s_versions"])
    out: dict[str, Any] = {
        "origin": f"draq (hand-written objects; the expectation is the answer of the real allocator, "
                  f"k8s.io/dynamic-resource-allocation {versions}, written by tests/goanswer/answer.py)",
        **{k: question[k] for k in ("k8s_versions", "features", "node", "claims")},
    }
    if answer.get("error"):
        out.update(allocatable=False, error=answer["error"].split(": ")[-1], error_full=answer["error"],
                   error_scope="node" if answer.get("nodeScoped") else "fatal")
    else:
        out["allocatable"] = answer["allocatable"]
        if answer["allocatable"]:
            out.update(_devices(question["claims"], answer["allocations"]))
    if question.get("notes"):
        out["notes"] = question["notes"]
    return out


def _devices(claims: list[str], allocations: list[dict[str, Any]]) -> dict[str, Any]:
    devices: dict[str, Any] = {}
    details: dict[str, Any] = {}
    for claim, allocation in zip(claims, allocations, strict=True):
        per_request: dict[str, list[str]] = {}
        fields = []
        for r in allocation["devices"].get("results") or []:
            device = f"{r['driver']}/{r['pool']}/{r['device']}"
            per_request.setdefault(r["request"], []).append(device)
            extra = {k: v for k, v in r.items() if k not in ("request", "driver", "pool", "device")}
            if extra:
                fields.append({"request": r["request"], "device": device, **extra})
        devices[claim] = per_request
        detail: dict[str, Any] = {}
        if allocation.get("nodeSelector"):
            detail["nodeSelector"] = allocation["nodeSelector"]
        if fields:
            detail["resultFields"] = fields
        if detail:
            details[claim] = detail
    return {"devices": devices, "allocation_details": details} if details else {"devices": devices}


def main(paths: list[str]) -> None:
    for path in map(Path, paths):
        question = yaml.safe_load((path / "question.yaml").read_text())
        answers = {v: ask(str(v), path, question) for v in question["k8s_versions"]}
        distinct = {json.dumps(a, sort_keys=True) for a in answers.values()}
        if len(distinct) > 1:
            raise SystemExit(f"{path.name}: the releases answer differently, split the case:\n"
                             + "\n".join(f"{v}: {json.dumps(a)}" for v, a in answers.items()))
        text = yaml.safe_dump(expectation(question, next(iter(answers.values()))), sort_keys=False, width=110)
        (path / "expect.yaml").write_text(text)
        print(f"{path.name}: {text.splitlines()[5:8]}")


if __name__ == "__main__":
    main(sys.argv[1:])
