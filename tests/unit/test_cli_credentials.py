"""The CLI's saved sign-in is private from its creation and refused once it is not."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from runplane.cli_credentials import check_private, refresher, write_private
from runplane.cli_input import InputError
from runplane.settings import Settings

SIGNED_IN = {
    "url": "http://127.0.0.1:8700",
    "organization": "default",
    "token": "id-token",
    "refresh_token": "refresh",
    "token_endpoint": "http://127.0.0.1:9/oauth2/token",
    "client_id": "cli",
}


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    previous = os.umask(0o000)
    try:
        yield
    finally:
        os.umask(previous)


def test_a_sign_in_is_written_mode_0600_whatever_the_umask(
    tmp_path: Path, permissive_umask: None
) -> None:
    path = tmp_path / "new" / "credentials.json"
    write_private(path, SIGNED_IN)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    # And rewriting a file keeps it private (it is replaced, never widened)
    write_private(path, {**SIGNED_IN, "token": "renewed"})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_sign_in_others_can_read_is_refused_and_an_api_token_file_needs_no_refresh(
    tmp_path: Path,
) -> None:
    path = tmp_path / "credentials.json"
    write_private(path, SIGNED_IN)
    assert refresher(path, SIGNED_IN) is not None
    path.chmod(0o640)
    with pytest.raises(InputError, match="others may read it"):
        check_private(path)
    with pytest.raises(InputError):
        refresher(path, SIGNED_IN)
    assert refresher(path, {"url": "u", "token": "rpt_x"}) is None


@pytest.mark.parametrize(
    "values",
    [
        {"sso_providers": "not json"},
        {"sso_providers": '{"Okta": {"organization": "o", "roles": {"g": "root"}}}'},
        {"cli_sign_in_client_id": "cli"},
        {
            "cli_sign_in_domain": "http://auth.example.com",
            "cli_sign_in_client_id": "cli",
            "cli_sign_in_ports": "47800",
        },
        {
            "cli_sign_in_domain": "https://auth.example.com",
            "cli_sign_in_client_id": "cli",
            "cli_sign_in_ports": "80",
        },
    ],
)
def test_sso_settings_that_cannot_work_are_refused(values: dict[str, str]) -> None:
    with pytest.raises(ValueError, match=r"sso_providers|cli_sign_in"):
        Settings.model_validate(values)
