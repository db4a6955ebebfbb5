"""Pure domain rules: statuses, the transition table, errors, identities.

Nothing here performs I/O or imports an AWS SDK.
"""
