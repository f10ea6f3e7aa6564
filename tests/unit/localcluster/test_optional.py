"""The local-cluster kit is an optional part: no wheel ships it, nothing but `draq demo` imports it, the
`local` extra names what it imports, and without it `draq demo` says how to get it while `draq run` works."""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

import pytest
import setuptools

from admission.cli import demo, main

REPO = Path(__file__).resolve().parents[3]
PACKAGE = REPO / "admission"
KIT = PACKAGE / "localcluster"


def imported(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def pyproject() -> dict[str, object]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def test_wheels_leave_the_kit_out() -> None:
    find = pyproject()["tool"]["setuptools"]["packages"]["find"]  # type: ignore[index]
    packages = setuptools.find_packages(str(REPO), include=find["include"], exclude=find["exclude"])
    assert "admission.cli" in packages and "admission.core.simulate" in packages
    assert [p for p in packages if p.startswith("admission.localcluster")] == []


def test_only_the_demo_imports_the_kit() -> None:
    importers = sorted(str(path.relative_to(REPO)) for path in PACKAGE.rglob("*.py")
                       if KIT not in path.parents
                       and any(m == "admission.localcluster" or m.startswith("admission.localcluster.")
                               for m in imported(path)))
    assert importers == ["admission/cli/demo.py"]


def test_the_local_extra_names_what_the_kit_imports() -> None:
    stdlib = sys.stdlib_module_names
    third_party = {m.split(".")[0] for path in KIT.glob("*.py") for m in imported(path)}
    third_party -= {"admission", "__future__", *stdlib}
    distributions = {"kubernetes": "kubernetes", "yaml": "pyyaml", "cryptography": "cryptography"}
    assert third_party <= set(distributions), "a new import of the kit: name it in the extra `local`"
    extra = {name.lower() for name in pyproject()["project"]["optional-dependencies"]["local"]}  # type: ignore[index]
    assert {distributions[m] for m in third_party} == extra


@pytest.fixture
def without_kit(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in the container image: `admission.localcluster` cannot be imported."""
    for name in [n for n in sys.modules if n.startswith("admission.localcluster.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "admission.localcluster", None)  # type: ignore[arg-type]


@pytest.mark.usefixtures("without_kit")
def test_the_demo_without_the_kit_says_how_to_get_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main.main(["demo", "--once"]) == 2
    err = capsys.readouterr().err
    assert err == f"draq demo: error: {demo.KIT_MISSING}\n"
    assert "make demo" in err and "Traceback" not in err


@pytest.mark.usefixtures("without_kit")
def test_every_other_command_parses_without_the_kit(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("run", "webhook", "simulate", "allocate", "gaps", "queues", "why"):
        with pytest.raises(SystemExit) as exited:
            main.main([command, "--help"])
        assert exited.value.code == 0, command
    assert "--webhook-port" in capsys.readouterr().out
