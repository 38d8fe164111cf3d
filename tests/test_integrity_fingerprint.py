"""Nothing gold did, and nothing an earlier task did, is readable by an answer (issue 28).

A probe answer fingerprints everything an unprivileged answer can read that a rolled-back run
could have changed: every row of the task's tables with its system columns, relation sizes and
page counts, planner statistics, every statistics view open to it (cumulative and its own
backend's), sequence states, transaction ids and snapshots, the OID counter, WAL positions,
custom setting names. Its fingerprint must be the same whether or not gold ran before it on the
worker, and whether or not another task ran before it on the same connection -- for a Direct
answer, B2's gate and an Interactive episode. A cheater that behaves well only when the
fingerprint is not the clean one is scored as the same procedure without that branch.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pytest_plsqlbench.dialects.postgres import PostgresBackend
from pytest_plsqlbench.judges import DEFAULT, JudgeContext, JudgeRegistry
from pytest_plsqlbench.manifests import load_manifest
from pytest_plsqlbench.procarena.interactive.tools import Environment
from pytest_plsqlbench.procarena.judge import KIND, CallSuiteJudge, _gold_key, access_for, judges
from pytest_plsqlbench.procarena.loader import load, spec_of
from pytest_plsqlbench.procarena.perf.judge import PerfJudge
from pytest_plsqlbench.procarena.perf.judge import judges as b2_judges
from pytest_plsqlbench.runner import TaskRun
from pytest_plsqlbench.settings import Settings
from pytest_plsqlbench.tasks import Task

from embedded import started_backend

REPO = Path(__file__).resolve().parent.parent
MINI = Path(__file__).resolve().parent / "procarena_data" / "tasks" / "mini.yaml"
SAMPLE = REPO / "tasks" / "procarena-sample.yaml"

#: Left out as clocks, not traces (they differ between two runs of the same thing, and the
#: construction closes them anyway, docs/security.md): the WAL *write* position
#: (``pg_current_wal_lsn``; the WAL writer flushes every ``wal_writer_delay``, so it lags the
#: insert position by however long the run took: 0/1EAC000 against 0/1EABEF8 for the same insert
#: position, seen in CI), and the I/O statistics (``pg_stat_io``, ``pg_stat_get_backend_io``/
#: ``_wal``, ``pg_stat_bgwriter``, ``pg_stat_checkpointer``): backends flush their pending counts
#: into them on a timer (at most once a second), and the background processes write on timers of
#: their own, so what a read finds there depends on when it reads (tried: 277 reads in both, a
#: different number of flushed hits).
#: Column names of statistics rows that hold times (when it was read, not what was done).
_TIMES = r"k LIKE 'last\_%' OR k LIKE '%time' OR k IN ('stats_reset', 'backend_start', 'query_start')"

#: The probe: ``answers.fp()`` returns one text of everything listed in the module docstring.
#: Each part in its own block: one the role may not read yields its error code, not an abort.
FP_FUNCTION = r"""
CREATE FUNCTION answers.fp() RETURNS text LANGUAGE plpgsql AS $fp$
DECLARE
  out text := '';
  part text;
  r record;
  q text;
  queries text[] := ARRAY[
    $q$SELECT txid_current()::text || '|' || pg_current_xact_id()::text || '|' || txid_current_snapshot()::text$q$,
    $q$SELECT pg_current_wal_insert_lsn()::text$q$,
    $q$SELECT max(oid)::text FROM pg_class$q$,
    $q$SELECT (SELECT oid FROM pg_proc WHERE proname = 'fp' AND pronamespace = 'answers'::regnamespace)::text$q$,
    $q$SELECT string_agg(datname || ':' || datfrozenxid || ':' || datminmxid || ':' || age(datfrozenxid), ',' ORDER BY datname) FROM pg_database$q$,
    $q$SELECT pg_database_size(current_database())::text$q$,
    $q$SELECT string_agg(c.relname || ':' || c.relkind || ':' || c.relpages || ':' || c.reltuples || ':' || c.relallvisible
        || ':' || c.relfrozenxid || ':' || c.relminmxid || ':' || pg_relation_size(c.oid) || ':' || pg_table_size(c.oid)
        || ':' || pg_total_relation_size(c.oid) || ':' || coalesce(pg_relation_size(c.oid, 'fsm'::text), -1)
        || ':' || coalesce(pg_relation_size(c.oid, 'vm'::text), -1), ',' ORDER BY c.relname)
        FROM pg_class c WHERE c.relnamespace = '%s'::regnamespace$q$,
    $q$SELECT string_agg(to_jsonb(s)::text, ',' ORDER BY s.tablename, s.attname) FROM pg_stats s WHERE s.schemaname = '%s'$q$,
    $q$SELECT string_agg(s.sequencename || ':' || coalesce(s.last_value, -1), ',') FROM pg_sequences s WHERE s.schemaname = '%s'$q$,
    $q$SELECT string_agg(name || '=' || setting, ',' ORDER BY name) FROM pg_settings$q$,
    $q$SELECT coalesce(current_setting('x.seen', true), '<none>') || coalesce(current_setting('probe.mark', true), '<none>')$q$,
    $q$SELECT string_agg(locktype || ':' || mode || ':' || coalesce(relation::regclass::text, ''), ',' ORDER BY 1) FROM pg_locks WHERE locktype = 'relation'$q$
  ];
  views text[] := ARRAY['pg_stat_user_tables', 'pg_stat_xact_user_tables', 'pg_statio_user_tables',
    'pg_stat_user_indexes', 'pg_statio_user_indexes', 'pg_statio_user_sequences', 'pg_stat_user_functions',
    'pg_stat_xact_user_functions', 'pg_stat_database', 'pg_stat_database_conflicts', 'pg_stat_all_tables',
    'pg_stat_xact_all_tables', 'pg_stat_slru', 'pg_stat_wal', 'pg_stat_archiver', 'pg_stat_replication_slots',
    'pg_stat_subscription_stats', 'pg_prepared_xacts', 'pg_stat_recovery_prefetch'];
