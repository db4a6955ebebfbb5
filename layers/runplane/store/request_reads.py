"""The request scope: which identity map (``store.prefetch.IdentityMap``) is the
request's in progress.

- **Who opens it.** The handler, through the composition root
  (``wiring.identity_map``, over ``RequestScope.opened``), with what the request's
  authentication read ahead; a read ahead inside the request (``serving``: a workflow
  step's, a creation's, the engine's first reads) adds to it for a block, opening one
  for the block where no request did.
- **Who owns it.** The request's unit of work: ``DynamoUnitOfWork`` is built with the
  map (``wiring.Services.units`` passes ``reads()``), every read through its
  repositories is served from that map alone, and its commit forgets it.
- **Who reads it.** The store's reads, only the map they are handed (``reads=``).
  Repositories outside a unit of work (the workspace directory, the run records, the
  artifact records, ...) are given this scope when built and take ``reads()`` at each
  call, passing it down.
- **Every write forgets it.** ``Transaction.commit`` forgets the request's map through
  ``forget`` before it sends anything, so no write path can leave an item read before
  the write to a read after it.

Services and repositories are built once per process, while the embedded stack
serves concurrent requests on threads of that one process: so the request's map is
context-local (a ``ContextVar``, this module's alone), never an attribute of a shared
object.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

from runplane.domain.read_ahead import NOTHING_READ, ReadAhead
from runplane.store.prefetch import IdentityMap, Key, RawItem, raw

_request: ContextVar[IdentityMap | None] = ContextVar("identity_map", default=None)


class RequestScope:
    """The identity map of the request in progress in this context."""

    def reads(self) -> IdentityMap:
        """The request's identity map; outside a request, a new empty one (which serves
        nothing, so every read asks DynamoDB)."""
        current = _request.get()
        return IdentityMap() if current is None else current

    @contextmanager
    def opened(self, ahead: ReadAhead = NOTHING_READ) -> Iterator[IdentityMap]:
        """The identity map of the request the block serves, holding what ``ahead`` read.

        Opened inside another request's (a request resolved within one), it is that
        map, serving ``ahead`` too for the block, so a write in either forgets both."""
        found, absent = raw(ahead)
        current = _request.get()
        if current is not None:
            with current.serving(found, absent):
                yield current
            return
        reads = IdentityMap(found, absent)
        token = _request.set(reads)
        try:
            yield reads
        finally:
            _request.reset(token)

    @contextmanager
    def serving(
        self, items: Mapping[Key, RawItem], absent: Iterable[Key] = ()
    ) -> Iterator[IdentityMap]:
        """Serve ``items``, and the absence of ``absent``, to the reads made inside the
        block, in the request's identity map (one opened for the block where none is),
        which the block is given. An absence is served to a batch read and to the single
        reads that ask with ``take_known``; a single read that asks with ``take`` reads
        it."""
        current = _request.get()
        if current is None:
            with self.opened() as current, current.serving(items, absent):
                yield current
            return
        with current.serving(items, absent):
            yield current

    @contextmanager
    def serving_ahead(self, ahead: ReadAhead) -> Iterator[IdentityMap]:
        """``serving`` what ``ahead`` read."""
        found, absent = raw(ahead)
        with self.serving(found, absent) as reads:
            yield reads

    def forget(self) -> None:
        """Drop every item the request read ahead: it is writing."""
        current = _request.get()
        if current is not None:
            current.forget()


# The process's scope: the one every repository is given unless a test gives another.
REQUEST = RequestScope()
