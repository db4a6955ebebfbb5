package main

import data.lib.naming

test_a_deletion_is_found {
	deleted == {"aws_s3_bucket.logs"} with input as {"resource_changes": [{"address": "aws_s3_bucket.logs", "name": "logs", "change": {"actions": ["delete"]}}]}
}

test_an_update_deletes_nothing {
	count(deleted) == 0 with input as {"resource_changes": [{"address": "aws_s3_bucket.logs", "name": "logs", "change": {"actions": ["update"]}}]}
}

test_snake_case_names {
	naming.snake_case("app_logs")
	not naming.snake_case("appLogs")
}
