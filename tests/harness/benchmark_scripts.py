"""A script of benchmarks/ loaded as a module, for unit tests of its pure parts (the scripts are not a
package, and some import their siblings)."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from kvtier import paths

BENCHMARKS = paths.ROOT / "benchmarks"


def load(name: str) -> ModuleType:
    """benchmarks/<name>.py as the module `name`, registered in sys.modules (dataclasses look their module
    up by name), with benchmarks/ on the import path (a script may import one beside it)."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
