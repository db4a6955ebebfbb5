"""One embedded stack per test session, served over real HTTP on 127.0.0.1."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from runplane.client import Client, Connection
from runplane.domain.identity import Permission
from runplane.local.stack import Credentials, EmbeddedStack, terraform_rc
from tests.engine import engine_path
from tests.github_fake import FakeGitHub

_names = itertools.count(1)
HEARTBEAT_WINDOW_SECONDS = 20


@dataclass
class Local:
    stack: EmbeddedStack
    credentials: Credentials

    @property
    def url(self) -> str:
        return self.credentials.url

    @property
    def organization(self) -> str:
        return self.credentials.organization

    @property
    def admin_token(self) -> str:
        return self.credentials.token

    @property
    def client(self) -> Client:
        return Client(Connection(self.url, self.admin_token, self.organization))

    def token(self, permissions: Iterable[Permission], name: str = "ci") -> str:
        """A new token of the default organization with exactly ``permissions``."""
        services = self.stack.services
        assert services is not None
        org_id = services.workspaces.organization_id_of(self.organization)
        return services.identity.issue_token(
            org_id, name, frozenset(permissions), created_by="tests"
        ).token

    def other_organization(self, name: str) -> tuple[str, str]:
        """Another organization and an admin token of it."""
        services = self.stack.services
        assert services is not None
        org = services.tenancy.create_organization(name)
        token = services.identity.issue_token(
            org.id, "admin", frozenset(Permission), created_by="tests"
        ).token
        return org.name, token

    def cli_config(self, directory: Path, token: str | None = None) -> Path:
        """A terraform.rc for this stack, authenticating with ``token`` (admin by default)."""
        path = directory / "terraform.rc"
        creds = Credentials(self.url, self.organization, token or self.admin_token)
        path.write_text(terraform_rc(creds), encoding="utf-8")
        return path


def unique(prefix: str) -> str:
    return f"{prefix}-{next(_names)}"


class _SharedStack:
    """The one embedded stack of this test process, with the fake GitHub its App points
    at. The browser tier re-exports these fixtures, and pytest then runs each once per
    tier: every tier gets this stack and this fake, since a second stack would collide
    with the first in the in-process AWS fakes (and a second fake would not be the one
    the stack trusts)."""

    local: Local | None = None
    github: FakeGitHub | None = None
    users = 0


@pytest.fixture(scope="session")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Local]:
    if _SharedStack.local is None:
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        github = FakeGitHub().start()
        # A short heartbeat window (runners beat every 3 s) lets the runner-loss tests
        # see a silent sandbox detected in seconds, as production does in minutes.
        stack = EmbeddedStack(
            tmp_path_factory.mktemp("runplane-local"),
            port=0,
            engine=str(engine_path()),
            runner_heartbeat_seconds=HEARTBEAT_WINDOW_SECONDS,
            github_api_url=github.url,
            # Notification retries back off from 1 s (30 s in a default stack).
            notification_retry_base_seconds=1,
            # The tests' webhook receivers listen on 127.0.0.1.
            notification_allow_loopback=True,
        )
        assert stack.github is not None
        github.trust(stack.github.app_id, stack.github.public_key_pem)
        _SharedStack.github = github
        _SharedStack.local = Local(stack, stack.start())
        github.register_client(
            stack.github.client_id,
            stack.github.client_secret,
            stack.github.slug,
            f"{_SharedStack.local.url}/ui/github/callback",
        )
    _SharedStack.users += 1
    try:
        yield _SharedStack.local
    finally:
        _SharedStack.users -= 1
        if _SharedStack.users == 0:
            _SharedStack.local.stack.stop()
            _SharedStack.local = None
            if _SharedStack.github is not None:
                _SharedStack.github.stop()
                _SharedStack.github = None


@pytest.fixture(scope="session")
def fake_github(embedded: Local) -> FakeGitHub:
    """The fake GitHub on loopback that the stack's GitHub App is pointed at."""
    assert _SharedStack.github is not None
    return _SharedStack.github


@pytest.fixture
def local(embedded: Local) -> Local:
    embedded.stack.activate()
    return embedded
