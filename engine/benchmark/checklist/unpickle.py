"""A restricted unpickler for CheckList suites: the data comes out, the code is never run.

A released CheckList suite is a dill pickle. Loading it the usual way imports
``checklist`` and ``dill`` and calls whatever callables the file names, and a pickle can
name ``os.system``. Here ``find_class`` never imports anything. It returns:

* the real constructor for a short list of plain-data builders (``list``, ``dict``,
  ``OrderedDict``, numpy's array and scalar rebuilders, ...);
* an inert placeholder for a class or function of ``checklist``, ``munch``, ``dill``,
  ``__main__``, numpy beyond that list, and the harmless builtins that dill stores in a
  pickled function's globals (``len``, ``type``, ...). Calling a placeholder records the
  call in an ``Opaque`` object and runs nothing; its state (BUILD, ``__setstate__``) is
  stored as data;
* for dill's ``getattr``/``setattr`` shims (dill >= 0.3.5 fills closure cells with
  ``setattr(cell, 'cell_contents', value)``), stand-ins that act on placeholders only;
* a refusal (``InputError``, one line naming the global) for anything else.
"""

from __future__ import annotations

import builtins
import collections
import copyreg
import io
import pickle
from collections.abc import Callable
from typing import IO, Any, ClassVar

import numpy as np

from checkray.engine.errors import InputError

REFUSAL = "a CheckList suite holds only data, checklist/dill objects and numpy arrays"


class _InertMeta(type):
    """Placeholder classes are frozen: a pickle cannot rebind their methods (BUILD's
    slot state would otherwise ``setattr`` on the class)."""

    def __setattr__(cls, name: str, value: Any) -> None:
        raise TypeError(f"cannot set '{name}' on placeholder {cls.target!r}")

    def __repr__(cls) -> str:
        return f"<placeholder {cls.target}>"


class Opaque(metaclass=_InertMeta):
    """Stands for a class or function the pickle names; an instance is a recorded call.

    ``type(x).target`` is the qualified name ("dill._dill._create_function"); ``args`` and
    ``kwargs`` the call's arguments; ``state`` what BUILD gave; ``attrs`` what the safe
    ``setattr`` stored; ``items``/``appended`` what SETITEMS/APPENDS added.
    """

    target: ClassVar[str] = "?"
    namespace: ClassVar[Any] = None  # class body of a class dill pickled by value (data)
    late_attrs: ClassVar[dict[str, Any]] = {}  # setattr on the class itself, recorded

    def __new__(cls, *args: Any, **kwargs: Any) -> Opaque:
        self = object.__new__(cls)
        self.args, self.kwargs = args, kwargs
        self.state: Any = None
        self.attrs: dict[str, Any] = {}
        self.items: list[tuple[Any, Any]] = []
        self.appended: list[Any] = []
        return self

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass  # __new__ recorded the call

    @property
    def name(self) -> str:
        return type(self).target

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def __setitem__(self, key: Any, value: Any) -> None:
        self.items.append((key, value))

    def append(self, value: Any) -> None:
        self.appended.append(value)

    def extend(self, values: Any) -> None:
        self.appended.extend(values)

    def fields(self) -> dict[str, Any]:
        """The object's attributes as pickled: BUILD's dict (and slot state), then setattr's."""
        out: dict[str, Any] = {}
        state = self.state
        parts = state if isinstance(state, tuple) and len(state) == 2 else (state,)
        for part in parts:
            if isinstance(part, dict):
                out.update({k: v for k, v in part.items() if isinstance(k, str)})
        out.update(self.attrs)
        return out

    def __repr__(self) -> str:
        return f"<opaque {self.name}>"


