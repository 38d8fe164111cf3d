"""The cheaper per-test paths of issue 12 keep the guarantees of the ones they replaced.

One watchdog thread per session (not one per statement), the harness's cleanup after a script
in one round trip, statement heads taken from the splitter's tokens, and split results kept
for the last few scripts.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import psycopg
import pytest

from pytest_plsqlbench.dialects.postgres import PostgresBackend
from pytest_plsqlbench.runner import evaluate_task
from pytest_plsqlbench.scripts import first_keyword, split
from pytest_plsqlbench.tasks import Task, Turn, UnitTest

from embedded import started_backend

TIMEOUT = 1.0


@pytest.fixture(scope="module")
def backend() -> Iterator[PostgresBackend]:
    with started_backend("speedpaths", timeout=TIMEOUT) as b:
        yield b


def task(*scripts: str, expected: tuple[str, ...] | None = None) -> Task:
    kind = "output" if expected is not None else "assert"
    tests = tuple(UnitTest(f"t{i}", kind, s, expected) for i, s in enumerate(scripts))
    return Task(id="t", subset="s", dialect="postgres", turns=(Turn(1, "p", tests),))


def test_the_watchdog_fires_for_every_statement_that_overruns_and_never_for_the_next(backend: PostgresBackend) -> None:
    slow = "SET statement_timeout = 0; SELECT pg_sleep(20);"
    report = evaluate_task(backend, task(slow, slow, "SELECT pg_sleep(0.3); SELECT 42;", expected=None), ["SELECT 1;"])
    classes = [o.failure_class for o in report.outcomes]
    # Both overruns are cancelled (the one thread re-arms after firing); the quick test after
    # them is not hit by a late cancel.
    assert classes[:2] == ["timeout", "timeout"], report.outcomes
    assert report.outcomes[2].passed, report.outcomes[2]
    # One watchdog thread for the session, however many statements ran.
    assert sum(t.name == "plsql-watchdog" for t in threading.enumerate()) >= 1
    before = sum(t.name == "plsql-watchdog" for t in threading.enumerate())
    evaluate_task(backend, task(*["SELECT 1;"] * 20), ["SELECT 1;"])
    assert sum(t.name == "plsql-watchdog" for t in threading.enumerate()) == before


def test_what_a_test_leaves_outside_its_savepoint_is_cleared_in_the_one_cleanup_call(backend: PostgresBackend) -> None:
    leave = "PREPARE q AS SELECT 1; SELECT pg_advisory_lock(7); SET LOCAL search_path = pg_catalog;"
    # A statement prepared by the test before would take the name (pg_prepared_statements is not
    # the candidate's to read).
    probe = ("PREPARE q AS SELECT 1; "
             "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();")
    report = evaluate_task(backend, task(leave, probe, expected=None), ["SELECT 1;"])
    assert report.outcomes[0].passed, report.outcomes[0]
    report = evaluate_task(backend, task(leave, probe, expected=("0",)), ["SELECT 1;"])
    assert report.outcomes[1].passed, report.outcomes[1]


def test_an_install_keeps_its_objects_but_not_its_settings(backend: PostgresBackend) -> None:
    answer = "SET statement_timeout = 0; CREATE FUNCTION kept() RETURNS int LANGUAGE sql AS 'SELECT 5';"
    t0 = time.monotonic()
    report = evaluate_task(backend, task("SELECT kept();", "SELECT pg_sleep(20);", expected=("5",)), [answer])
    assert report.outcomes[0].passed, report.outcomes[0]
    assert report.outcomes[1].failure_class == "timeout"
    assert time.monotonic() - t0 < TIMEOUT + 10


@pytest.mark.parametrize(
    "script",
    [
        "BEGIN; COMMIT",
        "start transaction isolation level serializable; end;",
        "/* a comment */ -- and another\n commit and chain;",
        "\\set x 1\nSELECT 1;\n/\nROLLBACK",
        "SELECT 'a;b'; SAVEPOINT s; RELEASE s",
        "E'\\'' ; COMMIT",
        "$$ unterminated",
        "COPY t FROM STDIN; prepare transaction 'x'",
        "/*" + "x" * 3000 + "*/ COMMIT",
    ],
)
def test_statement_heads_from_the_splitter_match_first_keyword(script: str) -> None:
    for stmt in split(script, "postgres"):
        assert stmt.first_words(2) == first_keyword(stmt.text, 2) or stmt.kind == "client" or (
            # first_keyword reads only the first 2000 characters when that yields enough words:
            # a comment cut there reads as words; the splitter's tokens are the whole script's.
            len(stmt.text) > 2000
        )


def test_split_results_are_shared_but_not_mutable() -> None:
    script = "CREATE TABLE a(x int); INSERT INTO a VALUES (1);"
    first = split(script, "postgres")
    first.append(first[0])
    assert len(split(script, "postgres")) == 2


def test_the_watchdog_wakes_for_an_earlier_deadline_and_not_for_each_later_one() -> None:
    from types import SimpleNamespace

    from pytest_plsqlbench.dialects.postgres import _Watchdog

    cancels: list[float] = []
    session = SimpleNamespace(conn=SimpleNamespace(cancel_safe=lambda timeout: cancels.append(time.monotonic())),
                              backend=SimpleNamespace(terminate=lambda pid: None), backend_pid=1)
    dog = _Watchdog(session)  # type: ignore[arg-type]
    try:
        dog.arm(30.0)
        time.sleep(0.05)  # it now sleeps toward the 31 s deadline
        for _ in range(200):  # later deadlines: it sleeps on, nothing fires
            dog.arm(30.0)
            dog.disarm()
        assert not cancels and not dog.fired
        t0 = time.monotonic()
        dog.arm(0.0)  # an earlier deadline (now + 1 s): it must be woken for it
        deadline = t0 + 5
        while not cancels and time.monotonic() < deadline:
            time.sleep(0.01)
        assert cancels and dog.fired
        assert 0.9 <= cancels[0] - t0 < 2.0
    finally:
        dog.stop()


LOCATION_CONFTEST = '''
import json
import psycopg
import pytest

def pytest_collection_finish(session):
    rows = []
    for item in session.items:
        mine = item.location
        pytests = pytest.Item.location.func(item)  # pytest's own definition, from reportinfo()
        rows.append([item.nodeid, list(mine), list(pytests)])
    with open("locations.json", "w") as f:
        json.dump(rows, f)
'''


def test_an_items_location_is_pytests_own_worked_out_once_per_task(pytester: pytest.Pytester) -> None:
    """``PlsqlItem.location`` reuses its task's path instead of resolving it for every item; it
    must be exactly what pytest's ``Item.location`` gives (the terminal, JUnit and ``-rf`` read it)."""
    import json

    pytester.makeconftest(LOCATION_CONFTEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--subset", "smoke", "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK
    rows = json.loads((pytester.path / "locations.json").read_text())
    assert len(rows) > 20
    for nodeid, mine, pytests in rows:
        assert mine == pytests, nodeid
        assert mine[2] == nodeid


def test_the_end_of_a_task_discards_its_session_state_in_one_round_trip_on_the_same_connection(
    backend: PostgresBackend,
) -> None:
    """``ROLLBACK``, ``DISCARD ALL`` and the statistics flush go as one pipeline, each alone
    between sync points: what a rollback leaves (a prepared statement, a session advisory lock)
    is gone, the transaction is over, and the connection is the same one (a failed pipeline
    would have been replaced by a new connection, which would hide a ``DISCARD ALL`` that never ran)."""
    session = backend.session()
    session.begin_task()
    pid = session.backend_pid
    assert session.conn is not None
    session.conn.execute("PREPARE leftover AS SELECT 1")
    session.conn.execute("SELECT pg_advisory_lock(4242)")
    session.end_task()
    assert session.conn.info.backend_pid == pid
    assert session.conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    with pytest.raises(psycopg.errors.InvalidSqlStatementName):
        session.conn.execute("EXECUTE leftover")
    held = session.conn.execute(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()").fetchone()
    assert held == ("0",)
    # The session is usable for the next task as before.
    session.begin_task()
    session.end_task()
    assert session.conn.info.backend_pid == pid
