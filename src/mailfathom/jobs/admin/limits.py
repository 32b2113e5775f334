"""``mf.limits``: declare flow-control limits, write them for the fleet, and see their use.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

Limits are declared in code — on a kind (``@mf.job(..., max_running=3)``), on a
queue (``mf.limit_queue("mail", max_running=5, rate="100/min")``) or on a kind
registered elsewhere (``mf.limit_kind("mailfathom.deliver", ...)``) — validated at
once, and written to ``mf_flow_limits`` when a worker starts (or by
:meth:`Limits.sync`), so every claimer on every machine and the console obey and
show the same ones. A kind's limits belong to the code that declares them: a
sync removes the limits of a kind this code registers without limits (a limit
deleted from the code is deleted from the fleet). Queue limits stay until
:meth:`Limits.remove`.
"""

from __future__ import annotations

import builtins
from typing import Any

from mailfathom.clock import Clock
from mailfathom.errors import InvalidInput
from mailfathom.jobs.flow.limits import FlowLimit, Scope
from mailfathom.jobs.registry import Registry, check_name
from mailfathom.store.flow.repository import FlowClaims, LimitRow, limit_rows

__all__ = ["Limits"]


class Limits:
    """Flow-control limits of this app (declared) and of the fleet (stored)."""

    def __init__(self, flow: FlowClaims, registry: Registry, clock: Clock) -> None:
        self._flow = flow
        self._registry = registry
        self._clock = clock
        self._declared: dict[str, FlowLimit] = {}

    def declare(self, limit: FlowLimit) -> None:
        """Declare ``limit`` (in place of an earlier one of the same kind or queue)."""
        self._declared[limit.name] = limit

    def declare_values(self, scope: Scope, target: str, **values: Any) -> FlowLimit | None:
        """Validate ``values`` (the keywords of :meth:`FlowLimit.build`) and declare them
        for ``scope``/``target``; with nothing set, the declaration is withdrawn."""
        name = check_name("job kind" if scope == "kind" else "queue", target, longest=200)
        limit = FlowLimit.build(scope, name, **values)
        if limit is None:
            self._declared.pop(f"{scope}:{name}", None)
        else:
            self.declare(limit)
        return limit

    def declared(self) -> builtins.list[FlowLimit]:
        """The limits this app declares, by name."""
        return [self._declared[name] for name in sorted(self._declared)]

    def get(self, scope: Scope, target: str) -> FlowLimit | None:
        """The declared limit of one kind or queue, or None."""
        return self._declared.get(f"{scope}:{target}")

    def sync(self) -> None:
        """Write the declared limits for the whole fleet (workers do it when they start);
        the limits of kinds this app registers without any are removed."""
        rows: list[LimitRow] = []
        for limit in self.declared():
            rows.extend(limit_rows(limit))
        owned = [
            ("kind", kind)
            for kind in self._registry.names()
            if f"kind:{kind}" not in self._declared
        ]
        owned += [("kind", limit.target) for limit in self.declared() if limit.scope == "kind"]
        owned += [("queue", limit.target) for limit in self.declared() if limit.scope == "queue"]
        self._flow.write(rows, now=self._clock.now(), owned=owned)

    def remove(self, scope: Scope, target: str) -> bool:
        """Delete the stored limits of one kind or queue (and this app's declaration);
        whether any were stored."""
        if scope not in ("kind", "queue"):
            raise InvalidInput(f"scope must be 'kind' or 'queue', not {scope!r}")
        name = check_name("job kind" if scope == "kind" else "queue", target, longest=200)
        self._declared.pop(f"{scope}:{name}", None)
        return self._flow.remove(scope, name)

    def stored(self) -> builtins.list[LimitRow]:
        """Every stored limit row, by name (what the fleet obeys)."""
        return self._flow.definitions()

    def usage(self) -> builtins.list[dict[str, Any]]:
        """Each stored limit: its values, what it uses now, and the due jobs waiting on it.

        One dict per kind or queue limit (JSON-ready): ``name``, ``scope``, ``target``,
        ``max_running``, ``rate`` (``{"count", "window_seconds"}`` or None),
        ``max_running_per_key``, ``rate_per_key``, ``running``, ``starts_in_window``,
        ``blocked`` (nothing more may start now), ``keys`` (per key in use or with values
        of its own: ``key``, ``max_running``, ``rate``, ``running``, ``starts_in_window``,
        ``blocked``) and ``waiting`` (ids of due jobs it holds back, at most 100).
        """
        return [dict(row) for row in self._flow.usage(self._clock.now())]
