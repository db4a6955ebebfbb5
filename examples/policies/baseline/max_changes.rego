# Large plans are hard to review: warn above a number of changed resources.
package runplane.max_changes

import rego.v1

limit := 50

deny := [msg |
	summary := input.summary

	# A replacement counts once, although it both adds and destroys.
	n := ((summary.add + summary.change) + summary.destroy) - summary.replace
	n > limit
	msg := sprintf("this plan changes %d resources, more than %d: consider smaller plans", [n, limit])
]
