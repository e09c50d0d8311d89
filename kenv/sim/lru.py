"""A small least-recently-used table: the bounded memory of the fast-forwards."""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Generic, Hashable, TypeVar

V = TypeVar("V")


class LruTable(Generic[V]):
    """At most ``cap`` values by key; :meth:`get` makes a missing one and
    forgets the least recently used one when there are more."""

    __slots__ = ("_items", "cap")

    def __init__(self, cap: int):
        self._items: OrderedDict[Hashable, V] = OrderedDict()
        self.cap = cap

    def get(self, key: Hashable, make: Callable[[], V]) -> V:
        """The value of ``key`` (``make()``'s if missing), now the most recently used."""
        items = self._items
        value = items.get(key)
        if value is None:
            value = items[key] = make()
            if len(items) > self.cap:
                items.popitem(last=False)
        else:
            items.move_to_end(key)
        return value

    def values(self) -> list[V]:
        """The values kept, least recently used first."""
        return list(self._items.values())

    def clear(self) -> None:
        self._items.clear()

    def __len__(self) -> int:
        return len(self._items)
