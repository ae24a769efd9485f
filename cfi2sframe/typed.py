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
    import sys

    try:
        from _collections import _tuplegetter  # what namedtuple's fields are (CPython)
    except ImportError:  # (another Python: its own namedtuple, compiled per class)
        _tuplegetter = None

    # ``__new__``'s code by field count: ``collections.namedtuple`` compiles a lambda
    # for every class (~0.2M instructions, most of what a class costs); the same lambda
    # compiled once per count, its parameters renamed, is the same code.  By ``eval``
    # as namedtuple does: ``compile`` makes Python's ``ast`` types first (~10M).
    _NEW_CODES: dict = {}
    _FUTURE = 0x1000000  # (CO_FUTURE_ANNOTATIONS: this module's, which eval passes on)

    def _new_code(fields):
        count = len(fields)
        code = _NEW_CODES.get(count)
        if code is None:
            params = ", ".join(f"_{i}" for i in range(count)) + ("," if count == 1 else "")
            made = eval(f"lambda _cls, {params}: _tuple_new(_cls, ({params}))",  # noqa: S307
                        {"__builtins__": {}})
            code = made.__code__
            code = _NEW_CODES[count] = code.replace(co_flags=code.co_flags & ~_FUTURE)
        return code.replace(co_varnames=("_cls", *fields))

    def _record(typename, fields, defaults, module):
        """The class ``collections.namedtuple(typename, fields, defaults=defaults,
        module=module)`` makes, attribute for attribute
        (``tests/unit/test_typed.py`` compares every record of the package), its
        ``__new__`` from ``_new_code``."""
        typename = sys.intern(typename)
        fields = tuple(map(sys.intern, fields))
        for name in fields:
            if not name.isidentifier() or name.startswith("_"):
                raise ValueError(f"not a record field name: {name!r}")
        args = ", ".join(fields) + ("," if len(fields) == 1 else "")
        template = "(" + ", ".join(f"{name}=%r" for name in fields) + ")"
        count = len(fields)
        new_tuple = tuple.__new__
        names = {"_tuple_new": new_tuple, "__builtins__": {}, "__name__": f"namedtuple_{typename}"}
        __new__ = type(_new_code)(_new_code(fields), names, "__new__")  # (a FunctionType)
        __new__.__doc__ = f"Create new instance of {typename}({args})"
        __new__.__defaults__ = tuple(defaults)  # (``()`` for none, as namedtuple's given [])

        def _make(cls, iterable):
            made = new_tuple(cls, iterable)
            if len(made) != count:
                raise TypeError(f"Expected {count} arguments, got {len(made)}")
            return made

        _make.__doc__ = f"Make a new {typename} object from a sequence or iterable"

        def _replace(self, /, **kwds):
            made = self._make(map(kwds.pop, fields, self))
            if kwds:
                raise ValueError(f"Got unexpected field names: {list(kwds)!r}")
            return made

        _replace.__doc__ = (f"Return a new {typename} object replacing specified fields "
                            "with new values")

        def __repr__(self):
            """Return a nicely formatted representation string"""
            return self.__class__.__name__ + template % self

        def _asdict(self):
            """Return a new dict which maps field names to their values."""
            return dict(zip(self._fields, self, strict=False))

        def __getnewargs__(self):
            """Return self as a plain tuple.  Used by copy and pickle."""
            return tuple(self)

        for method in (__new__, _make, _replace, __repr__, _asdict, __getnewargs__):
            method.__qualname__ = f"{typename}.{method.__name__}"
        body = {"__doc__": f"{typename}({args})", "__slots__": (), "_fields": fields,
                "_field_defaults": dict(zip(fields[count - len(defaults):], defaults, strict=True))
                if defaults else {},
                "__new__": __new__, "_make": classmethod(_make), "_replace": _replace,
                "__repr__": __repr__, "_asdict": _asdict, "__getnewargs__": __getnewargs__,
                "__match_args__": fields}
        for index, name in enumerate(fields):
            body[name] = _tuplegetter(index, sys.intern(f"Alias for field number {index}"))
        made = type(typename, (tuple,), body)
        made.__module__ = module
        return made

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
            if _tuplegetter is None:
                import collections

                record = collections.namedtuple(typename, list(annotations),
                                                defaults=defaults, module=ns["__module__"])
            else:
                record = _record(typename, list(annotations), defaults, ns["__module__"])
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
