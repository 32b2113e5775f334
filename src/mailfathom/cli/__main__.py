"""``python -m mailfathom.cli``: the same as the ``mailfathom`` command."""

from mailfathom.cli import main

main()