BEGIN
  FOREACH q IN ARRAY queries LOOP
    BEGIN
      EXECUTE replace(q, '%s', '@SCHEMA@') INTO part;
      out := out || coalesce(part, '<null>') || E'\n';
    EXCEPTION WHEN OTHERS THEN out := out || 'err ' || SQLSTATE || E'\n';
    END;
  END LOOP;
  FOREACH q IN ARRAY views LOOP
    BEGIN
      EXECUTE format($v$SELECT string_agg(x, ',' ORDER BY x) FROM (SELECT (SELECT string_agg(k || '=' || coalesce(v::text, ''), ';' ORDER BY k)
        FROM jsonb_each(to_jsonb(s)) e(k, v) WHERE NOT (@TIMES@)) AS x FROM %I s) t$v$, q) INTO part;
      out := out || q || ' ' || coalesce(part, '<null>') || E'\n';
    EXCEPTION WHEN OTHERS THEN out := out || q || ' err ' || SQLSTATE || E'\n';
    END;
  END LOOP;
  FOR r IN SELECT c.oid::regclass AS t FROM pg_class c WHERE c.relnamespace = '@SCHEMA@'::regnamespace AND c.relkind = 'r' ORDER BY c.relname LOOP
    BEGIN
      EXECUTE format('SELECT string_agg(ctid::text || '':'' || xmin || '':'' || xmax || '':'' || cmin || '':'' || cmax || '':'' || md5(t::text), '','' ORDER BY ctid) FROM %s t', r.t) INTO part;
      out := out || r.t::text || ' ' || coalesce(part, '<empty>') || E'\n';
    EXCEPTION WHEN OTHERS THEN out := out || r.t::text || ' err ' || SQLSTATE || E'\n';
    END;
  END LOOP;
  RETURN out;
END $fp$;
""".replace("@TIMES@", _TIMES.replace("'", "''"))


def fp_function(schema: str) -> str:
    return FP_FUNCTION.replace("@SCHEMA@", schema)


def _mini_task() -> Task:
    return load(load_manifest(MINI), Settings.of(subsets=("procarena-mini",)))[0]


def _registry() -> JudgeRegistry:
    return JudgeRegistry(list(DEFAULT.values()) + judges() + b2_judges())


class Recorder:
    """Every fingerprint the session's scripts returned, in order (wraps ``session.run``)."""

    def __init__(self, backend: PostgresBackend) -> None:
        self.seen: list[str] = []
        session = backend.session()
        inner = session.run

        def run(script: str, **kw: Any) -> Any:
            done = inner(script, **kw)
            self.seen += [line for line in done.lines if "pg_stat_user_tables" in line]
            return done

        session.run = run  # type: ignore[method-assign]


def probe_answer(task: Task) -> str:
    """Gold's procedure, and the fingerprint read while it installs."""
    schema = str(task.metadata["schema"])
    return f"{fp_function(schema)};\nSELECT answers.fp();\n{task.turns[0].reference}"


