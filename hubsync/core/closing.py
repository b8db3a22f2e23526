"""One way for an object that holds a resource to be used in a ``with`` block."""

from __future__ import annotations

from types import TracebackType
from typing import Self


class ClosesOnExit:
    """Mixin: ``with thing:`` yields ``thing`` and calls ``thing.close()`` however the block ends.

    A subclass implements ``close`` (idempotent, so closing twice is harmless);
    one that must start something on entry overrides ``__enter__`` only.
    """

    def close(self) -> None:
        """Release what the object holds."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
