"""Fail-closed launch controls: whether new sandboxes may start, decided from the table.

Global and per-organization switches, organization suspension, allowed
regions, a cap on concurrent sandboxes, and allowlists of runner and
policy-runtime releases. A run is
checked when it is created (denied: ``503`` and nothing is written), and again
before each sandbox starts against the release identity stored on the run. A
missing controls record means "allowed"; a control that cannot be read denies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runplane.domain.clock import Clock
from runplane.domain.errors import LaunchDenied
from runplane.domain.identity import Permission, Principal
from runplane.domain.launch_controls import GLOBAL as GLOBAL
from runplane.domain.launch_controls import Clearance as Clearance
from runplane.domain.launch_controls import Controls as Controls

if TYPE_CHECKING:
    from runplane.services.repositories.operations import LaunchControlStore


class LaunchControls:
    def __init__(
        self, clock: Clock, store: LaunchControlStore, *, region: str, policy_runtime: str
    ) -> None:
        self._clock = clock
        self._store = store
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
            read, running = self._store.read(list(scopes), counts=capacity)
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
        self._store.put(scope, controls, by=principal.ref, at=self._clock.now())
        return self._store.get(scope)

    def get(self, principal: Principal, scope: str) -> tuple[Controls, int]:
        """The platform's or the caller's organization's controls, and how many
        sandboxes that scope is running now."""
        if scope == GLOBAL:
            principal.require(Permission.PLATFORM_OPERATE)
        else:
            principal.require(Permission.ORGANIZATION_READ)
            scope = principal.organization_id
        return self._store.get(scope), self._store.running(scope)