class MunchDict(dict):
    """``munch.Munch`` (CheckList's ``test.results``) as a plain dict with attribute access."""

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, dict):
            self.update(state)

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class _Builder:
    """A safe stand-in for a global: a fixed Python function a pickle may call, frozen."""

    __slots__ = ("target", "fn")

    def __init__(self, target: str, fn: Callable[..., Any]):
        object.__setattr__(self, "target", target)
        object.__setattr__(self, "fn", fn)

    def __setattr__(self, name: str, value: Any) -> None:
        raise TypeError(f"cannot set '{name}' on {self.target}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


def _numpy_builders() -> dict[str, Any]:
    core = np._core if hasattr(np, "_core") else np.core  # numpy 2 / numpy 1
    return {
        "ndarray": np.ndarray,
        "dtype": np.dtype,
        "_reconstruct": core.multiarray._reconstruct,
        "scalar": core.multiarray.scalar,
        "_frombuffer": core.numeric._frombuffer,
    }


_NUMPY = _numpy_builders()
# numpy 1 pickles say numpy.core.*, numpy 2 numpy._core.*: both resolve to this numpy.
_NUMPY_MODULES = {"numpy"} | {
    f"numpy.{core}{sub}" for core in ("core", "_core") for sub in ("", ".multiarray", "._multiarray_umath", ".numeric")
}
_DATA_BUILTINS = {
    name: getattr(builtins, name)
    for name in "list dict set frozenset tuple str bytes bytearray int float complex bool object slice range".split()
}
# Builtins dill stores in a pickled function's globals (``globalvars(builtin=True)``):
# named, never called, so an inert placeholder is enough. eval/exec/open/... are refused.
_INERT_BUILTINS = set(
    "abs all any ascii bin callable chr divmod enumerate filter format hasattr hash hex id isinstance "
    "issubclass iter len map max min next oct ord pow print property repr reversed round sorted "
    "staticmethod classmethod sum super type zip NotImplemented Ellipsis".split()
)
_COMPAT_MODULES = {"__builtin__": "builtins", "copy_reg": "copyreg"}


def _in_package(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


class RestrictedUnpickler(pickle.Unpickler):
    """``pickle.Unpickler`` whose ``find_class`` imports nothing (see the module docstring)."""

    def __init__(self, file: IO[bytes], source: str):
        super().__init__(file)
        self.source = source
        self._placeholders: dict[str, type[Opaque]] = {}
        self._special: dict[str, Any] = {
            "builtins.getattr": _Builder("getattr", self._getattr),
            "builtins.setattr": _Builder("setattr", _setattr),
            "builtins.delattr": _Builder("delattr", _delattr),
            "collections.defaultdict": _Builder("defaultdict", lambda *_: {}),  # factory dropped
            "copyreg._reconstructor": _Builder("_reconstructor", self._reconstructor),
            "copyreg.__newobj__": _Builder("__newobj__", lambda cls, *a: self._checked_type(cls).__new__(cls, *a)),
            "_codecs.encode": _Builder("encode", _latin1_encode),
        }
        for dill_module in ("dill._dill", "dill.dill", "dill._shims"):
            self._special[f"{dill_module}._create_type"] = _Builder("_create_type", self._create_type)
            self._special[f"{dill_module}._create_namedtuple"] = _Builder("_create_namedtuple", self._create_type)
            self._special[f"{dill_module}._load_type"] = _Builder("_load_type", self._load_type)
            self._special[f"{dill_module}._get_attr"] = self._special["builtins.getattr"]
            self._special[f"{dill_module}._setattr"] = self._special["builtins.setattr"]
            self._special[f"{dill_module}._delattr"] = self._special["builtins.delattr"]

    # -- resolution -----------------------------------------------------------------
    def find_class(self, module: str, name: str) -> Any:
        return self.resolve(_COMPAT_MODULES.get(module, module), name)

    def resolve(self, module: str, name: str) -> Any:
        qualified = f"{module}.{name}"
        if qualified in self._special:
            return self._special[qualified]
        if module == "builtins" and name in _DATA_BUILTINS:
            return _DATA_BUILTINS[name]
        if module == "builtins" and (name in _INERT_BUILTINS or name.endswith(("Error", "Exception", "Warning"))):
            return self.placeholder(qualified)
        if module == "collections" and name in ("OrderedDict", "deque"):
            return getattr(collections, name)
        if module in _NUMPY_MODULES and name in _NUMPY:
            return _NUMPY[name]
        if name == "__dict__":
            # dill (recurse=False) pickles a function's globals as "module.__dict__", which
            # pickle would import; never imported here, it is an inert placeholder.
            return self.placeholder(qualified)
        if _in_package(module, "munch") and name.endswith("Munch"):
            return MunchDict
        if any(_in_package(module, p) for p in ("checklist", "munch", "dill", "__main__", "numpy")):
            return self.placeholder(qualified)
        raise InputError(f"{self.source}: checkray refuses to load '{qualified}': {REFUSAL}")

    def placeholder(self, target: str, namespace: Any = None) -> type[Opaque]:
        """The inert class standing for ``target`` (one per name; a by-value class gets its own)."""
        if namespace is None and target in self._placeholders:
            return self._placeholders[target]
        short = target.rsplit(".", 1)[-1] or "placeholder"
        cls = _InertMeta(short, (Opaque,), {"target": target, "namespace": namespace, "late_attrs": {}})
        if namespace is None:
            self._placeholders[target] = cls
        return cls

    # -- safe stand-ins -------------------------------------------------------------
    def _getattr(self, obj: Any, name: Any, *default: Any) -> Any:
        """``getattr`` on a placeholder resolves like a global (dill's ``getattr(dill._dill,
        '_setattr', setattr)`` shim); on a real object it is refused: from any real object
        getattr reaches the interpreter's internals."""
        if not isinstance(name, str):
            raise InputError(f"{self.source}: not a CheckList suite pickle: getattr with a non-string name")
        module = None
        if isinstance(obj, str) and obj in ("builtins", "__builtin__"):
            # dill 0.3.1 (CheckList's released suites) pickles a builtin function as
            # _get_attr('builtins', 'len'): getattr on the string fails and dill falls back
            # to the builtins module. Resolved like the global builtins.len.
            module = "builtins"
        elif isinstance(obj, type) and issubclass(obj, Opaque):
            module = obj.target
        elif isinstance(obj, Opaque) and obj.name.endswith("._import_module") and obj.args:
            module = obj.args[0] if isinstance(obj.args[0], str) else None
        elif isinstance(obj, Opaque):
            return self.placeholder(f"{obj.name}().{name}")
        if module is not None:
            return self.resolve(module, name)
        kind = type(obj).__name__
        raise InputError(f"{self.source}: checkray refuses getattr(<{kind}>, '{name}'): {REFUSAL}")

    def _create_type(self, *args: Any) -> type[Opaque]:
        """dill's ``_create_type(type, name, bases, namespace)`` / ``_create_namedtuple(name,
        fields, module)``: an inert class keeping the pickled class body as data."""
        strings = [a for a in args if isinstance(a, str)]
        name = strings[0] if strings else "unnamed"
        namespace = next((a for a in args if isinstance(a, dict)), {})
        module = namespace.get("__module__") if isinstance(namespace.get("__module__"), str) else None
        if module is None and len(strings) > 1:
            module = strings[-1]  # _create_namedtuple(name, fields, module)
        return self.placeholder(f"{module or '__main__'}.{name}", namespace=namespace)

    def _load_type(self, name: Any) -> type[Opaque]:
        """dill's ``_load_type('staticmethod')``: a type, so a class it may be called as."""
        if not isinstance(name, str):
            raise InputError(f"{self.source}: not a CheckList suite pickle: _load_type of a non-string")
        return self.placeholder(f"dill._dill._load_type:{name}")

    def _checked_type(self, cls: Any) -> type:
        allowed = set(_DATA_BUILTINS.values()) | {collections.OrderedDict, collections.deque, MunchDict}
        if isinstance(cls, type) and (issubclass(cls, Opaque) or cls in allowed):
            return cls
        raise InputError(f"{self.source}: checkray refuses to construct {cls!r}: {REFUSAL}")

    def _reconstructor(self, cls: Any, base: Any, state: Any) -> Any:
        """``copyreg._reconstructor`` (protocol 0/1 instances) for the types above only."""
        cls = self._checked_type(cls)
        if issubclass(cls, Opaque):
            return cls(state) if state is not None else cls()
        return copyreg._reconstructor(cls, self._checked_type(base), state)


def _setattr(obj: Any, name: Any, value: Any) -> None:
    """Record an attribute on a placeholder (dill fills closure cells this way)."""
    if isinstance(obj, Opaque) and isinstance(name, str):
        obj.attrs[name] = value
    elif isinstance(obj, type) and issubclass(obj, Opaque) and isinstance(name, str):
        obj.late_attrs[name] = value
    else:
        raise InputError(f"checkray refuses setattr on a real {type(obj).__name__} object: {REFUSAL}")


def _delattr(obj: Any, name: Any) -> None:
    if isinstance(obj, Opaque) and isinstance(name, str):
        obj.attrs.pop(name, None)
    elif not (isinstance(obj, type) and issubclass(obj, Opaque)):
        raise InputError(f"checkray refuses delattr on a real {type(obj).__name__} object: {REFUSAL}")


def _latin1_encode(text: Any, encoding: Any = "latin1") -> bytes:
    """``_codecs.encode`` as protocol-2 pickles use it for bytes: latin-1 only (another
    codec name would make Python import a codec module)."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise InputError(f"checkray refuses _codecs.encode with encoding {encoding!r}: {REFUSAL}")
    return text.encode("latin1")


def load_pickle(stream: IO[bytes] | bytes, source: str) -> Any:
    """Unpickle ``stream`` with ``RestrictedUnpickler``; every failure is a one-line InputError."""
    if isinstance(stream, bytes | bytearray):
        stream = io.BytesIO(stream)
    try:
        return RestrictedUnpickler(stream, source).load()
    except InputError as exc:
        message = str(exc)
        raise InputError(message if message.startswith(f"{source}: ") else f"{source}: {message}") from None
    except RecursionError:
        raise InputError(f"{source}: not a CheckList suite pickle: nested too deeply") from None
    except Exception as exc:  # any failure of a malformed pickle is the user's input
        detail = str(exc).splitlines()[0][:200] if str(exc) else ""
        raise InputError(f"{source}: not a CheckList suite pickle: {type(exc).__name__}: {detail}") from None
