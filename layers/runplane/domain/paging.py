"""Pages of a listing, as TFE's JSON:API ``meta.pagination`` describes them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from runplane.domain.errors import InvalidInput

MAX_PAGE_SIZE = 100
T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    number: int
    size: int
    total: int

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.size))

    @classmethod
    def of(cls, everything: list[T], number: int, size: int) -> Page[T]:
        """Page ``number`` (from 1) of ``size`` items (1 to 100)."""
        if number < 1 or not 1 <= size <= MAX_PAGE_SIZE:
            raise InvalidInput(f"page[number] >= 1 and 1 <= page[size] <= {MAX_PAGE_SIZE}")
        start = (number - 1) * size
        return cls(everything[start : start + size], number, size, len(everything))
