"""``cfi2sframe.typed``: its ``NamedTuple`` makes the class ``typing.NamedTuple`` makes
(the oracle is ``typing`` itself), and ``cast`` returns its value."""

from __future__ import annotations

import pickle
import typing
from typing import Any

import pytest

from cfi2sframe import typed

_BODY = '''
class Point(NamedTuple):
    """A point."""

    x: int
    y: tuple[int, ...]
    label: str = "p"
    weight: float | None = None

    @property
    def norm(self) -> int:
        return abs(self.x)

    def moved(self, by: int) -> Point:
        return self._replace(x=self.x + by)

    def __repr__(self) -> str:
        return f"<{self.x}>"
'''


def _make(base: object, module: str) -> Any:
    space: dict[str, object] = {"NamedTuple": base, "__name__": module}
    exec(compile("from __future__ import annotations\n" + _BODY, module, "exec"), space)
    return space["Point"]


def test_a_record_is_typing_s_namedtuple() -> None:
    ours, theirs = _make(typed.NamedTuple, "m_ours"), _make(typing.NamedTuple, "m_theirs")
    for cls in (ours, theirs):
        assert cls.__mro__ == (cls, tuple, object)
    assert ours._fields == theirs._fields == ("x", "y", "label", "weight")
    assert ours._field_defaults == theirs._field_defaults == {"label": "p", "weight": None}
    assert (ours.__doc__, ours.__qualname__, ours.__module__) == ("A point.", "Point", "m_ours")
    assert list(ours.__annotations__) == list(theirs.__annotations__)
    a, b = ours(1, (2,)), theirs(1, (2,))
    assert tuple(a) == tuple(b) == (1, (2,), "p", None)
    assert (repr(a), a.norm, tuple(a.moved(2))) == (repr(b), b.norm, tuple(b.moved(2)))
    assert a._asdict() == b._asdict() and a == b and hash(a) == hash(b)
    with pytest.raises(AttributeError):
        a.x = 2


def test_a_record_pickles_by_its_module_and_name() -> None:
    record = typed_point(3)
    assert pickle.loads(pickle.dumps(record)) == record
    assert type(pickle.loads(pickle.dumps(record))) is _Point


def test_what_typing_refuses_is_refused() -> None:
    with pytest.raises(TypeError):
        _make_bad('class Bad(NamedTuple):\n    a: int = 1\n    b: int\n')
    with pytest.raises(AttributeError):
        _make_bad('class Bad(NamedTuple):\n    a: int\n    def _replace(self): ...\n')


def test_a_generic_record_is_subscriptable() -> None:
    space: dict[str, object] = {"NamedTuple": typed.NamedTuple, "Generic": typed.Generic,
                                "T": typed.TypeVar("T"), "__name__": "m"}
    exec("class Box(NamedTuple, Generic[T]):\n    item: T\n", space)
    box: Any = space["Box"]
    assert box[int] is box and box.__mro__ == (box, tuple, object)


def test_cast_returns_its_value() -> None:
    value = object()
    assert typed.cast(int, value) is value


def _make_bad(source: str) -> None:
    exec(source, {"NamedTuple": typed.NamedTuple, "__name__": "m"})


class _Point(typed.NamedTuple):
    x: int


def typed_point(x: int) -> _Point:
    return _Point(x)


def _package_records() -> list[Any]:
    """Every record class the package's modules define with ``typed.NamedTuple``."""
    import importlib
    import pkgutil

    import cfi2sframe

    found: dict[str, Any] = {}
    for info in pkgutil.walk_packages(cfi2sframe.__path__, "cfi2sframe."):
        if info.name.endswith(("gdb_snapshot", "__main__")):  # (gdb's script; the command)
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra (dask, matplotlib) not installed
            continue
        for value in vars(module).values():
            if (isinstance(value, type) and value.__mro__[1:] == (tuple, object)
                    and hasattr(value, "_fields") and value.__module__ == info.name):
                found[f"{info.name}.{value.__qualname__}"] = value
    return list(found.values())


