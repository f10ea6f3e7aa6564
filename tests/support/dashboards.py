"""dashboards/build.py (a script, not a package) loaded as a module, for the tests that check its output."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

DASHBOARDS = Path(__file__).resolve().parents[2] / "dashboards"


def load_builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("draq_dashboards_build", DASHBOARDS / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
