"""The ``runplane/test`` provider: a tiny, offline Terraform provider used as a test double."""
