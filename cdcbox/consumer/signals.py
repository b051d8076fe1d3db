"""Control flow a handler may signal; the runner acts on these and does not log errors.

They are not failures: `SkipEvent` records the event as skipped, `RetryLater` retries it
without counting toward dead-lettering as a bug would, `RefuseTransition` records it for
reconciliation and moves on.
"""

from __future__ import annotations


class HandlerSignal(Exception):
    """Base of the handler signals."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class SkipEvent(HandlerSignal):
    """This consumer has nothing to do for this event; mark it skipped."""


class RetryLater(HandlerSignal):
    """A precondition is not met yet (e.g. a missing earlier version); retry with backoff."""


class RefuseTransition(HandlerSignal):
    """The event asks for an illegal state change; record it for reconciliation."""
