"""Faster constructors for libcst's node classes (issue 20 item 8).

libcst's nodes are frozen dataclasses with `__slots__`. The `__init__` that `dataclasses`
writes for a frozen class stores every field through `object.__setattr__(self, name, v)`,
a global and attribute lookup plus a generic attribute store per field; the native parser
builds every node of every submission through it, about 5% of a CLI batch. The constructor
made here stores each field through its slot's own descriptor (`member.__set__(self, v)`):
the same slots get the same values in the same order, defaults and default factories are
the same objects, and `__post_init__` (node validation, see validation_pause.py) runs as
before. A class is left alone unless its constructor is the dataclass-generated one, every
field is a slot, and the new constructor takes exactly the same parameters with the same
default objects; so a libcst release that changes any of this only loses the speed-up.
"""

from __future__ import annotations

import dataclasses
import threading
import types
from functools import lru_cache
from typing import Any, Callable, Optional

from libcst import CSTNode

_installed = False
FILENAME = "<gatekeeper.static.node_init>"  # the code objects' file name, which tracebacks show
_lock = threading.Lock()


def install_fast_node_inits() -> int:
    """Replace the constructor of every eligible node class, once per process; returns how
    many classes were switched by this call (0 after the first)."""
    global _installed
    with _lock:
        if _installed:
            return 0
        _installed = True
        count = 0
        for cls in _node_classes():
            init = fast_init(cls)
            if init is not None:
                cls.__init__ = init  # type: ignore[misc]
                count += 1
        return count


def _node_classes() -> list[type]:
    seen: set[type] = set()
    todo = [CSTNode]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in seen:
                seen.add(sub)
                todo.append(sub)
    return sorted(seen, key=lambda c: (c.__module__, c.__qualname__))  # a fixed order, for reproducible runs


def fast_init(cls: type) -> Optional[Callable[..., None]]:
    """A slot-storing `__init__` equivalent to `cls`'s dataclass one, or None when `cls`
    does not qualify (see the module docstring)."""
    original = cls.__dict__.get("__init__")
    params = getattr(cls, "__dataclass_params__", None)
    if original is None or params is None or not params.init or not params.frozen or "__slots__" not in cls.__dict__ \
            or getattr(original, "__code__", None) is None or original.__code__.co_filename != "<string>":
        return None  # inherited, hand-written, no slots (the class dataclasses replaced by its slotted copy) ...
    if any(f._field_type is dataclasses._FIELD_INITVAR for f in cls.__dataclass_fields__.values()):  # type: ignore[attr-defined]
        return None  # an InitVar: a parameter that is not a slot (a ClassVar is no parameter at all)
    fields = dataclasses.fields(cls)
    scope: dict[str, Any] = {"_HAS": dataclasses._HAS_DEFAULT_FACTORY}  # type: ignore[attr-defined]
    defaults: list[Any] = []
    kwdefaults: dict[str, Any] = {}
    factories: list[int] = []
    for i, f in enumerate(fields):
        slot = next((k.__dict__[f.name] for k in cls.__mro__ if f.name in k.__dict__), None)
        if not f.init or type(slot).__name__ != "member_descriptor":
            return None
        scope[f"s{i}"] = slot.__set__
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            scope[f"f{i}"] = f.default_factory
            factories.append(i)
            default = dataclasses._HAS_DEFAULT_FACTORY  # type: ignore[attr-defined]
        elif defaults or f.kw_only:
            return None  # a required parameter after a defaulted one: dataclasses reorders none
        else:
            continue
        if f.kw_only:
            kwdefaults[f.name] = default
        else:
            defaults.append(default)
    keyword = sum(1 for f in fields if f.kw_only)
    if any(f.kw_only for f in fields[: len(fields) - keyword]):
        return None  # keyword-only fields between positional ones
    code = _template(len(fields), keyword, tuple(factories), hasattr(cls, "__post_init__"))
    code = code.replace(co_varnames=("self", *(f.name for f in fields)), co_name="__init__",
                        co_qualname=f"{cls.__qualname__}.__init__")
    init = types.FunctionType(code, scope, "__init__", tuple(defaults) or None)
    init.__kwdefaults__ = kwdefaults or None
    init.__module__ = cls.__module__
    return init if _same_parameters(original, init) else None


@lru_cache(maxsize=None)
def _template(width: int, keyword: int, factories: tuple[int, ...], post_init: bool) -> types.CodeType:
    """One compiled constructor per shape: parameters p0..pN (the last `keyword` of them
    keyword-only), each stored through the setter s<i>, a factory f<i> called for the
    positions in `factories` left at the sentinel. fast_init renames the parameters to the
    class's fields; compiling one function per class was ~0.5% of a 1,000-file batch."""
    names = [f"p{i}" for i in range(width)]
    params = names[: width - keyword] + (["*"] + names[width - keyword:] if keyword else [])
    body = [f"    if p{i} is _HAS:\n        p{i} = f{i}()" for i in factories]
    body += [f"    s{i}(self, p{i})" for i in range(width)]
    body += ["    self.__post_init__()"] if post_init else []
    namespace: dict[str, Any] = {}
    source = f"def __init__({', '.join(['self', *params])}):\n" + ("\n".join(body) or "    pass") + "\n"
    exec(compile(source, FILENAME, "exec"), {}, namespace)
    return namespace["__init__"].__code__


def _same_parameters(a: Callable[..., Any], b: Callable[..., Any]) -> bool:
    """Same parameter names in the same order and kinds, and the very same default objects."""
    ca, cb = a.__code__, b.__code__  # type: ignore[attr-defined]
    width = ca.co_argcount + ca.co_kwonlyargcount
    if (ca.co_argcount, ca.co_kwonlyargcount) != (cb.co_argcount, cb.co_kwonlyargcount) \
            or ca.co_varnames[:width] != cb.co_varnames[:width]:
        return False
    da, db = a.__defaults__ or (), b.__defaults__ or ()  # type: ignore[attr-defined]
    ka, kb = a.__kwdefaults__ or {}, b.__kwdefaults__ or {}  # type: ignore[attr-defined]
    return len(da) == len(db) and all(x is y for x, y in zip(da, db)) \
        and ka.keys() == kb.keys() and all(ka[k] is kb[k] for k in ka)
