# Everything a fresh clone needs is installed here: `make test` and `make demo`
# work on a machine with only python3 (3.11+) and make.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The browser tests drive Debian's chromium: Playwright never downloads a browser.
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD := 1

.PHONY: test test-fast test-service test-e2e demo lint docs clean engine synth deploy browser-deps sandbox-deps

$(STAMP): pyproject.toml
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is required"'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# Three workers: the end-to-end tier mostly waits on engines and workflows, so it
# overlaps well even on two cores (the CDK tests stay on one worker, see
# tests/conftest.py). The slowest tests are listed at the end, to keep the
# suite's time in view.
test: $(STAMP) engine browser-deps sandbox-deps
	$(BIN)/python -m pytest -q -n 3 --dist loadgroup --durations=25

# The inner loop: every tier but the end-to-end tests and the CDK synth (about a minute).
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not e2e and not infra and not browser and not iam"

# The service tier alone: services over in-memory repositories and the in-memory unit of
# work, no moto, with the 10,000 seeded interleavings (under 20 s on two idle cores; with
# -n and no --dist the workers steal each other's queued tests, see tests/conftest.py).
test-service: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 tests/service

# The end-to-end tier alone: the embedded stack over real HTTP with the real engine.
test-e2e: $(STAMP) engine sandbox-deps
	$(BIN)/python -m pytest -q -n 3 -m e2e

# The pinned engine binary the tests run (see docs/engine.md).
engine: $(STAMP)
	$(BIN)/python -m tools.fetch_engine --dest $(VENV)/engine

# Debian's chromium for the browser tests (tests/browser), installed once (as root);
# nothing is done when it is already there.
browser-deps:
	@test -x /usr/bin/chromium || { apt-get update -qq >/dev/null && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# axe-core, the accessibility checker the browser tests inject into every page, from
# the npm registry at a pinned version, checked against its published SHA-512.
AXE_VERSION := 4.10.3
AXE_SHA512 := Xm7bpRXnDSX2YE2YFfBk2FnF0ep6tmG7xPh8iHee8MIcrgq762Nkce856dYtJYLkuIoYZvGfTs/PbZhideTcEg==
AXE := $(VENV)/axe/axe-$(AXE_VERSION).min.js
$(AXE): $(STAMP)
	rm -rf $(VENV)/axe.tmp && mkdir -p $(VENV)/axe.tmp $(VENV)/axe
	cd $(VENV)/axe.tmp && npm pack --silent axe-core@$(AXE_VERSION) >/dev/null
	test "$$(openssl dgst -sha512 -binary $(VENV)/axe.tmp/axe-core-$(AXE_VERSION).tgz | base64 -w0)" = "$(AXE_SHA512)"
	tar -xzf $(VENV)/axe.tmp/axe-core-$(AXE_VERSION).tgz -C $(VENV)/axe.tmp package/axe.min.js
	mv $(VENV)/axe.tmp/package/axe.min.js $@ && touch $@ && rm -rf $(VENV)/axe.tmp
browser-deps: $(AXE)

# bubblewrap, with which the embedded stack run as root gives each sandbox's engine its
# own user, mount, PID and network namespaces (docs/security.md). Installed once, as
# root; without root the stack runs unisolated and serves one organization.
sandbox-deps:
	@command -v bwrap >/dev/null || [ "$$(id -u)" != 0 ] || { apt-get update -qq >/dev/null && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; }

# The whole lifecycle on the embedded stack: plan -> policy -> approve -> apply,
# then a plan with no changes; prints the run reviews.
demo: $(STAMP) engine sandbox-deps
	$(BIN)/python -m runplane.local.demo

lint: $(STAMP)
	$(BIN)/ruff check layers functions infra tests benchmarks tools examples
	$(BIN)/ruff format --check layers functions infra tests benchmarks tools examples
	$(BIN)/mypy layers/runplane functions tools infra tests
	# The layering of docs/architecture.md (contracts in pyproject.toml).
	$(BIN)/lint-imports

# The CDK app's cloud assembly in cdk.out/, offline: no AWS account, no Docker, no
# cdk CLI. The Lambda layer is built (pip) and the sandbox image (Docker) only by
# `make deploy`. AWS Solutions checks run as part of it; a finding fails it.
synth: $(STAMP)
	JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 $(BIN)/python -m infra.app --no-bundling

# Deploy the stack with the AWS credentials and region of this shell (docs/deploy.md):
# needs Node.js for the cdk CLI, Docker for the sandbox image, and `cdk bootstrap`
# run once per account and region. Options: CDK_ARGS="-c domainName=... -c ...".
CDK ?= npx --yes aws-cdk@2
deploy: $(STAMP)
	$(CDK) deploy --app "$(BIN)/python -m infra.app" $(CDK_ARGS)

# Regenerate documents derived from code (tests fail while they are stale).
docs: $(STAMP)
	$(BIN)/python -m runplane.docs

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
