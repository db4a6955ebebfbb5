"""Where and as whom the engine runs: the runner's side of the sandbox's trust boundary.

The runner is trusted: it holds the session, talks to the control plane, and checks
what the engine produced. The engine is not: it runs the configuration's code
(providers, ``external`` programs, provisioners, ``file()``), so it and everything it
starts run as another user that can read nothing of the runner's, and are killed as a
whole before the runner reads anything they wrote. How far the engine is fenced in is
the sandbox's *isolation* (``RUNPLANE_ENGINE_ISOLATION``), chosen by whoever launches
the runner:

``namespaces``
    The embedded stack run as root, with bubblewrap. Each engine command runs in new
    mount, PID, IPC and UTS namespaces, as the sandbox's own user (``setpriv``: no
    capabilities, no new privileges), seeing only the system's read-only directories,
    the read-only paths the runner names (the engine binary, the provider mirror, the
    Python the test provider runs on) and its own directory. Its network is a namespace
    the runner made holding only a loopback interface, on which the state relay
    listens: the stack's own servers on the host's loopback are out of its reach. When
    the command ends, its PID namespace ends and every process in it is killed.
``user``
    A Fargate task (which cannot create namespaces). Each engine command runs as the
    engine user; the runner's files are the runner's, mode 0700. After each command
    every process of the engine user is killed.
``none``
    The embedded stack run as an ordinary user: the engine runs as the runner's own
    user, which is only fit for one organization's runs (the stack then refuses a
    second organization).

Standard library only: it runs inside the sandbox.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import enum
import fcntl
import os
import shutil
import signal
import socket
import stat
import struct
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

ISOLATION_VARIABLE = "RUNPLANE_ENGINE_ISOLATION"
USER_VARIABLE = "RUNPLANE_ENGINE_USER"
READABLE_VARIABLE = "RUNPLANE_ENGINE_READABLE"
# ``host``: with namespaces, the engine keeps the sandbox's network (the default is a
# network of its own holding only the relay).
NETWORK_VARIABLE = "RUNPLANE_ENGINE_NETWORK"

_CLONE_NEWNET = 0x40000000
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1
# What every engine command may read, when it exists: the system's programs and
# libraries and the few files of /etc that name resolution and TLS need.
_SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_SYSTEM_FILES = (
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/localtime",
)
_SWEEP_TIMEOUT = 10


class Isolation(enum.Enum):
    NAMESPACES = "namespaces"
    USER = "user"
    NONE = "none"


class ConfinementError(RuntimeError):
    """The sandbox cannot confine the engine as its launch asked: nothing is run."""


@dataclass(frozen=True)
class EngineUser:
    uid: int
    gid: int

    @classmethod
    def parse(cls, text: str) -> EngineUser:
        uid, _, gid = text.partition(":")
        try:
            user = cls(int(uid), int(gid or uid))
        except ValueError:
            raise ConfinementError(f"{USER_VARIABLE} is not UID:GID: {text!r}") from None
        if user.uid <= 0 or user.gid <= 0:
            raise ConfinementError(f"{USER_VARIABLE} must name an unprivileged user: {text!r}")
        return user


@dataclass
class Confinement:
    """How engine commands are started, and what the runner does around them."""

    isolation: Isolation
    user: EngineUser | None
    readable: list[Path] = field(default_factory=list)
    network: LoopbackNetwork | None = None
    bwrap: str | None = None
    setpriv: str | None = None
    _writable: list[Path] = field(default_factory=list)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Confinement:
        """The confinement the launch asked for; ``none`` unless it asked for more.
        Refuses (:class:`ConfinementError`) what this process cannot provide."""
        try:
            isolation = Isolation(environ.get(ISOLATION_VARIABLE) or Isolation.NONE.value)
        except ValueError:
            raise ConfinementError(
                f"{ISOLATION_VARIABLE} is not one of namespaces, user, none"
            ) from None
        if isolation is Isolation.NONE:
            return cls(isolation, None)
        if os.geteuid() != 0:
            raise ConfinementError(f"isolation {isolation.value!r} needs the runner to be root")
        user = EngineUser.parse(environ.get(USER_VARIABLE) or "")
        if isolation is Isolation.USER:
            return cls(isolation, user)
        bwrap, setpriv = shutil.which("bwrap"), shutil.which("setpriv")
        if bwrap is None or setpriv is None:
            raise ConfinementError("isolation 'namespaces' needs bwrap and setpriv on PATH")
        readable = [Path(p) for p in (environ.get(READABLE_VARIABLE) or "").split(os.pathsep) if p]
        host_network = environ.get(NETWORK_VARIABLE) == "host"
        network = None if host_network else LoopbackNetwork()
        return cls(isolation, user, readable, network, bwrap, setpriv)

    # -- files -----------------------------------------------------------------------

    def allow_reading(self, *paths: Path) -> None:
        """Let engine commands read ``paths`` (with namespaces, nothing else is there)."""
        self.readable.extend(p for p in paths if p not in self.readable)

    def engine_directory(self, path: Path) -> Path:
        """Create ``path`` as the engine's own directory (its home and work)."""
        path.mkdir(mode=0o700)
        if self.user is not None:
            os.chown(path, self.user.uid, self.user.gid)
            # The engine must be able to reach it when it shares the filesystem.
            os.chmod(path.parent, 0o711)  # noqa: S103 - traversal only, no listing
        self._writable.append(path)
        return path

    def hand_over(self, root: Path) -> None:
        """Make everything under ``root`` (written by the runner) the engine's."""
        if self.user is None:
            return
        for directory, dirs, files in os.walk(root):
            for name in [*dirs, *files]:
                os.lchown(os.path.join(directory, name), self.user.uid, self.user.gid)
        os.lchown(root, self.user.uid, self.user.gid)

    # -- processes -------------------------------------------------------------------

    def spawn(
        self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], **options: Any
    ) -> subprocess.Popen[bytes]:
        """Start one engine command, confined; ``options`` as for :class:`subprocess.Popen`."""
        if self.isolation is Isolation.NAMESPACES:
            wrapped = self._in_namespaces(argv, cwd)

            def start() -> subprocess.Popen[bytes]:
                return subprocess.Popen(wrapped, cwd=cwd, env=dict(env), **options)  # noqa: S603

            # In the network namespace's own thread: a child's parent-death signal
            # follows the thread that started it, so no short-lived thread may.
            return self.network.run(start) if self.network is not None else start()
        if self.user is not None:
            options = {**options, "user": self.user.uid, "group": self.user.gid}
            options["extra_groups"] = []
        return subprocess.Popen(list(argv), cwd=cwd, env=dict(env), **options)  # noqa: S603

    def sweep(self) -> None:
        """Kill every process of the engine's user (what a command left running).

        With namespaces a command's PID namespace already ended with it; as a user of
        its own, a kill(-1) sent as that user reaches exactly its processes."""
        if self.isolation is not Isolation.USER or self.user is None:
            return
        kill_every_process_of(self.user)

    def close(self) -> None:
        if self.network is not None:
            self.network.close()

    def _in_namespaces(self, argv: Sequence[str], cwd: Path) -> list[str]:
        assert self.bwrap is not None
        assert self.setpriv is not None
        assert self.user is not None
        args = [
            self.bwrap,
            "--die-with-parent",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--perms",
            "1777",
            "--tmpfs",
            "/tmp",  # noqa: S108 - the namespace's own, empty /tmp
        ]
        for path in _SYSTEM_PATHS:
            if os.path.islink(path):
                args += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                args += ["--ro-bind", path, path]
        shown = [Path(p) for p in _SYSTEM_FILES if os.path.exists(p)]
        shown += [p for p in _real(self.readable) if p.exists()]
        # The directories leading to what is shown are made traversable (bubblewrap
        # would make them 0700, the root's), and hold nothing else.
        for ancestor in _ancestors([*shown, *self._writable]):
            args += ["--perms", "0755", "--dir", str(ancestor)]
        for each in shown:
            args += ["--ro-bind", str(each), str(each)]
        for own in self._writable:
            args += ["--bind", str(own), str(own)]
        args += [
            "--chdir",
            str(cwd),
            "--",
            self.setpriv,
            f"--reuid={self.user.uid}",
            f"--regid={self.user.gid}",
            "--clear-groups",
            "--no-new-privs",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--",
            *argv,
        ]
        return args


