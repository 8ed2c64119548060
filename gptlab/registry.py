"""The generic name -> factory registry behind every ablation axis.

Each axis (norm placement, activation, position encoding, weight tying) owns one `Registry`
filled by a decorator in its own module. Registries hold classes or factories, never shared
instances, so two models never share state through a registry entry.
"""
from __future__ import annotations

import fnmatch
import inspect
from typing import Callable, Generic, Iterator, TypeVar

from gptlab.errors import GptlabError, closest

T = TypeVar("T")


class Registry(Generic[T]):
    """A named collection of factories, filled with `@registry.register("name")`."""

    def __init__(self, axis: str, description: str = "") -> None:
        self.axis = axis
        self.description = description
        self._entries: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator adding a factory under `name`; registering an existing name is an error."""
        if not isinstance(name, str) or not name:
            raise GptlabError(f"{self.axis}: entry names must be non-empty strings, got {name!r}")

        def add(factory: T) -> T:
            if name in self._entries:
                raise GptlabError(
                    f"{self.axis}: '{name}' is already registered (by {_origin(self._entries[name])})"
                )
            self._entries[name] = factory
            return factory

        return add

    def get(self, name: str) -> T:
        """Return the factory registered under `name`, or raise listing the valid names."""
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            raise GptlabError(
                f"unknown {self.axis} '{name}'{closest(name, self._entries)}; "
                f"valid: {', '.join(self.names())}"
            ) from None

    def names(self, pattern: str = "*") -> list[str]:
        """Registered names matching a shell-style wildcard, in registration order."""
        return [n for n in self._entries if fnmatch.fnmatchcase(n, pattern)]

    def summary(self, name: str) -> str:
        """The entry's `description` (an entry that is data, such as a corpus), else its docstring's first line."""
        entry = self._entries[name]
        if isinstance(getattr(entry, "description", None), str) and entry.description:
            return entry.description
        doc = inspect.getdoc(entry) or ""
        return doc.splitlines()[0] if doc else ""

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.axis!r}, {self.names()})"


def _origin(obj: object) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"
