"""The runner's own, member-by-member extraction of configuration archives."""

from __future__ import annotations

import gzip
import io
import os
import stat
import tarfile
from collections.abc import Iterable
from pathlib import Path

import pytest

from runplane.runner.archive import (
    ENV_MAX_BYTES,
    ENV_MAX_FILE_BYTES,
    ENV_MAX_FILES,
    MIB,
    ArchiveLimits,
    extract_configuration,
)
from runplane.runner.refusal import Refused

Member = tuple[tarfile.TarInfo, bytes]
SMALL = ArchiveLimits(max_total_bytes=64 * 1024, max_entries=10, max_file_bytes=32 * 1024)


def file(name: str, data: bytes = b"x", mode: int = 0o644) -> Member:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    return info, data


def special(name: str, kind: bytes, linkname: str = "") -> Member:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info, b""


def archive(members: Iterable[Member], fmt: int = tarfile.PAX_FORMAT) -> io.BytesIO:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=fmt) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    buffer.seek(0)
    return buffer


@pytest.fixture
def sandbox(tmp_path: Path) -> Path:
    """A work dir with the (empty) extraction target inside it, and a neighbour outside."""
    (tmp_path / "config").mkdir()
    (tmp_path / "outside").mkdir()
    return tmp_path


def listing(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


def modes(root: Path) -> dict[str, int]:
    return {
        p.relative_to(root).as_posix(): stat.S_IMODE(p.lstat().st_mode) for p in root.rglob("*")
    }


def refused(sandbox: Path, members: Iterable[Member], limits: ArchiveLimits = SMALL) -> str:
    with pytest.raises(Refused) as refusal:
        extract_configuration(archive(members), sandbox / "config", limits)
    # Nothing escaped the target, whatever was refused
    assert listing(sandbox / "outside") == set()
    assert {p.name for p in sandbox.iterdir()} == {"config", "outside"}
    return refusal.value.message


def test_an_ordinary_archive_is_extracted_with_safe_modes(sandbox: Path) -> None:
    # Given an archive with a "./" prefix, a directory member, nested files and an executable
    members = [
        special("./", tarfile.DIRTYPE),
        file("./main.tf", b'output "a" { value = 1 }\n'),
        special("modules", tarfile.DIRTYPE),
        file("modules/net/main.tf", b"# net\n"),
        file("scripts/run.sh", b"#!/bin/sh\n", mode=0o4777),
    ]

    # When it is extracted
    extracted = extract_configuration(archive(members), sandbox / "config", SMALL)

    # Then exactly those files exist, with their content, and nothing is executable
    config = sandbox / "config"
    assert listing(config) == {
        "main.tf",
        "modules",
        "modules/net",
        "modules/net/main.tf",
        "scripts",
        "scripts/run.sh",
    }
    assert (config / "main.tf").read_bytes() == b'output "a" { value = 1 }\n'
    assert modes(config) == {
        "main.tf": 0o644,
        "modules": 0o755,
        "modules/net": 0o755,
        "modules/net/main.tf": 0o644,
        "scripts": 0o755,
        "scripts/run.sh": 0o644,
    }
    assert (extracted.files, extracted.directories) == (3, 3)
    assert extracted.bytes == 25 + 6 + 10


@pytest.mark.parametrize(
    ("members", "expected"),
    [
        pytest.param(
            [special("link", tarfile.SYMTYPE, "../outside"), file("link/pwned", b"x")],
            "member 'link' is a symbolic link",
            id="symlink-out",
        ),
        pytest.param(
            [special("inner", tarfile.SYMTYPE, "main.tf")],
            "member 'inner' is a symbolic link",
            id="symlink-inside",
        ),
        pytest.param(
            [special("hard", tarfile.LNKTYPE, "../outside/victim")],
            "member 'hard' is a hard link",
            id="hardlink-out",
        ),
        pytest.param(
            [file("../outside/pwned")],
            "member '../outside/pwned' has a '..' component",
            id="dotdot",
        ),
        pytest.param(
            [file("a/../../outside/pwned")],
            "member 'a/../../outside/pwned' has a '..' component",
            id="dotdot-inside",
        ),
        pytest.param(
            [file("/etc/pwned")],
            "member '/etc/pwned' is an absolute path",
            id="absolute",
        ),
        pytest.param(
            [special("dev/null", tarfile.CHRTYPE)],
            "member 'dev/null' is a device",
            id="char-device",
        ),
        pytest.param(
            [special("disk", tarfile.BLKTYPE)],
            "member 'disk' is a device",
            id="block-device",
        ),
        pytest.param(
            [special("pipe", tarfile.FIFOTYPE)],
            "member 'pipe' is a FIFO",
            id="fifo",
        ),
        pytest.param(
            [file("main.tf", b"one"), file("./main.tf", b"two")],
            "member './main.tf' appears more than once",
            id="duplicate",
        ),
        pytest.param(
            [file("a"), file("a/b")],
            "member 'a/b' is inside a path that is a file",
            id="file-as-directory",
        ),
        pytest.param(
            [file("a/b"), file("a")],
            "member 'a' appears more than once (or is also a directory)",
            id="directory-as-file",
        ),
        pytest.param(
            [file("bad\nname.tf")],
            "member 'bad\\nname.tf' has control characters",
            id="control-characters",
        ),
    ],
)
def test_unsafe_members_are_refused_by_name(
    sandbox: Path, members: list[Member], expected: str
) -> None:
    # Given an archive with a member that is not a plain file or directory inside the tree
    # When it is extracted
    message = refused(sandbox, members)

    # Then it is refused with a reason naming the member
    assert message.startswith("configuration archive ")
    assert expected in message


def test_a_zero_bomb_is_refused_at_the_total_cap_without_writing_past_it(sandbox: Path) -> None:
    # Given 1 MiB members of zeros that compress to almost nothing, more than the cap
    limits = ArchiveLimits(max_total_bytes=3 * MIB, max_entries=100, max_file_bytes=2 * MIB)
    members = [file(f"zero-{i}.bin", bytes(MIB)) for i in range(6)]
    source = archive(members)
    assert len(source.getvalue()) < 64 * 1024

    # When it is extracted
    with pytest.raises(Refused) as refusal:
        extract_configuration(source, sandbox / "config", limits)

    # Then the member that crosses the cap is named, and no more than the cap was written
    assert "member 'zero-3.bin' takes the archive over the cap of 3145728 bytes" in str(
        refusal.value
    )
    written = sum(p.stat().st_size for p in (sandbox / "config").rglob("*") if p.is_file())
    assert written <= limits.max_total_bytes


def test_a_member_over_the_per_file_cap_is_refused(sandbox: Path) -> None:
    message = refused(sandbox, [file("big.bin", bytes(40 * 1024))])

    assert message == (
        "configuration archive member 'big.bin' is larger than the per-file cap of 32768 bytes"
    )


def test_more_entries_than_the_cap_are_refused(sandbox: Path) -> None:
    # Given more files (and implied directories) than the cap of 10
    members = [file(f"d{i}/f.tf") for i in range(6)]

    message = refused(sandbox, members)

    assert "member 'd5/f.tf' exceeds the cap of 10 files and directories" in message


def test_an_oversized_header_record_is_refused_before_it_is_read_whole(sandbox: Path) -> None:
    # Given a pax header record far larger than any real one, in a tiny compressed archive
    info, data = file("main.tf")
    info.pax_headers = {"comment": "z" * (8 * MIB)}
    source = archive([(info, data)])
    assert len(source.getvalue()) < 64 * 1024

    # When it is extracted
    with pytest.raises(Refused, match="expands beyond what its members declare"):
        extract_configuration(source, sandbox / "config", SMALL)


def test_a_stream_that_is_not_a_tar_archive_is_refused(sandbox: Path) -> None:
    for body in (b"", gzip.compress(b"not a tar archive" * 100), b"\x1f\x8bgarbage"):
        with pytest.raises(Refused, match="cannot be read as a tar archive"):
            extract_configuration(io.BytesIO(body), sandbox / "config", SMALL)


def test_uncompressed_and_xz_archives_are_accepted(sandbox: Path) -> None:
    for index, mode in enumerate(("w", "w:xz", "w:bz2")):
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode=mode) as tar:  # type: ignore[call-overload]
            info, data = file("main.tf", b"ok")
            tar.addfile(info, io.BytesIO(data))
        buffer.seek(0)
        target = sandbox / f"t{index}"
        target.mkdir()
        assert extract_configuration(buffer, target, SMALL).files == 1
        assert (target / "main.tf").read_bytes() == b"ok"