def kill_every_process_of(user: EngineUser) -> None:
    """SIGKILL every process of ``user``: kill(-1) sent as that user reaches exactly its
    processes, wherever they were reparented.

    Sent by a forked child of the runner's that becomes the user first, so the image
    needs no kill(1) (procps). The child makes only system calls before it exits, and
    the change of user clears its dumpable flag: the user's processes can neither trace
    it nor read its memory. They can still stop it (it is theirs to signal), so it gets
    the sweep's time limit and is killed by the runner past it."""
    child = os.fork()
    if child == 0:  # only system calls until _exit: safe in a threaded parent
        try:
            os.setgroups([])
            os.setresgid(user.gid, user.gid, user.gid)
            os.setresuid(user.uid, user.uid, user.uid)
            os.kill(-1, signal.SIGKILL)
        finally:
            os._exit(0)
    _reap_within(child, _SWEEP_TIMEOUT)


def _reap_within(child: int, seconds: float) -> None:
    """Wait for ``child``; past ``seconds`` kill it and raise ``TimeoutExpired``, as a
    timed-out ``subprocess.run`` would."""
    deadline = time.monotonic() + seconds
    while True:
        reaped, _ = os.waitpid(child, os.WNOHANG)
        if reaped == child:
            return
        if time.monotonic() >= deadline:
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
            raise subprocess.TimeoutExpired(["kill", "-9", "-1"], seconds)
        time.sleep(0.005)


