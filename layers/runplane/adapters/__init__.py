"""Edges to AWS and the operating system: clocks, IDs, S3, KMS, Step Functions, ECS."""
