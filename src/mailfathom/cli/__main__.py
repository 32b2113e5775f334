"""``python -m mailfathom.cli``: the same as the ``mailfathom`` command.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).
"""

from mailfathom.cli import main

main()