def test_limits_come_from_the_environment_with_documented_defaults() -> None:
    assert ArchiveLimits.from_environ({}) == ArchiveLimits(500 * MIB, 20_000, 100 * MIB)
    assert ArchiveLimits.from_environ(
        {ENV_MAX_BYTES: "10", ENV_MAX_FILES: "2", ENV_MAX_FILE_BYTES: "5"}
    ) == ArchiveLimits(10, 2, 5)
    with pytest.raises(ValueError, match=ENV_MAX_FILES):
        ArchiveLimits.from_environ({ENV_MAX_FILES: "0"})


PROVIDER = (
    ".terraform/providers/registry.terraform.io/x/y/0.1.0/linux_amd64/terraform-provider-y_v0.1.0"
)


@pytest.mark.parametrize(
    ("shipped", "skipped"),
    [
        pytest.param(
            [
                special(".terraform", tarfile.DIRTYPE),
                file(PROVIDER, b"#!/bin/sh\ntouch pwned\n", mode=0o755),
                file(".terraform/modules/modules.json", b"{}"),
            ],
            (".terraform",),
            id="working-directory",
        ),
        pytest.param(
            [
                file(
                    "terraform.d/plugins/registry.terraform.io/x/y/0.1.0/linux_amd64/"
                    "terraform-provider-y",
                    b"\x7fELF",
                    mode=0o755,
                )
            ],
            ("terraform.d",),
            id="implied-mirror",
        ),
        pytest.param(
            [
                file("modules/m/.terraform/providers/terraform-provider-y", mode=0o755),
                file("modules/m/terraform.d/plugins/terraform-provider-y", mode=0o755),
                file("./.Terraform/x"),
            ],
            (".Terraform", "modules/m/.terraform", "modules/m/terraform.d"),
            id="nested-and-any-case",
        ),
    ],
)
def test_engine_directories_are_skipped_and_reported(
    sandbox: Path, shipped: list[Member], skipped: tuple[str, ...]
) -> None:
    # Given a configuration shipping engine directories beside its own files
    members = [file("main.tf", b"# main\n"), file(".terraform.lock.hcl", b"# lock\n"), *shipped]

    # When it is extracted
    extracted = extract_configuration(archive(members), sandbox / "config", SMALL)

    # Then only the configuration's own files are written (the lock file among them),
    # and what was left out is reported
    written = listing(sandbox / "config")
    assert {"main.tf", ".terraform.lock.hcl"} <= written
    assert not any(
        part.lower() in {".terraform", "terraform.d"} for p in written for part in p.split("/")
    )
    assert extracted.skipped == skipped
    assert extracted.skipped_members == len(shipped)
    assert extracted.files == 2


