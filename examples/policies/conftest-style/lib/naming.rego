package lib.naming

snake_case(name) {
	regex.match("^[a-z][a-z0-9_]*$", name)
}
