"""The embedded stack: AWS served by moto on this machine, the same code paths as AWS."""
