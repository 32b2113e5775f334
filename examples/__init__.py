"""Example applications for mailfathom (``make run`` works ``examples.app:mf``)."""
