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
