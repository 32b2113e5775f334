"""Crash-safe outgoing email: record durably, submit over SMTP in stages, never guess.

Internal; the public face is ``mf.outbox`` and the names exported by ``mailfathom``.
``stage`` (the state machine), ``message`` (freezing and validation), ``dkim``,
``smtp_url``, ``smtp`` (the staged submission), ``pool`` (reused connections),
``deliver`` (the ``mailfathom.deliver`` job), ``outbox`` (``mf.outbox``),
``resolution`` (operator decisions on unknown outcomes). See docs/outbox.md.
"""
