# Reads the configuration, not the planned values: provisioners are there only.
package terraform.no_local_exec

import input.tfplan as tfplan

deny[reason] {
	resource := tfplan.configuration.root_module.resources[_]
	provisioner := resource.provisioners[_]
	provisioner.type == "local-exec"
	reason := sprintf("%s runs a local-exec provisioner on the runner", [resource.address])
}
