# Rego v0, as many conftest policies are written: Runplane upgrades it to v1 for the
# evaluator and publishes this text unchanged. The input is the plan JSON, as
# `conftest test plan.json` gives it.
package main

import data.lib.naming

deleted[rc.address] {
	rc := input.resource_changes[_]
	rc.change.actions[_] == "delete"
}

deny[msg] {
	address := deleted[_]
	msg := sprintf("%s would be deleted", [address])
}

warn_names[msg] {
	rc := input.resource_changes[_]
	not naming.snake_case(rc.name)
	msg := sprintf("%q is not snake_case", [rc.name])
}
