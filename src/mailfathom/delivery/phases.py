"""The points of a staged submission, and the hook told when each one is reached.

Internal. A seam for tests that is a no-op in production: the
:class:`~mailfathom.delivery.deliver.Deliverer` holds an ``on_phase`` hook (by default
:func:`no_phase_hook`) and :meth:`~mailfathom.delivery.smtp.SmtpSession.transact`
calls it with each point below, in this order, from the delivering thread. Nothing in
mailfathom reads the environment for it: a test installs its own hook, e.g. a crash
test's worker process one that SIGKILLs itself at one point, or a test that raises at
``after_354`` to stand for the TransmissionBegun save failing.

- ``before_rcpt``: MAIL FROM was accepted; no RCPT TO sent yet.
- ``after_354``: DATA was answered 354 and TransmissionBegun is about to be saved. The
  hook runs inside the guard around that save: whatever it raises is handled exactly
  as a failed save (the connection is dropped, the body is never sent, the error
  propagates).
- ``after_begun``: TransmissionBegun is committed; no byte of the body has been sent.
- ``after_body``: the body and the end-of-data line were sent; no reply read yet.
- ``after_reply``: the reply to the end of data was read; nothing was written about it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, get_args

__all__ = ["PHASE_POINTS", "PhaseHook", "PhasePoint", "no_phase_hook"]

#: A point of the submission a hook is told about.
PhasePoint = Literal["before_rcpt", "after_354", "after_begun", "after_body", "after_reply"]
#: Every point, in the order a submission that reaches the end passes them.
PHASE_POINTS: tuple[PhasePoint, ...] = get_args(PhasePoint)
#: Called with each point as the submission reaches it; may raise (see the module docstring).
PhaseHook = Callable[[PhasePoint], None]


def no_phase_hook(point: PhasePoint) -> None:
    """The production hook: nothing happens at any point."""
