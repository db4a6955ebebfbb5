"""Use cases: one module per capability, composed from domain rules and store writes."""
