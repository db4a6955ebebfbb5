"""What `runplane run create --dir` uploads: never a symbolic link, nor what it points at."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from runplane import cli
from runplane.client import ConfigurationError, configuration_files, pack

MAIN = 'output "a" {\n  value = 1\n}\n'


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    """A configuration directory with a child module, and a secret beside it outside."""
    config = tmp_path / "config"
    (config / "modules" / "net").mkdir(parents=True)
    (config / "main.tf").write_text(MAIN)
    (config / "modules" / "net" / "main.tf").write_text("# net\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.tf").write_text("# not for upload\n")
    return config


def members(archive: bytes) -> dict[str, tuple[bytes, int]]:
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(archive))) as tar:
        return {
            m.name: (tar.extractfile(m).read(), m.mode)  # type: ignore[union-attr]
            for m in tar.getmembers()
        }


LINKS = {
    "file-outside": ("secret.tf", "../outside/secret.tf"),
    "directory-outside": ("modules/shared", "../../outside"),
    "file-inside": ("copy.tf", "main.tf"),
    "directory-inside": ("modules/alias", "net"),
    "dangling": ("gone.tf", "nowhere.tf"),
    "nested": ("modules/net/x.tf", "../../../outside/secret.tf"),
}


@pytest.mark.parametrize("kind", sorted(LINKS))
def test_any_symbolic_link_inside_the_directory_is_refused(directory: Path, kind: str) -> None:
    # Given a configuration directory holding a symbolic link
    name, target = LINKS[kind]
    (directory / name).symlink_to(target)

    # When its files are listed or it is packed, then it is refused naming the link
    expected = (
        f"{directory}: {name} is a symbolic link; links are not uploaded "
        "(copy the files in instead)"
    )
    for read in (configuration_files, pack):
        with pytest.raises(ConfigurationError) as refused:
            read(directory)
        assert str(refused.value) == expected


def test_links_in_excluded_entries_are_not_looked_at(directory: Path, tmp_path: Path) -> None:
    # Given links inside the engine's .terraform directory, and a .git that is a link
    providers = directory / ".terraform" / "providers"
    providers.mkdir(parents=True)
    (providers / "cache").symlink_to(tmp_path / "outside")
    (directory / ".git").symlink_to(tmp_path / "outside")

    # When it is packed, then neither is refused nor uploaded
    assert set(members(pack(directory))) == {"main.tf", "modules/net/main.tf"}


def test_the_directory_itself_may_be_reached_through_a_link(
    directory: Path, tmp_path: Path
) -> None:
    # Given a link to the configuration directory
    alias = tmp_path / "alias"
    alias.symlink_to(directory)

    # When it is packed through the link, then it is the same upload as the directory's
    assert [p.relative_to(alias) for p in configuration_files(alias)] == [
        Path("main.tf"),
        Path("modules/net/main.tf"),
    ]
    assert pack(alias) == pack(directory)


def test_a_directory_without_links_packs_its_files_sorted_and_not_executable(
    directory: Path,
) -> None:
    # Given files beside directories whose names sort either way, and an executable
    (directory / "modules-b.tf").write_text("# b\n")
    (directory / "run.sh").write_text("#!/bin/sh\n")
    (directory / "run.sh").chmod(0o755)
    (directory / "terraform.tfstate").write_text("{}")

    # When it is packed twice
    first, second = pack(directory), pack(directory)

    # Then the bytes are the same, in path order, without local state, all mode 0644
    assert first == second
    packed = members(first)
    assert list(packed) == ["main.tf", "modules/net/main.tf", "modules-b.tf", "run.sh"]
    assert packed["main.tf"] == (MAIN.encode(), 0o644)
    assert {mode for _, mode in packed.values()} == {0o644}


def test_run_create_refuses_a_link_before_any_request(
    directory: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given a configuration linking to a file outside it, and no request allowed out
    (directory / "secret.tf").symlink_to(tmp_path / "outside" / "secret.tf")
    requests: list[Any] = []

    def urlopen(request: Any, *args: Any, **kwargs: Any) -> Any:
        requests.append(request)
        raise AssertionError("no request may be made")

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)

    # When `runplane run create --dir` is run against a control plane URL
    code = cli.main(
        [
            "run",
            "create",
            "--workspace",
            "ws",
            "--dir",
            str(directory),
            "--url",
            "http://127.0.0.1:9",
            "--token",
            "t",
            "--credentials",
            os.devnull,
        ]
    )

    # Then it fails locally, naming the link, and nothing was sent
    assert code == cli.EXIT_LOCAL_ERROR
    assert capsys.readouterr().err == (
        f"error: {directory}: secret.tf is a symbolic link; links are not uploaded "
        "(copy the files in instead)\n"
    )
    assert requests == []
