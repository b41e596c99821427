"""Package roots whose names load on first use (PEP 562).

`import iceduck.spec.types` must not run the whole package, and a command imports only what it
uses, so the roots of `iceduck`, `iceduck.transaction` and `iceduck.maintenance` (and its `health`)
name their public objects in a table (name -> defining module) and load each one when it is first
looked up. This module holds that lookup once; it imports nothing of iceduck.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, MutableMapping
from typing import Any


def lazy_attribute(package: str, names: Mapping[str, str], namespace: MutableMapping[str, Any], name: str) -> Any:
    """What a package root's `__getattr__` returns for `name`: the object of that name in the module
    `names` maps it to (absolute, or relative to `package` with a leading dot), kept in `namespace`
    (the root's globals) so that later lookups do not come here; `AttributeError` for other names."""
    module = names.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, package), name)
    namespace[name] = value
    return value
