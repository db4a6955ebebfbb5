"""How long a delivery refused an in-flight slot waits before it is looked at again,
and how the slot lease relates to one POST's deadline (domain/notifications.py)."""

from __future__ import annotations

from runplane.adapters.event_queue import MAX_DELAY_SECONDS, PER_DESTINATION, PER_ORGANIZATION
from runplane.domain import notifications as rules
from runplane.settings import Settings


def test_a_deferred_delivery_waits_longer_each_time_up_to_one_deadline() -> None:
    # The upper end of each wait doubles from 2 s and stops at one POST's deadline
    highest = [rules.deferral_delay(n, 1.0) for n in range(8)]
    assert highest == [2, 4, 8, 15, 15, 15, 15, 15]
    # And the lower end is half of it: never 0 (never at once: no hot loop)
    lowest = [rules.deferral_delay(n, 0.0) for n in range(8)]
    assert lowest == [1, 2, 4, 8, 8, 8, 8, 8]
    # And a refusal count from a message (however large, or odd) stays in range
    assert rules.deferral_delay(10_000, 0.5) <= rules.DEFERRAL_CAP_SECONDS
    assert rules.deferral_delay(-3, 2.0) == 2
    assert rules.DEFERRAL_CAP_SECONDS <= MAX_DELAY_SECONDS


def test_jitter_spreads_deliveries_refused_together() -> None:
    waits = {rules.deferral_delay(3, j / 10) for j in range(10)}
    assert len(waits) > 3
    assert min(waits) >= 8
    assert max(waits) <= 15


def test_a_slot_outlasts_a_live_delivery_and_frees_itself_well_before_a_claim_is_retaken() -> None:
    # A holder that is still sending keeps its slot for a whole POST and more
    assert rules.SLOT_LEASE_SECONDS >= 2 * rules.DELIVERY_DEADLINE_SECONDS
    # And a stopped holder's slot is free before its claimed attempt may be taken over
    assert rules.SLOT_LEASE_SECONDS < rules.CLAIM_LEASE_SECONDS


def test_the_settings_default_to_the_embedded_queues_shares() -> None:
    settings = Settings()
    assert settings.notification_organization_slots == PER_ORGANIZATION == 2
    assert settings.notification_destination_slots == PER_DESTINATION == 1