def hostile_answer(task: Task) -> str:
    """An earlier task's answer that leaves every trace it can: writes and deletes (rolled
    back), a sequence's value, a custom setting's name, a prepared statement, statistics."""
    schema = str(task.metadata["schema"])
    return f"""{task.turns[0].reference}
DO $h$ DECLARE t regclass; BEGIN
  FOR t IN SELECT c.oid::regclass FROM pg_class c WHERE c.relnamespace = '{schema}'::regnamespace AND c.relkind = 'r' LOOP
    EXECUTE format('UPDATE %s SET ctid = ctid WHERE false', t);
    EXECUTE format('DELETE FROM %s WHERE ctid IN (SELECT ctid FROM %s LIMIT 1)', t, t);
  END LOOP;
  PERFORM set_config('x.seen', 'v', false);
END $h$;
SELECT set_config('probe.mark', 'seen', false);
"""


def _run_task(backend: PostgresBackend, task: Task, answer: str) -> list[bool]:
    run = TaskRun(backend, task, [answer], judges=_registry())
    run.start()
    try:
        return [run.run_test(1, t).passed for t in task.turns[0].tests if t.kind == KIND]
    finally:
        run.finish()


@pytest.fixture(scope="module")
def two_backends() -> Iterator[tuple[PostgresBackend, PostgresBackend]]:
    with started_backend("fp-a") as a, started_backend("fp-b") as b:
        yield a, b


def _gold(backend: PostgresBackend, task: Task) -> None:
    """Gold's run alone, as the judge makes it (for probes whose own run does not)."""
    ctx = JudgeContext(backend, task)
    access = access_for(backend, task)
    access.prepare()
    backend.judge_cache.setdefault("procarena-gold", {})[_gold_key(task)] = CallSuiteJudge()._run_gold(ctx, access)


def _scenarios(two: tuple[PostgresBackend, PostgresBackend], task: Task,
               probe: Callable[[PostgresBackend], list[str]], *, runs_gold: bool = True) -> dict[str, list[str]]:
    """The probe's fingerprints: gold first / never on this worker / another task first on the
    same connection (with and without gold right before). ``runs_gold``: the probe's own run
    computes gold first when the worker has not (a Direct or B2 run does, an episode does not)."""
    a, b = two
    for backend in two:
        backend.judge_cache.clear()
    got: dict[str, list[str]] = {}
    if not runs_gold:
        _gold(a, task)
    got["gold first"] = probe(a)
    b.judge_cache["procarena-gold"] = dict(a.judge_cache["procarena-gold"])  # gold never ran on b
    got["no gold on the worker"] = probe(b)
    _run_task(b, task, hostile_answer(task))
    got["another task first"] = probe(b)
    _run_task(a, task, hostile_answer(task))
    a.judge_cache.clear()
    if not runs_gold:
        _gold(a, task)
    got["another task, then gold, first"] = probe(a)
    return got


def _assert_same(got: dict[str, list[str]]) -> None:
    first_name, first = next(iter(got.items()))
    assert first and all(first), "the probe read nothing"
    for name, fingerprints in got.items():
        assert fingerprints == first, f"{name!r} differs from {first_name!r}:\n" + _first_difference(first, fingerprints)


def _first_difference(a: list[str], b: list[str]) -> str:
    for x, y in zip(a, b):
        for lx, ly in zip(x.splitlines(), y.splitlines()):
            if lx != ly:
                return f"  {lx[:300]}\n  {ly[:300]}"
    return f"  {len(a)} vs {len(b)} fingerprints"


def test_direct_answer_reads_the_same_with_or_without_gold_or_an_earlier_task(two_backends) -> None:  # noqa: ANN001
    task = _mini_task()

    def probe(backend: PostgresBackend) -> list[str]:
        rec = Recorder(backend)
        outcomes = _run_task(backend, task, probe_answer(task))
        assert all(outcomes), "the probe is gold's procedure: every call passes"
        del backend.session().run  # the recorder
        return rec.seen

    _assert_same(_scenarios(two_backends, task, probe))


def test_the_fingerprint_does_see_a_rolled_back_run_on_a_shared_server(two_backends) -> None:  # noqa: ANN001
    """The probe is not blind: on one server, after gold's calls were rolled back, it differs."""
    a, _ = two_backends
    task = _mini_task()
    schema = str(task.metadata["schema"])
    store = a.pristines
    run = TaskRun(a, task, [probe_answer(task)], judges=_registry())
    run.start()  # builds the task's pristine
    run.finish()
    pristine = next(iter(store._pristines.values()))

    def read(copy: Any) -> str:
        with copy.connect(candidate=True) as conn:
            with conn.transaction(force_rollback=True):
                conn.execute(fp_function(schema))
                return str(conn.execute("SELECT answers.fp()").fetchone()[0])

    with store.fresh(pristine) as clean_copy:
        clean = read(clean_copy)
    with store.fresh(pristine) as shared:
        with shared.connect(candidate=True) as conn:
            with conn.transaction(force_rollback=True):
                conn.execute(task.turns[0].reference or "")
                for test in task.turns[0].tests:
                    with contextlib.suppress(psycopg.Error), conn.transaction():
                        conn.execute(test.script or "")
        assert read(shared) != clean


