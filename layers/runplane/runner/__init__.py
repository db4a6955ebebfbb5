"""The sandbox program (runner): drives the pinned engine to plan and apply a run."""
