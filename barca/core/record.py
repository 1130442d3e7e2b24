"""Plain slotted record classes: what ``@dataclass`` gave barca, without its cost at import.

Creating a dataclass runs ``exec`` and ``inspect`` when its module is imported (and ``import
dataclasses`` itself pulls ``inspect``); a CLI command imports dozens of them, on the cold path
that must stay cheap. These bases cost nothing to subclass: the fields are the subclass's
``__slots__``, in order.

* ``Fields``: ``__repr__`` and ``__eq__`` over the fields, unhashable (a mutable dataclass's
  behaviour). Subclasses write their own ``__init__``.
* ``Record``: frozen. Also built by position or keyword in field order with defaults from
  ``_defaults``, hashable, copyable and picklable.
* ``Tuple``: ``typing.NamedTuple`` to a type checker; at run time the same class body makes a
  ``collections.namedtuple`` without typing's check of each annotation, which compiles every
  string annotation (``from __future__ import annotations``) into a ForwardRef.
"""
from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from typing import Any, ClassVar

_set = object.__setattr__


def _public(cls: type[Fields]) -> tuple[str, ...]:
    """The fields shown and compared: a slot named ``_x`` is private state (a cache, a back
    reference), not part of the value."""
    return tuple(f for f in cls.__slots__ if not f.startswith("_"))


def slot_setters(cls: type[Fields]) -> tuple[Any, ...]:
    """The ``__set__`` of each of ``cls``'s own slots, in order: what the ``__init__`` of a
    record made per node calls, past ``object.__setattr__``'s lookup of the slot by name."""
    return tuple(cls.__dict__[f].__set__ for f in cls.__slots__)


class Fields:
    __slots__: tuple[str, ...] = ()

    def __repr__(self) -> str:
        cls = type(self)
        return f"{cls.__qualname__}({', '.join(f'{f}={getattr(self, f)!r}' for f in _public(cls))})"

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, f) for f in type(self).__slots__)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return all(getattr(self, f) == getattr(other, f) for f in _public(type(self)))
        return NotImplemented

    if not TYPE_CHECKING:  # unhashable at run time; hidden from mypy, as Record's hash is legal
        __hash__ = None


class Record(Fields):
    __slots__: tuple[str, ...] = ()
    _defaults: ClassVar[dict[str, Any]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        cls = type(self)
        fields = cls.__slots__
        if len(args) > len(fields):
            raise TypeError(f"{cls.__name__}() takes {len(fields)} positional arguments "
                            f"but {len(args)} were given")
        for name, value in zip(fields, args, strict=False):
            _set(self, name, value)
        defaults = cls._defaults
        for name in fields[len(args):]:
            if name in kwargs:
                _set(self, name, kwargs.pop(name))
            elif name in defaults:
                _set(self, name, defaults[name])
            else:
                raise TypeError(f"{cls.__name__}() missing required argument: '{name}'")
        if kwargs:
            name = next(iter(kwargs))
            if name in fields:
                raise TypeError(f"{cls.__name__}() got multiple values for argument '{name}'")
            raise TypeError(f"{cls.__name__}() got an unexpected keyword argument '{name}'")

    def __hash__(self) -> int:
        return hash(self._values())

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field '{name}'")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field '{name}'")

    def __reduce__(self) -> tuple[Any, ...]:
        # copy and pickle rebuild through __init__: the default route sets slots with setattr
        return (type(self), self._values())



if TYPE_CHECKING:
    from typing import NamedTuple as Tuple
else:  # what a type checker never sees (it knows NamedTuple): the same class, made cheaply
    _NOT_COPIED = frozenset({"__module__", "__annotations__"})
    _PROHIBITED = frozenset({"__new__", "__init__", "__slots__", "__getnewargs__", "_fields",
                             "_field_defaults", "_make", "_replace", "_asdict", "_source"})

    class _TupleMeta(type):
        def __new__(mcls, name, bases, ns):
            if not bases:  # Tuple itself
                return super().__new__(mcls, name, bases, ns)
            fields = tuple(ns.get("__annotations__", ()))
            defaults = [ns[f] for f in fields if f in ns]
            if any(f in ns for f in fields[:len(fields) - len(defaults)]):
                raise TypeError(f"{name}: a field without a default follows one with a default")
            cls = _namedtuple(name, fields, defaults, ns["__module__"])
            for key, value in ns.items():
                if key in _PROHIBITED:
                    raise AttributeError(f"cannot overwrite NamedTuple attribute {key}")
                if key not in _NOT_COPIED and key not in fields:
                    setattr(cls, key, value)
            return cls

    def _namedtuple(name: str, fields: tuple[str, ...], defaults: list[Any], module: str
                    ) -> type:
        """``collections.namedtuple(name, fields, defaults=defaults, module=module)`` without
        its ``eval`` of a ``__new__`` per class (the compiler at import: a third of the cost of
        every class a cached command makes, #31 item 2). The same class: a tuple with the
        fields as C getters, ``_make``, ``_replace``, ``_asdict``, ``__repr__``, pickling."""
        from collections import _tuplegetter  # (C: the getters namedtuple uses)
        n = len(fields)
        given = dict(zip(fields[n - len(defaults):], defaults, strict=True))

        def __new__(cls, *args, **kwargs):  # noqa: N807
            if len(args) == n and not kwargs:
                return tuple.__new__(cls, args)
            if len(args) > n:
                raise TypeError(f"{name}.__new__() takes {n + 1} positional arguments but "
                                f"{len(args) + 1} were given")
            values = list(args)
            for f in fields[len(args):]:
                if f in kwargs:
                    values.append(kwargs.pop(f))
                elif f in given:
                    values.append(given[f])
                else:
                    raise TypeError(f"{name}.__new__() missing required argument: '{f}'")
            if kwargs:
                key = next(iter(kwargs))
                raise TypeError(f"{name}.__new__() got " + (
                    f"multiple values for argument '{key}'" if key in fields
                    else f"an unexpected keyword argument '{key}'"))
            return tuple.__new__(cls, values)

        def _make(cls, iterable):
            result = tuple.__new__(cls, iterable)
            if len(result) != n:
                raise TypeError(f"Expected {n} arguments, got {len(result)}")
            return result

        def _replace(self, /, **kwds):
            result = self._make(map(kwds.pop, fields, self))
            if kwds:
                raise ValueError(f"Got unexpected field names: {list(kwds)!r}")
            return result

        shown = "(" + ", ".join(f"{f}=%r" for f in fields) + ")"

        def __repr__(self):
            return self.__class__.__name__ + shown % self

        def _asdict(self):
            return dict(zip(fields, self, strict=True))

        def __getnewargs__(self):
            return tuple(self)

        space = {"__doc__": f"{name}({', '.join(fields)})", "__slots__": (), "_fields": fields,
                 "_field_defaults": given, "__new__": __new__, "_make": classmethod(_make),
                 "_replace": _replace, "__repr__": __repr__, "_asdict": _asdict,
                 "__getnewargs__": __getnewargs__, "__match_args__": fields,
                 "__module__": module}
        for i, f in enumerate(fields):
            space[f] = _tuplegetter(i, f"Alias for field number {i}")
        cls = type(name, (tuple,), space)
        for fn in (__new__, _make, _replace, __repr__, _asdict, __getnewargs__):
            fn.__qualname__ = f"{name}.{fn.__name__}"
        return cls

    class Tuple(metaclass=_TupleMeta):
        """Subclass it as ``typing.NamedTuple`` (fields annotated, defaults last, methods)."""
