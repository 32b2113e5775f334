"""A provider's per-recipient results in a 2xx answer, mapped onto SMTP's RCPT replies.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

Providers that take one request for several recipients may accept some and not
others (an address they know bounces, a recipient they throttle), and say so in the
answer. The shape read here is::

    {"id": "msg-1",
     "recipients": [{"address": "ann@example.com", "status": "accepted"},
                    {"address": "bob@example.com", "status": "rejected", "reason": "…"},
                    {"address": "cid@example.com", "status": "deferred", "reason": "…"}]}

Each recipient then gets the reply RCPT TO would have given it, so the record says
exactly what an SMTP server's answers would have said: ``accepted`` → 250 (sent to
it), ``rejected`` → 550 with the provider's reason (refused for it, never offered
again), ``deferred`` → 450 (owed again: split off into a new Recorded record when
others were accepted). Addresses match without regard to case. A recipient the list
leaves out, or gives a status other than these three, counts as accepted: the 2xx
accepted the message for every recipient it did not single out. No recipient
accepted: Refused when every one was rejected, else retried (the rejected ones are not
offered again), as after RCPT TO.
"""

from __future__ import annotations

import json
from typing import Any

from mailfathom.delivery.smtp import Outcome, Phase, Reply
from mailfathom.delivery.transport import Submission
from mailfathom.store.outbox.rows import RecipientReply

__all__ = ["ACCEPTED", "DEFERRED", "REJECTED", "per_recipient"]

#: The reply each provider status stands for (as RCPT TO's).
ACCEPTED, REJECTED, DEFERRED = 250, 550, 450
_CODES = {"accepted": ACCEPTED, "rejected": REJECTED, "deferred": DEFERRED}


def per_recipient(
    name: str, submission: Submission, status: int, text: str, answer: bytes
) -> Outcome:
    """The outcome of a 2xx ``answer`` from provider ``name``: ``text`` says it accepted
    the message; the answer's ``recipients`` list, if any, decides per recipient."""
    listed = _listed(answer)
    now = submission.clock.now()
    replies: list[RecipientReply] = []
    for position, address in submission.recipients:
        said = listed.get(address.lower())
        code = ACCEPTED if said is None else said[0]
        if code == ACCEPTED:
            replies.append(RecipientReply(position, code, None, text, now))
            continue
        verb = "rejected" if code == REJECTED else "deferred"
        reason = said[1] if said is not None and said[1] else "no reason given"
        replies.append(RecipientReply(position, code, None, f"{verb} by {name}: {reason}", now))
    reply = Reply(status, None, text)
    deferred = [r.position for r in replies if r.code == DEFERRED]
    if any(r.code == ACCEPTED for r in replies):
        return Outcome("sent", text, Phase.REPLY, reply, replies, deferred=deferred)
    described = "; ".join(r.text for r in replies[:5])
    if deferred:
        reason = f"{name} accepted no recipient: {described}"
        return Outcome("retry", reason, Phase.REPLY, reply, replies)
    reason = f"every recipient was refused: {described}"
    return Outcome("refused", reason, Phase.REPLY, reply, replies)


def _listed(answer: bytes) -> dict[str, tuple[int, str | None]]:
    """Lower-cased address → (reply code, reason) for each recipient the answer singles
    out as rejected or deferred (an accepted one, or anything unreadable, is left out)."""
    try:
        parsed: Any = json.loads(answer)
    except ValueError:
        return {}
    entries = parsed.get("recipients") if isinstance(parsed, dict) else None
    if not isinstance(entries, list):
        return {}
    found: dict[str, tuple[int, str | None]] = {}
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        address, state = entry.get("address"), entry.get("status")
        if not isinstance(address, str) or not isinstance(state, str):
            continue
        code = _CODES.get(state.strip().lower())
        if code is None or code == ACCEPTED:
            continue
        reason = entry.get("reason")
        found[address.strip().lower()] = (code, None if reason is None else str(reason)[:500])
    return found
