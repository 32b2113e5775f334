"""The benchmark drivers: one small program per system, run as a subprocess.

Each driver runs in the virtual environment of the system it drives (the project's
own for mailfathom and the plain-SQL ceilings, ``bench/.peers/venv`` for the peers)
and talks to the harness through :mod:`bench.drivers.protocol`. They import only the
standard library and the system they drive, so a peer never shares a process or an
environment with mailfathom.
"""
