"""copier's way into the tmd decision engine, loaded by `copier-template-extensions`.

copier.yml lists this file under `_jinja_extensions`; it puts the engine's rules
(`generator/tmd/copier_bridge.py`) into the Jinja environment as `tmd_default`, `tmd_check`,
`tmd_asked`, `tmd_design` and `tmd_design_notes`.

The engine is loaded from this checkout's files under a name made from their content, not
imported as `tmd`: `copier update` renders the old and the new template version in one process,
and a cached `import tmd` would make both renders run whichever engine came first (or the `tmd`
a person happens to have installed). The engine needs only the standard library.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from jinja2 import Environment, pass_context
from jinja2.ext import Extension

ENGINE = Path(__file__).resolve().parents[1] / "generator" / "tmd"


def load_engine() -> ModuleType:
    """generator/tmd/copier_bridge.py, as a module of a package named after the engine's code."""
    digest = hashlib.sha256()
    for path in sorted(ENGINE.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    name = f"_tmd_engine_{digest.hexdigest()[:16]}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, ENGINE / "__init__.py", submodule_search_locations=[str(ENGINE)]
        )
        package = importlib.util.module_from_spec(spec)
        sys.modules[name] = package
        spec.loader.exec_module(package)
    return importlib.import_module(f"{name}.copier_bridge")


class Engine(Extension):
    def __init__(self, environment: Environment):
        super().__init__(environment)
        bridge = load_engine()
        for name in ("default", "check", "asked", "design", "design_notes"):
            environment.globals[f"tmd_{name}"] = pass_context(getattr(bridge, name))
