"""The worker: claims due jobs (its producer), runs them in its slots (its executor) and

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).
records their outcomes (its completer); start-up, shutdown and the parts they share."""