def test_b2_gate_reads_the_same_with_or_without_gold_or_an_earlier_task(two_backends) -> None:  # noqa: ANN001
    tasks = load(load_manifest(SAMPLE), Settings.of(subsets=("procarena-sample",)))
    task = next(t for t in tasks if spec_of(t).b2 is not None)
    spec = spec_of(task)

    def probe(backend: PostgresBackend) -> list[str]:
        answer = probe_answer(task)
        run = TaskRun(backend, task, [answer], judges=_registry())
        run.start()
        rec = Recorder(backend)
        try:
            session = backend.session()
            session.end_task()
            record = PerfJudge(repeats=1)._gate(run.ctx, spec, answer)
            session.begin_task()
        finally:
            run.finish()
            del backend.session().run
        assert record["admitted"], record
        return rec.seen

    _assert_same(_scenarios(two_backends, task, probe))


def test_interactive_tools_read_the_same_with_or_without_gold_or_an_earlier_task(two_backends) -> None:  # noqa: ANN001
    task = _mini_task()
    schema = str(task.metadata["schema"])

    def probe(backend: PostgresBackend) -> list[str]:
        env = Environment(backend, task, limit=10**7)
        env.start()
        try:
            seen = [env.call("execute_scratch", {"sql": f"{fp_function(schema)};\nSELECT answers.fp();"})]
            env.call("reset_scratch", {})
            seen.append(env.call("execute_scratch", {"sql": f"{fp_function(schema)};\nSELECT answers.fp();"}))
        finally:
            env.close()
        assert all("pg_stat_user_tables" in s for s in seen), seen
        return seen

    _assert_same(_scenarios(two_backends, task, probe, runs_gold=False))


# --------------------------------------------------------------------------- a cheater
def _mutant(task: Task) -> str:
    """The task's first mutant: a wrong procedure (some call fails)."""
    return str(spec_of(task).mutants[0].code)


def _cheater(task: Task, clean: str) -> str:
    """Gold's procedure when the fingerprint is not ``clean`` (gold's traces are there), the
    mutant's otherwise; ``clean`` is the fingerprint a run with no traces reads."""
    schema = str(task.metadata["schema"])
    gold = task.turns[0].reference or ""
    mutant = _mutant(task)
    signature = re.search(r"PROCEDURE\s+(\w+\s*\([^)]*\))", gold, re.I)
    assert signature
    name = signature.group(1).split("(")[0].strip()
    renamed_gold = gold.replace(f"PROCEDURE {name}", f"PROCEDURE answers.{name}_gold", 1)
    renamed_mutant = mutant.replace(f"PROCEDURE {name}", f"PROCEDURE answers.{name}_mutant", 1)
    params = signature.group(1)[len(name):].strip()[1:-1]
    args = ", ".join(p.split()[0] for p in params.split(","))
    literal = clean.replace("'", "''")
    return f"""{fp_function(schema)};
DO $m$ BEGIN
  EXECUTE format('CREATE FUNCTION answers.probe_mode() RETURNS text LANGUAGE sql AS %L', 'SELECT ' || quote_literal(md5(answers.fp())));
END $m$;
SELECT 'clean:' || answers.probe_mode();
{renamed_gold}
{renamed_mutant}
CREATE OR REPLACE PROCEDURE {name}({params}) LANGUAGE plpgsql AS $c$
BEGIN
  IF answers.probe_mode() = '{literal}' OR '{literal}' = 'calibrate' THEN
    CALL answers.{name}_mutant({args});
  ELSE
    CALL answers.{name}_gold({args});
  END IF;
END $c$;
"""


def _keep(done: Any, into: list[str]) -> Any:
    into.extend(done.lines)
    return done


def test_a_cheater_scores_as_the_same_procedure_without_the_trick(two_backends) -> None:  # noqa: ANN001
    a, _ = two_backends
    task = _mini_task()
    a.judge_cache.clear()
    mutant_outcomes = _run_task(a, task, _mutant(task))
    assert not all(mutant_outcomes), "the mutant must fail a call for this test to mean anything"
    seen: list[str] = []
    inner = a.session().run
    a.session().run = lambda script, **kw: _keep(inner(script, **kw), seen)  # type: ignore[method-assign]
    calibrated = _run_task(a, task, _cheater(task, "calibrate"))
    del a.session().run
    clean = next(line for line in seen if line.startswith("clean:"))[len("clean:"):]
    assert re.fullmatch(r"[0-9a-f]{32}", clean)
    a.judge_cache.clear()  # gold runs again, right before the cheater
    cheated = _run_task(a, task, _cheater(task, clean))
    assert cheated == calibrated == mutant_outcomes
