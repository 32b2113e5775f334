"""The worker: claims due jobs (its producer), runs them in its slots (its executor) and
records their outcomes (its completer); start-up, shutdown and the parts they share."""
