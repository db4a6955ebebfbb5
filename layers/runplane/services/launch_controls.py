"""Fail-closed launch controls: whether new sandboxes may start, decided from the table.

Global and per-organization switches, organization suspension, allowed
regions, a cap on concurrent sandboxes, and allowlists of runner and
policy-runtime releases. A run is
checked when it is created (denied: ``503`` and nothing is written), and again
before each sandbox starts against the release identity stored on the run. A
missing controls record means "allowed"; a control that cannot be read denies.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from runplane.domain.clock import Clock
from runplane.domain.errors import LaunchDenied
from runplane.domain.identity import Permission, Principal
from runplane.store import launch_controls as controls_store
from runplane.store import sandbox_slots
from runplane.store.models import LaunchControlsItem, launch_controls_key
from runplane.store.transaction import Transaction

GLOBAL = "GLOBAL"


@dataclass(frozen=True)
class Controls:
    launches_enabled: bool = True
    suspended: bool = False
    allowed_regions: tuple[str, ...] = ()
    runner_releases: tuple[str, ...] = ()
    policy_runtimes: tuple[str, ...] = field(default=())
    max_sandboxes: int | None = None


def _read(scope: str) -> Controls:
    try:
        item = LaunchControlsItem.get(*launch_controls_key(scope), consistent_read=True)
    except LaunchControlsItem.DoesNotExist:
        return Controls()
    return _controls(item)


def _controls(item: LaunchControlsItem | None) -> Controls:
    if item is None:
        return Controls()
    return Controls(
        launches_enabled=bool(item.launches_enabled),
        suspended=bool(item.suspended),
        allowed_regions=tuple(item.allowed_regions or ()),
        runner_releases=tuple(item.runner_releases or ()),
        policy_runtimes=tuple(item.policy_runtimes or ()),
        max_sandboxes=None if item.max_sandboxes is None else int(item.max_sandboxes),
    )


@dataclass(frozen=True)
class Clearance:
    """What a passed check read: each scope's label and sandbox limit."""

    limits: dict[str, tuple[str, int | None]]

    def take_slots(self) -> tuple[list[str], list[Transaction]]:
        """The scopes a new sandbox counts against, and the writes taking a slot in
        each (refused with ``SandboxCapacityExhausted`` when one is full)."""
        writes = [
            sandbox_slots.take(scope, limit, label) for scope, (label, limit) in self.limits.items()
        ]
        return list(self.limits), writes


class LaunchControls:
    def __init__(self, clock: Clock, *, region: str, policy_runtime: str) -> None:
        self._clock = clock
        self._region = region
        self._policy_runtime = policy_runtime

    @staticmethod
    def scopes(organization_id: str) -> list[str]:
        """The scopes whose controls a launch for ``organization_id`` reads."""
        return [GLOBAL, organization_id]

    def check(
        self, organization_id: str, runner_release: str, *, capacity: bool = True
    ) -> Clearance:
        """Raise ``LaunchDenied`` unless a new sandbox may start for this organization.

        ``capacity`` also denies when a scope runs its limit of sandboxes (a new
        run); a sandbox start instead takes a slot with the returned clearance, or
        waits for one.
        """
        scopes = dict(zip(self.scopes(organization_id), ("platform", "organization"), strict=True))
        try:
            # Every scope's controls (and counts) in one consistent request.
            items, running = controls_store.read(list(scopes), counts=capacity)
            read = {scope: _controls(item) for scope, item in items.items()}
        except Exception as unreadable:  # fail closed on anything unexpected
            raise LaunchDenied("launch controls could not be read") from unreadable
        for scope, label in scopes.items():
            controls = read[scope]
            if not controls.launches_enabled:
                raise LaunchDenied(f"launches are switched off for the {label}")
            if controls.suspended:
                raise LaunchDenied(f"the {label} is suspended")
            if controls.allowed_regions and self._region not in controls.allowed_regions:
                raise LaunchDenied(f"region {self._region} is not allowed for the {label}")
            if controls.runner_releases and runner_release not in controls.runner_releases:
                raise LaunchDenied(f"runner release {runner_release} is not on the allowlist")
            if controls.policy_runtimes and self._policy_runtime not in controls.policy_runtimes:
                raise LaunchDenied(f"policy runtime {self._policy_runtime} is not on the allowlist")
            limit = controls.max_sandboxes
            if capacity and limit is not None and running[scope] >= limit:
                raise LaunchDenied(f"the {label} is running its limit of {limit} sandboxes")
        return Clearance(
            {scope: (label, read[scope].max_sandboxes) for scope, label in scopes.items()}
        )

    def set(self, principal: Principal, scope: str, controls: Controls) -> Controls:
        """Set the platform's (``GLOBAL``) or the caller's organization's controls."""
        if scope == GLOBAL:
            principal.require(Permission.PLATFORM_OPERATE)
        else:
            principal.require(Permission.LAUNCH_CONTROL)
            scope = principal.organization_id
        Transaction().put(
            LaunchControlsItem(
                *launch_controls_key(scope),
                scope=scope,
                launches_enabled=controls.launches_enabled,
                suspended=controls.suspended,
                allowed_regions=list(controls.allowed_regions),
                runner_releases=list(controls.runner_releases),
                policy_runtimes=list(controls.policy_runtimes),
                max_sandboxes=controls.max_sandboxes,
                updated_at=self._clock.now(),
                updated_by=principal.ref,
            )
        ).commit()
        return _read(scope)

    def get(self, principal: Principal, scope: str) -> tuple[Controls, int]:
        """The platform's or the caller's organization's controls, and how many
        sandboxes that scope is running now."""
        if scope == GLOBAL:
            principal.require(Permission.PLATFORM_OPERATE)
        else:
            principal.require(Permission.ORGANIZATION_READ)
            scope = principal.organization_id
        return _read(scope), sandbox_slots.active(scope)
