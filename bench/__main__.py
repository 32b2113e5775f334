"""``python -m bench``: see :mod:`bench.cli` and docs/benchmarks.md."""

from bench.cli import main

raise SystemExit(main())
