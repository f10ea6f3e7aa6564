"""The shell (client layer, operator, webhooks, CLI, local-cluster kit) uses only what the core's packages
export: a name it imports from the core is in that package's `__all__`, imported from the package itself,
never from one of its private modules. Single-module parts of the core (`labels`, `errors`, ...) export
every name that does not start with an underscore."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import admission

SHELL = ("kube", "operator", "webhook", "cli", "localcluster")
ROOT = Path(admission.__file__).parent


def core_imports() -> list[tuple[str, int, str, str]]:
    """(file, line, module, name) for every `from admission.core... import name` in the shell."""
    found = []
    for part in SHELL:
        for path in sorted((ROOT / part).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("admission.core"):
                    found += [(str(path.relative_to(ROOT.parent)), node.lineno, node.module or "", alias.name)
                              for alias in node.names]
    return found


def refusal(module_name: str, name: str) -> str:
    module = importlib.import_module(module_name)
    exported = getattr(module, "__all__", None)
    if exported is not None:
        return "" if name in exported else f"{name} is not in {module_name}.__all__"
    if not hasattr(module, "__path__") and module_name.count(".") == 2:  # admission.core.<module>
        return f"{name} is private" if name.startswith("_") else ""
    package = module_name.rsplit(".", 1)[0]
    return f"{module_name} is a private module of {package}: import {name} from the package"


def test_the_shell_imports_only_exported_core_names() -> None:
    imports = core_imports()
    assert len(imports) > 100  # the shell does use the core
    refused = [f"{path}:{line}: {why}" for path, line, module, name in imports if (why := refusal(module, name))]
    assert refused == []
