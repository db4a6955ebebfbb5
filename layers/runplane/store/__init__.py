"""DynamoDB persistence: one table, pynamodb models, conditional transactions."""