def _ancestors(paths: Iterable[Path]) -> list[Path]:
    """Every directory above ``paths`` but the root, parents first."""
    found = {parent for path in paths for parent in path.parents if parent != Path("/")}
    return sorted(found, key=lambda p: (len(p.parts), str(p)))


def _real(paths: Iterable[Path]) -> list[Path]:
    """Each path, and where it leads if it is (or passes through) a link: a bound link
    would point at nothing inside the namespace."""
    found: list[Path] = []
    for path in paths:
        for each in (Path(os.path.abspath(path)), Path(os.path.realpath(path))):
            if each not in found:
                found.append(each)
    return found


def read_engine_file(path: Path, limit: int, owner: int | None = None) -> bytes:
    """The bytes of a regular file the engine wrote, read without following a link it
    may have put in its place, refused beyond ``limit`` bytes, and refused unless
    ``owner`` (the engine's UID, when it has its own) owns it: a hard link to a file of
    someone else's is not the engine's output."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise ConfinementError(f"{path.name} cannot be read as a file ({error.strerror})") from None
    with os.fdopen(descriptor, "rb") as handle:
        status = os.fstat(handle.fileno())
        if not stat.S_ISREG(status.st_mode):
            raise ConfinementError(f"{path.name} is not a regular file")
        if owner is not None and status.st_uid != owner:
            raise ConfinementError(f"{path.name} is not the engine's own file")
        if status.st_size > limit:
            raise ConfinementError(f"{path.name} is larger than {limit} bytes")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise ConfinementError(f"{path.name} is larger than {limit} bytes")
    return data


class LoopbackNetwork:
    """A network namespace holding only a loopback interface, where one thread of the
    runner lives for the phase: sockets it makes, and processes it starts, are in the
    namespace, while the rest of the runner keeps the sandbox's own network (network
    namespaces belong to threads, and a child starts in its parent thread's). The
    thread lives until :meth:`close`, because a child's parent-death signal, which
    bubblewrap sets, follows the thread that started it."""

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._failure: BaseException | None = None
        self._thread = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="engine-network", initializer=self._enter
        )
        try:
            self._thread.submit(_nothing).result()
        except concurrent.futures.BrokenExecutor:
            raise ConfinementError(
                f"the engine's network namespace cannot be made: {self._failure}"
            ) from None

    def run(self, work: Callable[[], T]) -> T:
        """``work()`` done by the thread inside the namespace."""
        return self._thread.submit(work).result()

    def close(self) -> None:
        self._thread.shutdown(wait=True)

    def _enter(self) -> None:
        try:
            if self._libc.unshare(_CLONE_NEWNET) != 0:
                raise _os_error("unshare")
            _loopback_up()
        except BaseException as error:
            self._failure = error
            raise


def _nothing() -> None:
    return None


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        request = struct.pack("16sh", b"lo", 0)
        flags = struct.unpack("16sh", fcntl.ioctl(probe, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(probe, _SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags | _IFF_UP))


def _os_error(call: str) -> OSError:
    number = ctypes.get_errno()
    return OSError(number, f"{call}(CLONE_NEWNET): {os.strerror(number)}")
