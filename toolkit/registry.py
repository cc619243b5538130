"""Plug-ins of one sort looked up by name (the engines, the target kinds): the ones shipped with the toolkit stay,
others (a test's fake one, a new engine or cluster) come and go; an unknown name is an error with a did-you-mean.

    ENGINES = Registry("engine", "engines", {e.name: e for e in (...)})
    ENGINES.get("sglng")     # ToolkitError: unknown engine 'sglng' (did you mean 'sglang'?)
"""

from __future__ import annotations

import difflib
from typing import Generic, Iterator, TypeVar

from toolkit.errors import ToolkitError

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, what: str, plural: str, builtin: dict[str, T]):
        self.what, self.plural = what, plural  # "target kind", "kinds": the words of its errors
        self._items: dict[str, T] = dict(builtin)
        self.builtin: tuple[str, ...] = tuple(builtin)

    def register(self, name: str, item: T) -> T:
        """Make `item` known by `name` (replacing one of that name); returns it."""
        self._items[name] = item
        return item

    def unregister(self, name: str) -> None:
        if name in self.builtin:
            raise ToolkitError(f"{self.what} {name!r} ships with the toolkit and stays registered")
        self._items.pop(name, None)

    def names(self) -> list[str]:
        return list(self._items)

    def __iter__(self) -> Iterator[T]:
        return iter(list(self._items.values()))

    def lookup(self, name: str | None) -> T | None:
        return self._items.get(name) if name else None

    def get(self, name: str) -> T:
        item = self.lookup(name)
        if item is None:
            close = difflib.get_close_matches(str(name), self.names(), n=1, cutoff=0.6)
            raise ToolkitError(f"unknown {self.what} {name!r}",
                               hint=f"did you mean {close[0]!r}?" if close else
                               f"{self.plural}: {', '.join(self.names())}")
        return item
