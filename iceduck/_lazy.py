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


class LazyModule:
    """A stand-in for a third-party module that imports it at the first attribute lookup.

    `register(con)` and a plain full scan must not load pyarrow (about 25 MB of a fresh process's
    peak beyond numpy): the modules on that path name pyarrow through one of these, so only code
    that really builds Arrow data (a source's rows, deletes applied) imports it. Each attribute is
    kept on the stand-in once looked up, so later lookups are plain attribute reads. Use it as

        if TYPE_CHECKING:
            import pyarrow as pa
        else:
            pa = LazyModule("pyarrow")
    """

    def __init__(self, name: str) -> None:
        self.__dict__["_lazy_name"] = name

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):  # copy/pickle/inspect probing special names: not the module's
            raise AttributeError(attr)
        value = getattr(importlib.import_module(self.__dict__["_lazy_name"]), attr)
        self.__dict__[attr] = value
        return value

    def __repr__(self) -> str:
        return f"<lazy module {self.__dict__['_lazy_name']!r}>"
