"""The sandbox image's size, layer by layer, before and after the slimmed Dockerfile.

    python -m benchmarks.image_size [--cache DIR]

There is no container engine here, so each layer we add is rebuilt from what it is
made of and measured as a registry stores it (a tar, gzip-compressed at the default
level):

- Debian packages are fetched with ``apt-get download`` (this machine runs bookworm,
  as the images do) and unpacked with ``dpkg-deb -x``, leaving out what Debian's slim
  images never install (docs, man pages, locales: their ``/etc/dpkg/dpkg.cfg.d/docker``
  rules); Python's standard library is compiled as the package's own install does;
- Python wheels come from PyPI (``pip download``) and are unpacked as pip would, with
  or without compiled modules as each Dockerfile leaves them;
- the runner's sources are this checkout's ``layers/runplane``.

Which packages a layer adds is the dependency closure of what it installs, less what
the base image holds (Debian's ``required`` packages and apt, and their closure). The
base images and the engine binary cannot be fetched here: their compressed sizes are
published figures (docs/latency.md names the sources) passed in as constants.
"""

from __future__ import annotations

import argparse
import compileall
import gzip
import io
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MB = 1_000_000

# Published compressed sizes (linux/amd64), not measured here: see docs/latency.md.
PYTHON_313_SLIM_MB = 41.5  # python:3.13-slim-bookworm, Docker Hub tag page
DEBIAN_SLIM_MB = 28.2  # debian:bookworm-slim, Docker Hub tag page
TOFU_ZIP_MB = 25.5  # tofu_1.8.5_linux_amd64.zip, the OpenTofu release page

CRYPTOGRAPHY = "cryptography==50.0.2"
# Left out of every Debian layer, as the slim images' dpkg rules do.
SLIM_EXCLUDED = (
    "usr/share/doc/",
    "usr/share/man/",
    "usr/share/info/",
    "usr/share/locale/",
    "usr/share/lintian/",
    "usr/share/linda/",
    "usr/share/groff/",
)
# What the new Dockerfile removes from the standard library (absent ones are skipped).
STDLIB_DROPPED = (
    "test",
    "idlelib",
    "lib2to3",
    "pydoc_data",
    "tkinter",
    "turtledemo",
    "ensurepip",
    "venv",
    "unittest/test",
    "sqlite3/test",
    "ctypes/test",
)


def _closure(packages: list[str]) -> set[str]:
    out = subprocess.run(
        [  # noqa: S607 - Debian tools on PATH
            "apt-cache",
            "depends",
            "--recurse",
            "--no-recommends",
            "--no-suggests",
            "--no-conflicts",
            "--no-breaks",
            "--no-replaces",
            "--no-enhances",
            *packages,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {
        line
        for line in out.splitlines()
        if line and not line[0].isspace() and not line.startswith("<")
    }


def _base_packages() -> set[str]:
    """debian:bookworm-slim: the required packages and apt, and what they need."""
    out = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Package} ${Priority}\n"],  # noqa: S607 - Debian tools on PATH
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    required = [p for p, prio in (line.split() for line in out.splitlines()) if prio == "required"]
    return _closure([*required, "apt"])


def _added(packages: list[str], base: set[str]) -> list[str]:
    # debconf's alternatives (cdebconf, perl) come up in the closure; the base's
    # debconf satisfies them.
    alternatives = {
        "cdebconf",
        "libdebian-installer4",
        "libnewt0.52",
        "libslang2",
        "libtextwrap1",
        "perl",
        "perl-modules-5.36",
        "libperl5.36",
        "libgdbm-compat4",
    }
    return sorted(_closure(packages) - base - alternatives)


def _unpack_debs(names: list[str], cache: Path, root: Path) -> None:
    debs = cache / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    for name in names:
        if not list(debs.glob(f"{name}_*.deb")):
            subprocess.run(
                ["apt-get", "download", "-q", name],  # noqa: S607 - Debian's tool on PATH
                cwd=debs,
                check=True,
                capture_output=True,
            )
        (deb,) = sorted(debs.glob(f"{name}_*.deb"))[-1:]
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)  # noqa: S607 - Debian tools on PATH
    for excluded in SLIM_EXCLUDED:
        for path in root.glob(excluded.rstrip("/")):
            shutil.rmtree(path, ignore_errors=True)


def _wheels(spec: str, python: str, cache: Path) -> list[Path]:
    where = cache / f"wheels-{python}"
    if not where.exists():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--only-binary=:all:",
                "--python-version",
                python,
                "--platform",
                "manylinux_2_34_x86_64",
                "--platform",
                "manylinux_2_17_x86_64",
                "-d",
                str(where),
                spec,
            ],
            check=True,
        )
    return sorted(where.glob("*.whl"))