def test_an_archive_without_engine_directories_reports_nothing_skipped(sandbox: Path) -> None:
    extracted = extract_configuration(archive([file("main.tf")]), sandbox / "config", SMALL)

    assert (extracted.skipped, extracted.skipped_members) == ((), 0)


def test_skipped_members_still_count_against_the_caps(sandbox: Path) -> None:
    # Given skipped members that are together over the total cap, and one over the file cap
    over_total = [file(f".terraform/modules/m{i}.bin", bytes(30 * 1024)) for i in range(3)]
    over_file = [file(".terraform/big.bin", bytes(40 * 1024))]
    many = [file(f".terraform/f{i}") for i in range(11)]

    # When each is extracted, then each is refused at the cap it breaks
    assert "member '.terraform/modules/m2.bin' takes the archive over the cap" in refused(
        sandbox, over_total
    )
    assert "member '.terraform/big.bin' is larger than the per-file cap" in refused(
        sandbox, over_file
    )
    assert "member '.terraform/f10' exceeds the cap of 10 files" in refused(sandbox, many)


@pytest.mark.parametrize(
    "name",
    ["bin/terraform-provider-evil", "terraform-provider-aws_v5.0.0_x5", "x/Terraform-Provider-y"],
)
def test_a_provider_binary_outside_engine_directories_is_refused(sandbox: Path, name: str) -> None:
    # Given a configuration shipping a file named like a provider plugin
    members = [file("main.tf"), file(name, b"\x7fELF", mode=0o755)]

    # When it is extracted, then it is refused naming the member
    message = refused(sandbox, members)

    assert message.startswith(f"configuration archive member {name!r} is named like a provider")


def test_a_directory_named_like_a_provider_is_not_refused(sandbox: Path) -> None:
    # Given a module directory whose name starts like a provider's (no file is)
    members = [file("modules/terraform-provider-docs/main.tf")]

    # When it is extracted, then the directory and its file are written
    extract_configuration(archive(members), sandbox / "config", SMALL)

    assert "modules/terraform-provider-docs/main.tf" in listing(sandbox / "config")


def test_modes_are_exact_whatever_the_archive_and_the_umask_say(sandbox: Path) -> None:
    # Given members with every mode bit set, or none, and a umask that removes bits
    members = [
        special("d", tarfile.DIRTYPE),
        file("d/run.sh", b"#!/bin/sh\n", mode=0o7777),
        file("d/none", mode=0o000),
    ]
    members[0][0].mode = 0o7777
    previous = os.umask(0o077)
    try:
        # When it is extracted
        extract_configuration(archive(members), sandbox / "config", SMALL)
    finally:
        os.umask(previous)

    # Then files are 0644 and directories 0755 exactly
    assert modes(sandbox / "config") == {"d": 0o755, "d/run.sh": 0o644, "d/none": 0o644}
