"""Integrations with the frameworks applications already run, one module per framework.

``mailfathom.contrib.django``, ``mailfathom.contrib.starlette`` (FastAPI too) and
``mailfathom.contrib.flask``; each imports its framework, so install the matching
extra (``pip install 'mailfathom[flask]'``).
"""
