"""Pristine copies (dialects/pg_pristine.py): every copy starts from the pristine's physical
state, whatever ran on an earlier copy, and leaves nothing behind."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_plsqlbench.dialects.postgres import PostgresBackend
from pytest_plsqlbench.tasks import Fixture

from embedded import started_backend

FIXTURE = Fixture("pristine_probe", """
CREATE SCHEMA probe;
CREATE TABLE probe.t (id int PRIMARY KEY, v text);
CREATE SEQUENCE probe.s;
INSERT INTO probe.t SELECT g, 'v' || g FROM generate_series(1, 20) g;
""")

#: What a later run could read of an earlier one, if the copies shared anything.
TRACES = """
SELECT (SELECT string_agg(xmin::text || '/' || xmax::text || '/' || ctid::text, ',' ORDER BY id) FROM probe.t),
       (SELECT n_tup_upd || '/' || n_tup_del || '/' || n_dead_tup FROM pg_stat_user_tables WHERE relname = 't'),
       pg_relation_size('probe.t'),
       (SELECT last_value || '/' || is_called FROM probe.s),
       pg_current_wal_lsn()::text
"""


@pytest.fixture(scope="module")
def backend() -> Iterator[PostgresBackend]:
    with started_backend("pristine") as b:
        yield b


def _build(builder: PostgresBackend) -> None:
    builder.ensure_fixtures([FIXTURE])
    builder.allow_writes(["probe"])
    assert builder.admin is not None
    builder.admin.execute("GRANT USAGE ON SEQUENCE probe.s TO plsql_candidate")


def _traces(copy) -> tuple:  # noqa: ANN001
    with copy.connect() as conn:
        found = conn.execute(TRACES).fetchone()
        xid = conn.execute("SELECT pg_catalog.txid_current()").fetchone()[0]
    return (*found, xid)


def test_a_copy_starts_from_the_pristine_state_whatever_ran_before(backend: PostgresBackend) -> None:
    store = backend.pristines
    pristine = store.pristine("probe", _build)
    with store.fresh(pristine) as first:
        before = _traces(first)
    with store.fresh(pristine) as dirty:
        with dirty.connect(candidate=True) as conn:
            with conn.transaction(force_rollback=True):
                conn.execute("UPDATE probe.t SET v = 'x' WHERE id <= 3")
                conn.execute("DELETE FROM probe.t WHERE id = 20")
                conn.execute("SELECT nextval('probe.s')")
            conn.execute("SELECT pg_stat_force_next_flush()")
            conn.execute("SELECT set_config('x.seen', 'v', false)")
        with dirty.connect() as conn:
            conn.execute("CHECKPOINT")
        assert _traces(dirty) != before  # the traces are real: a shared server would show them
    with store.fresh(pristine) as later:
        assert _traces(later) == before
        with later.connect(candidate=True) as conn:
            assert conn.execute("SELECT current_setting('x.seen', true)").fetchone()[0] is None


def test_copies_are_removed_and_the_backend_goes_home(backend: PostgresBackend) -> None:
    store = backend.pristines
    pristine = store.pristine("probe", _build)
    home_dsn = backend.candidate_dsn
    copy = store.copy(pristine)
    backend.serve(copy)
    session = backend.session()
    session.begin_task()
    assert session.run("SELECT count(*) FROM probe.t", isolated=False, phase="test").lines == ["20"]
    session.end_task()
    root = Path(copy.server.root)
    backend.serve(None)
    assert backend.candidate_dsn == home_dsn and backend.copy is None
    store._executor().submit(lambda: None).result()  # the background removal ran
    assert not root.exists() and not copy.server.alive()
    session.begin_task()
    failed = session.run("SELECT count(*) FROM probe.t", isolated=False, phase="test")
    session.end_task()
    assert failed.error is not None  # the worker's own database never had the fixture


def test_a_derived_pristine_holds_what_was_built_on_it(backend: PostgresBackend) -> None:
    store = backend.pristines
    base = store.pristine("probe", _build)
    scaled = store.derive(base, "probe-scaled",
                          lambda conn: conn.execute("INSERT INTO probe.t SELECT g, 'w' FROM generate_series(21, 500) g"))
    with store.fresh(scaled) as copy, copy.connect() as conn:
        assert conn.execute("SELECT count(*) FROM probe.t").fetchone()[0] == 500
    with store.fresh(base) as copy, copy.connect() as conn:
        assert conn.execute("SELECT count(*) FROM probe.t").fetchone()[0] == 20


def test_copies_run_under_the_memory_limit_without_lowering_this_process(
    backend: PostgresBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The limit is set in each copy's server alone: copies come up on a background thread, and a
    limit lowered on this whole process meanwhile held for whatever else it started (headless
    Chromium died at start under it)."""
    import resource

    from pytest_plsqlbench.dialects import pg_server

    lowered: list[tuple[int, tuple[int, int]]] = []
    real = resource.setrlimit

    def spy(which: int, limits: tuple[int, int]) -> None:
        lowered.append((which, limits))
        real(which, limits)

    monkeypatch.setattr(resource, "setrlimit", spy)
    store = backend.pristines
    pristine = store.pristine("probe", _build)
    before = resource.getrlimit(resource.RLIMIT_AS)
    with store.fresh(pristine) as copy:
        limits = Path(f"/proc/{copy.server.pid()}/limits").read_text()
        with store._lock:
            spare = store._spares.get(pristine.key)
        assert spare is not None  # the next copy is prepared on the background thread
        spare.result()
    assert lowered == [] and resource.getrlimit(resource.RLIMIT_AS) == before
    assert pg_server.MEMORY_LIMIT is not None
    assert any(line.startswith("Max address space") and line.split()[3] == str(pg_server.MEMORY_LIMIT)
               for line in limits.splitlines()), limits


def test_two_workers_build_the_same_pristine_to_the_same_wal_position(backend: PostgresBackend) -> None:
    """A pristine's physical state is a function of what was built on it: two workers building
    the same fixtures reach the same WAL position (the fingerprint test of issue 28 compares
    copies of two workers' pristines). A setting applied by a reload instead of at start made
    one build write a page image another did not, on a loaded machine."""
    with started_backend("pristine-2") as other:
        positions = []
        for b in (backend, other):
            pristine = b.pristines.pristine("probe", _build)
            with b.pristines.fresh(pristine) as copy, copy.connect() as conn:
                positions.append(conn.execute(
                    "SELECT pg_current_wal_insert_lsn()::text, current_setting('full_page_writes')").fetchone())
    assert positions[0] == positions[1]
    assert positions[0][1] == "off"