def _function_face(function: Any) -> tuple[object, ...]:
    """What a caller sees of a function: names, docs, defaults, signature.  Not its
    ``__module__``: the methods are written in ``typed.py``, where a traceback through
    them points; ``__new__``'s, ``namedtuple_NAME``, is compared with its globals."""
    import inspect

    return (function.__name__, function.__qualname__, function.__doc__,
            function.__defaults__, function.__kwdefaults__, str(inspect.signature(function)))


def _class_face(cls: Any) -> dict[str, object]:
    """Every attribute of a record class as a caller sees it: functions by their face,
    ``__new__`` by its code too, fields by their doc and what they read."""
    face: dict[str, object] = {"__name__": cls.__name__, "__qualname__": cls.__qualname__,
                               "__module__": cls.__module__, "__mro__": len(cls.__mro__)}
    for key, value in vars(cls).items():
        if key == "__new__":  # (a staticmethod, as ``type`` makes every ``__new__``)
            value = value.__func__
            code = value.__code__
            face[key] = (_function_face(value), code.co_code, code.co_consts, code.co_names,
                         code.co_flags, code.co_firstlineno,
                         code.co_varnames, code.co_name, code.co_qualname, code.co_filename,
                         sorted(value.__globals__.items(), key=str))
        elif isinstance(value, classmethod):
            face[key] = ("classmethod", _function_face(value.__func__))
        elif callable(value):
            face[key] = _function_face(value)
        elif type(value).__name__ == "_tuplegetter":
            face[key] = (value.__doc__, value.__get__(tuple(range(len(cls._fields)))))
        else:
            face[key] = value
    return face


def _behaviour(cls: Any) -> list[object]:
    """What instances do: repr, _replace, _asdict, _make, __getnewargs__, and the
    errors of wrong calls, word for word."""
    seen: list[object] = []
    values = [f"v{i}" for i in range(len(cls._fields))]
    made = cls(*values)
    seen += [repr(made), tuple(made), made._asdict(), made.__getnewargs__(),
             tuple(cls._make(values)), repr(cls(*values[:len(values) - len(cls._field_defaults)]))]
    if cls._fields:
        seen.append(tuple(made._replace(**{cls._fields[-1]: "new"})))
        seen.append(tuple(cls(**dict(zip(cls._fields, values, strict=True)))))
    for wrong in (lambda: cls._make(values + ["extra"]), lambda: made._replace(nope=1),
                  lambda: cls(*values, "extra"), lambda: cls(),
                  lambda: cls(*values, **{cls._fields[0]: 1} if cls._fields else {"a": 1})):
        try:
            wrong()
            seen.append("no error")
        except (TypeError, ValueError) as exc:
            seen.append((type(exc), str(exc)))
    return seen


def test_every_record_of_the_package_is_collections_namedtuple_s_class() -> None:
    """``typed._record`` (``__new__`` compiled once per field count) gives the class
    ``collections.namedtuple`` gives, the oracle, for the name, fields, defaults and
    module of every record the package defines: every attribute and what instances
    do, errors included."""
    import collections

    records = _package_records()
    assert len(records) >= 140  # the package's records (145 when this was written)
    for record in records:
        defaults = list(record._field_defaults.values())
        args = (record.__name__, list(record._fields))
        ours = typed._record(*args, defaults, record.__module__)
        theirs = collections.namedtuple(*args, defaults=defaults, module=record.__module__)
        assert _class_face(ours) == _class_face(theirs), record
        assert _behaviour(ours) == _behaviour(theirs), record


def test_the_comparison_sees_a_difference() -> None:
    """The check itself: a class that differs in a doc, an error's words or a
    default is told apart."""
    import collections

    base = collections.namedtuple("R", ["a", "b"], defaults=[1], module="m")
    other_default = collections.namedtuple("R", ["a", "b"], defaults=[2], module="m")
    assert _class_face(base) != _class_face(other_default)
    assert _behaviour(base) != _behaviour(other_default)
    renamed = collections.namedtuple("R", ["a", "c"], defaults=[1], module="m")
    assert _class_face(base) != _class_face(renamed) and _behaviour(base) != _behaviour(renamed)
