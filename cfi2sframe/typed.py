"""What the package takes from ``typing`` at run time, without importing it.

``typing`` costs some 5 ms to import, and each ``typing.NamedTuple`` class compiles
every field's annotation (a ``ForwardRef`` under ``from __future__ import
annotations``): together a third of a small command's own time.  Type checkers read
the ``typing`` names below (any name ``TYPE_CHECKING`` is true to them); at run time
``NamedTuple`` makes the same ``collections.namedtuple`` class ``typing`` does, its
annotations kept as the strings they are, and ``cast`` returns its value.  Every
other name of ``typing`` a module needs it imports under ``TYPE_CHECKING``, so a
command loads ``typing`` only where a library it calls does
(``tests/unit/test_startup.py``).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Generic as Generic
    from typing import NamedTuple as NamedTuple
    from typing import TypeVar as TypeVar
    from typing import cast as cast
else:
    import collections

    # As typing's NamedTupleMeta: what the class body may not set, and what it sets
    # that the namedtuple already has.
    _PROHIBITED = frozenset({"__new__", "__init__", "__slots__", "__getnewargs__", "_fields",
                             "_field_defaults", "_make", "_replace", "_asdict", "_source"})
    _SPECIAL = frozenset({"__module__", "__name__", "__annotations__"})

    class _NamedTupleMeta(type):
        def __new__(cls, typename, bases, ns):
            annotations = ns.get("__annotations__", {})
            defaults = [ns[name] for name in annotations if name in ns]
            if any(name not in ns for name in list(annotations)[len(annotations)
                                                                  - len(defaults):]):
                raise TypeError(f"{typename}: a field without a default follows one with")
            record = collections.namedtuple(typename, list(annotations), defaults=defaults,
                                            module=ns["__module__"])
            record.__annotations__ = dict(annotations)
            if Generic in bases:  # subscripted at run time, the class itself
                record.__class_getitem__ = classmethod(Generic.__class_getitem__.__func__)
            for key, value in ns.items():
                if key in _PROHIBITED:
                    raise AttributeError(f"cannot overwrite NamedTuple attribute {key}")
                if key not in _SPECIAL and key not in record._fields:
                    setattr(record, key, value)
            return record

    NamedTuple = type.__new__(_NamedTupleMeta, "NamedTuple", (), {})

    class Generic:
        """A generic record's base at run time: subscripted, the class itself."""

        __slots__ = ()

        def __class_getitem__(cls, item):
            return cls

    def TypeVar(name, *constraints, **options):
        """The type variable's name: only type checkers read it."""
        return name

    def cast(kind, value):
        """``value`` itself, as ``typing.cast`` returns it."""
        return value
