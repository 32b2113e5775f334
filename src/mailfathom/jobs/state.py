"""The job state machine: states, failure classes, attempt outcomes and legal moves.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

States are stored by name (``Pending``, ``Claimed`` …) so an ad-hoc query reads
well and no reordering ever changes the meaning of old rows.
"""

from __future__ import annotations

from enum import StrEnum

from mailfathom.errors import IllegalTransition, InvalidInput

__all__ = ["AttemptOutcome", "FailureClass", "JobState", "check_transition"]


class JobState(StrEnum):
    """Where a job stands. See docs/state-machines.md for the diagram."""

    PENDING = "Pending"
    CLAIMED = "Claimed"
    SUCCEEDED = "Succeeded"
    DEAD_LETTERED = "DeadLettered"
    DROPPED = "Dropped"

    @classmethod
    def parse(cls, name: str | JobState) -> JobState:
        """The state called ``name`` (its stored name or its Python name), or a clear error."""
        if isinstance(name, JobState):
            return name
        for state in cls:
            if name in (state.value, state.name, state.name.lower()):
                return state
        names = ", ".join(s.value for s in cls)
        raise InvalidInput(f"unknown job state {name!r}: use one of {names}")


class FailureClass(StrEnum):
    """Whether a failure may pass with time (Transient) or never will (Permanent)."""

    PERMANENT = "Permanent"
    TRANSIENT = "Transient"


class AttemptOutcome(StrEnum):
    """How one attempt at running a job ended."""

    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    EXECUTION_TIMEOUT = "ExecutionTimeout"
    SHUTDOWN_TIMEOUT = "ShutdownTimeout"
    LEASE_EXPIRED = "LeaseExpired"
    #: The job's kind has no handler on the worker that holds it. A worker claims only
    #: its own kinds, so only a job leased some other way (``mailfathom.testing.claim``)
    #: can end so.
    UNKNOWN_KIND = "UnknownKind"
    #: An operator aborted the attempt (the job is dead-lettered as permanent).
    ABORTED = "Aborted"
    #: The handler raised ``Snooze``: back to Pending later, no attempt spent.
    SNOOZED = "Snoozed"


# Every legal move: target -> the states it may come from.
LEGAL_SOURCES: dict[JobState, tuple[JobState, ...]] = {
    JobState.PENDING: (JobState.CLAIMED, JobState.DEAD_LETTERED),
    JobState.CLAIMED: (JobState.PENDING, JobState.CLAIMED),
    JobState.SUCCEEDED: (JobState.CLAIMED,),
    JobState.DEAD_LETTERED: (JobState.CLAIMED, JobState.PENDING),  # Pending: an abort
    JobState.DROPPED: (JobState.DEAD_LETTERED,),
}


def check_transition(current: JobState, target: JobState) -> None:
    """Raise :class:`IllegalTransition` unless ``current`` may move to ``target``."""
    sources = LEGAL_SOURCES[target]
    if current not in sources:
        raise IllegalTransition(
            current=current.value, target=target.value, allowed_from=tuple(s.value for s in sources)
        )
