"""A kernel's schedule as a value (Triton's autotuner `Config` is the model): tile sizes, warps,
stages, vector width and flags, frozen and hashable, passed to a renderer beside the kernel. It
never changes a kernel's value, only how a backend tiles its domain; a variant is a new value
(`replace`), never an edit in place."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any


class Schedule(Mapping[str, Any]):
    """An immutable mapping of schedule parameters (numbers, strings, bools)."""

    __slots__ = ("_items",)

    def __init__(self, params: Mapping[str, Any] | None = None, /, **kw: Any) -> None:
        merged = {**(params or {}), **kw}
        for name, v in merged.items():
            if not isinstance(v, (int, float, str, bool)):
                raise TypeError(f"schedule parameter {name}={v!r}: a number, string or bool")
        object.__setattr__(self, "_items", tuple(sorted(merged.items())))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a Schedule is immutable: use replace()")

    def __getitem__(self, key: str) -> Any:
        for k, v in self._items:
            if k == key:
                return v
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Schedule):
            return self._items == other._items
        return isinstance(other, Mapping) and dict(self._items) == dict(other)

    def __repr__(self) -> str:
        return f"Schedule({', '.join(f'{k}={v!r}' for k, v in self._items)})"

    def replace(self, **kw: Any) -> Schedule:
        """A new schedule with these parameters set."""
        return Schedule(dict(self._items), **kw)

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self._items)


EMPTY = Schedule()
# a kernel program's schedules: kernel name -> its schedule
Schedules = Mapping[str, Schedule]