def _unpack_wheels(wheels: list[Path], root: Path) -> None:
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(root)  # noqa: S202 - wheels from PyPI, as pip unpacks them


def _layer_bytes(root: Path) -> int:
    """A layer as a registry stores it: a tar of the tree, gzip at the default level."""
    buffer = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=6, mtime=0) as packed,
        tarfile.open(fileobj=packed, mode="w") as tar,
    ):
        for path in sorted(root.rglob("*")):
            tar.add(path, arcname=str(path.relative_to(root)), recursive=False)
    return len(buffer.getvalue())


def _tree_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def _runplane(root: Path, compiled: bool) -> None:
    target = root / "opt" / "runplane" / "runplane"
    shutil.copytree(
        REPO / "layers" / "runplane", target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    if compiled:
        compileall.compile_dir(
            target,
            quiet=1,
            workers=0,
            invalidation_mode=compileall.py_compile.PycInvalidationMode.UNCHECKED_HASH,
        )


def _measure(name: str, build: object, work: Path) -> dict[str, float]:
    root = work / name
    root.mkdir()
    build(root)  # type: ignore[operator]
    return {
        "compressed_mb": round(_layer_bytes(root) / MB, 2),
        "unpacked_mb": round(_tree_bytes(root) / MB, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "image-size")
    args = parser.parse_args()
    cache: Path = args.cache
    cache.mkdir(parents=True, exist_ok=True)
    base = _base_packages()
    procps = _added(["procps"], base)
    python = _added(["python3.11-minimal", "libpython3.11-stdlib", "ca-certificates"], base)

    def procps_layer(root: Path) -> None:
        _unpack_debs(procps, cache, root)

    def python_layer(root: Path) -> None:
        _unpack_debs(python, cache, root)
        stdlib = root / "usr" / "lib" / "python3.11"
        for dropped in STDLIB_DROPPED:
            shutil.rmtree(stdlib / dropped, ignore_errors=True)
        # Debian's install compiles the standard library (py3compile); do the same.
        subprocess.run(
            ["/usr/bin/python3.11", "-m", "compileall", "-q", "-j", "0", str(stdlib)], check=True
        )

    def cryptography_pip(root: Path) -> None:
        site = root / "usr" / "local" / "lib" / "python3.13" / "site-packages"
        _unpack_wheels(_wheels(CRYPTOGRAPHY, "3.13", cache), site)
        compileall.compile_dir(site, quiet=1, workers=0)  # pip compiles by default

    def cryptography_target(root: Path) -> None:
        site = root / "opt" / "site"
        _unpack_wheels(_wheels(CRYPTOGRAPHY, "3.11", cache), site)
        compileall.compile_dir(site, quiet=1, workers=0)

    with tempfile.TemporaryDirectory(prefix="image-size-") as scratch:
        work = Path(scratch)
        before = {
            "base python:3.13-slim-bookworm (published)": {"compressed_mb": PYTHON_313_SLIM_MB},
            f"procps ({', '.join(procps)})": _measure("procps", procps_layer, work),
            "cryptography + cffi + pycparser (pip, compiled)": _measure(
                "crypto-before", cryptography_pip, work
            ),
            "tofu (published zip)": {"compressed_mb": TOFU_ZIP_MB},
            "runplane sources": _measure("runplane-before", lambda r: _runplane(r, False), work),
        }
        after = {
            "base debian:bookworm-slim (published)": {"compressed_mb": DEBIAN_SLIM_MB},
            f"Debian Python 3.11 ({len(python)} packages)": _measure("python", python_layer, work),
            "tofu (published zip)": {"compressed_mb": TOFU_ZIP_MB},
            "cryptography + cffi + pycparser (compiled)": _measure(
                "crypto-after", cryptography_target, work
            ),
            "runplane sources + .pyc": _measure(
                "runplane-after", lambda r: _runplane(r, True), work
            ),
        }
    for title, layers in (("before", before), ("after", after)):
        print(f"{title}:")
        for layer, size in layers.items():
            unpacked = f"{size['unpacked_mb']:>7.2f}" if "unpacked_mb" in size else "      -"
            print(f"  {size['compressed_mb']:>7.2f} MB gz  {unpacked} MB  {layer}")
        total = sum(s["compressed_mb"] for s in layers.values())
        print(f"  {total:>7.2f} MB compressed in all")
    print(
        json.dumps(
            {"python_packages": python, "procps_packages": procps, "before": before, "after": after}
        )
    )


if __name__ == "__main__":
    main()
