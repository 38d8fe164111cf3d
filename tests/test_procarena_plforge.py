"""PLForge-format records on Spider databases built from a PLSQLBench-layout release.

Records and the release's one database (``TOY_STORE``) are written here for the test; PLForge's
own samples are not used (they carry no licence).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_plsqlbench.errors import DataError
from pytest_plsqlbench.manifests import discover
from pytest_plsqlbench.procarena.plforge import load, read_records
from pytest_plsqlbench.settings import Settings

OWNER = "TOY_STORE"
DDL = {
    "TOYS": f'CREATE TABLE {OWNER}.TOYS ("TOY_ID" NUMBER NOT NULL, "NAME" VARCHAR2(40), "PRICE" NUMBER(8,2), '
            f'"STOCK" NUMBER, CONSTRAINT TS_PK_T PRIMARY KEY ("TOY_ID"))',
    "SALES": f'CREATE TABLE {OWNER}.SALES ("SALE_ID" NUMBER NOT NULL, "TOY_ID" NUMBER, "QTY" NUMBER, '
             f'CONSTRAINT TS_PK_S PRIMARY KEY ("SALE_ID"), CONSTRAINT TS_FK_S FOREIGN KEY ("TOY_ID") '
             f'REFERENCES {OWNER}.TOYS ("TOY_ID"))',
}
COLUMNS = {"TOYS": '"TOY_ID", "NAME", "PRICE", "STOCK"', "SALES": '"SALE_ID", "TOY_ID", "QTY"'}
ROWS = {
    "TOYS": ["(1, 'kite', 12.5, 4)", "(2, 'yoyo', 3, 0)", "(3, 'robot', 40, 2)"],
    "SALES": ["(1, 1, 2)"],
}
SELL = """CREATE OR REPLACE PROCEDURE sell_toy(p_toy integer, p_qty integer)
LANGUAGE plpgsql AS $$
DECLARE v_stock integer; v_id integer;
BEGIN
  SELECT stock INTO v_stock FROM toys WHERE toy_id = p_toy;
  IF v_stock IS NULL OR v_stock < p_qty THEN
    RAISE EXCEPTION 'not enough stock';
  END IF;
  UPDATE toys SET stock = stock - p_qty WHERE toy_id = p_toy;
  SELECT COALESCE(MAX(sale_id), 0) + 1 INTO v_id FROM sales;
  INSERT INTO sales VALUES (v_id, p_toy, p_qty);
END $$;"""
DISCOUNT = """CREATE OR REPLACE PROCEDURE discount(p_pct numeric)
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE toys SET price = round(price * (100 - p_pct) / 100, 2) WHERE stock > 0;
END $$;"""
RECORDS = [
    {"text": "Sell p_qty of toy p_toy: lower its stock and record the sale with the next sale id; "
             "refuse when stock is short.", "plsql": SELL,
     "call": ["call sell_toy(1, 2);", "call sell_toy(3, 1);", "call sell_toy(3, 1);", "call sell_toy(1, 2);"], "database": "toy_store",
     "table": ["toys", "sales"]},
    {"text": "Discount every toy in stock by p_pct percent.", "plsql": DISCOUNT,
     "call": ["call discount(10);", "call discount(50);"], "database": "toy_store", "table": "toys"},
    {"text": "x", "plsql": "CREATE OR REPLACE PROCEDURE gone() LANGUAGE plpgsql AS $$ BEGIN NULL; END $$;",
     "call": ["call gone();"], "database": "no_such_db", "table": "t"},
]


def write_release(dest: Path) -> Path:
    schema = dest / "schema" / "spider"
    schema.mkdir(parents=True)
    (schema / "spider_ddl.jsonl").write_text(
        "\n".join(json.dumps({"db_id": OWNER, "table": n, "sql": s}) for n, s in DDL.items()) + "\n")
    tables = {n.title(): {"insert_statements": [f"INSERT INTO {OWNER}.{n} ({COLUMNS[n]}) VALUES {', '.join(r)}"],
                          "source_table": n.title(), "source_database": "toy_store", "total_rows": len(r)}
              for n, r in ROWS.items()}
    (schema / "spider_dml.json").write_text(json.dumps({"metadata": {}, "tables": tables}))
    return dest


@pytest.fixture()
def data(tmp_path: Path) -> tuple[Path, Path]:
    release = write_release(tmp_path / "release")
    records = tmp_path / "records.json"
    records.write_text(json.dumps(RECORDS))
    return release, records


def test_records_become_call_suite_tasks(data: tuple[Path, Path], tmp_path: Path) -> None:
    release, records = data
    settings = Settings.of(subsets=("plforge",), data=release, sources={"plforge": records}, data_cache=tmp_path / "cache")
    tasks = load(discover()["plforge"], settings)
    assert [t.id for t in tasks] == ["plforge_0001", "plforge_0002", "plforge_0003"]
    sell = tasks[0]
    assert [u.id for u in sell.turns[0].tests] == ["call-1", "call-2", "call-3", "call-4"]
    assert sell.metadata["schema"] == "toy_store" and sell.metadata["search_path"] == ["toy_store"]
    assert "sell_toy(p_toy integer, p_qty integer)" in sell.turns[0].prompt
    assert "Table toy_store.toys" in sell.turns[0].prompt and "'kite'" in sell.turns[0].prompt
    assert SELL.splitlines()[4] not in sell.turns[0].prompt
    assert "not in the release" in str(tasks[2].not_runnable)


def test_malformed_records_name_the_record(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{**RECORDS[0], "call": ["BEGIN sell_toy(1, 2); commit; END;"]}]))
    release = write_release(tmp_path / "release")
    settings = Settings.of(subsets=("plforge",), data=release, sources={"plforge": bad}, data_cache=tmp_path / "cache")
    with pytest.raises(DataError, match=r"bad.json record 1: field 'call' holds Oracle blocks"):
        load(discover()["plforge"], settings)
    bad.write_text("{not json")
    with pytest.raises(DataError, match="neither a JSON list nor JSON Lines"):
        read_records(bad)


def test_plforge_reference_run_end_to_end(data: tuple[Path, Path], tmp_path: Path) -> None:
    release, records = data
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--subset", "plforge", f"--plsql-data={release}",
         f"--plsql-source=plforge={records}", f"--plsql-data-cache={tmp_path / 'cache'}", "--plsql-model=reference",
         "-n", "0", "-q", "-rs"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "6 passed, 1 skipped" in proc.stdout
    assert "no_such_db" in proc.stdout


def test_plforge_wrong_procedure_fails(data: tuple[Path, Path], tmp_path: Path) -> None:
    release, records = data
    wrong = [dict(RECORDS[0])]
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps({"task_id": "plforge_0001", "subset": "plforge",
                                   "answer": SELL.replace("v_stock < p_qty", "v_stock <= p_qty")}) + "\n")
    records.write_text(json.dumps(wrong))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--subset", "plforge", f"--plsql-data={release}",
         f"--plsql-source=plforge={records}", f"--plsql-data-cache={tmp_path / 'cache'}",
         f"--plsql-answers={answers}", "-n", "0", "-q", "--tb=short"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )
    # the boundary calls (stock 1, quantity 1; stock 2, quantity 2): PLForge's rule, any exception fails
    assert "2 failed, 2 passed" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "the call raised (PLForge: any exception fails)" in proc.stdout


# --------------------------------------------------------------------------- PLForge as PLForge meant (issue 32)
# Records written here in PLForge's format: the gold quotes Spider's mixed-case names, and the
# record's own ``schema`` field names them; the release's DDL folds them (TOYS, "TOY_ID").
RESTOCK = """CREATE OR REPLACE PROCEDURE restock(p_toy integer, p_n integer)
LANGUAGE plpgsql AS $$
BEGIN
  IF p_n <= 0 THEN
    RAISE EXCEPTION 'nothing to restock';
  END IF;
  UPDATE "Toys" SET "Stock" = "Stock" + p_n WHERE "Toy_ID" = p_toy;
  INSERT INTO "Sales" ("Sale_ID", "Toy_ID", "Qty") SELECT COALESCE(MAX("Sale_ID"), 0) + 1, p_toy, -p_n FROM "Sales";
END $$;"""
MIXED_SCHEMA = {"Toys": {"columns": ["Toy_ID", "Name", "Price", "Stock"]}, "Sales": {"columns": ["Sale_ID", "Toy_ID", "Qty"]}}
MIXED = [
    {"text": "Restock toy p_toy by p_n units and log it as a negative sale.", "plsql": RESTOCK,
     "call": ["call restock(2, 5);", "call restock(1, 1);"], "database": "toy_store", "table": ["Toys", "Sales"],
     "schema": MIXED_SCHEMA, "id": "mixed_restock"},
    {"text": "Restock, but every call is refused.", "plsql": RESTOCK, "call": ["call restock(2, 0);"],
     "database": "toy_store", "table": ["Toys"], "schema": MIXED_SCHEMA, "id": "gold_always_raises"},
    {"text": "Do nothing useful.", "plsql": RESTOCK.replace('WHERE "Toy_ID" = p_toy', 'WHERE "Toy_ID" = -p_toy')
     .replace("INSERT INTO", "-- INSERT INTO"), "call": ["call restock(2, 5);"], "database": "toy_store",
     "table": ["Toys"], "schema": MIXED_SCHEMA, "id": "gold_changes_nothing"},
    {"text": "Restock toy p_toy and print the new stock with RAISE NOTICE.", "plsql": RESTOCK,
     "call": ["call restock(2, 5);"], "database": "toy_store", "table": ["Toys"], "id": "prints"},
]


def _run(tmp_path: Path, release: Path, records: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--subset", "plforge", f"--plsql-data={release}",
         f"--plsql-source=plforge={records}", f"--plsql-data-cache={tmp_path / 'cache'}", "-n", "0", "-q", "-rs",
         *extra],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )


def test_mixed_case_names_the_gold_quotes_are_kept(tmp_path: Path) -> None:
    release = write_release(tmp_path / "release")
    records = tmp_path / "records.json"
    records.write_text(json.dumps(MIXED))
    settings = Settings.of(subsets=("plforge",), data=release, sources={"plforge": records}, data_cache=tmp_path / "cache")
    tasks = load(discover()["plforge"], settings)
    assert [t.id for t in tasks] == ["mixed_restock", "gold_always_raises", "gold_changes_nothing"], "printing record left out"
    script = tasks[0].fixtures[0].script
    assert 'ALTER TABLE toy_store.toys RENAME TO "Toys";' in script
    assert 'ALTER TABLE toy_store.toys RENAME COLUMN toy_id TO "Toy_ID";' in script
    assert 'ALTER TABLE toy_store.sales RENAME COLUMN toy_id TO "Toy_ID";' in script
    assert '"Toys"' in tasks[0].turns[0].prompt, "the prompt tells the model the names to quote"
    assert tasks[0].metadata["judging"] == "plforge"


def test_gold_runs_on_mixed_case_and_hollow_records_are_left_out(tmp_path: Path) -> None:
    release = write_release(tmp_path / "release")
    records = tmp_path / "records.json"
    records.write_text(json.dumps(MIXED))
    out = tmp_path / "results.json"
    proc = _run(tmp_path, release, records, "--plsql-model=reference", f"--plsql-results={out}")
    doc = json.loads(out.read_text())
    by_id = {t["task_id"]: t for t in doc["tasks"]}
    assert all(t["passed"] for t in by_id["mixed_restock"]["tests"]), proc.stdout[-3000:]
    for hollow_id, why in (("gold_always_raises", "gold raises on every call"),
                           ("gold_changes_nothing", "does nothing passes every call")):
        tests = by_id[hollow_id]["tests"]
        assert tests and all(not t["passed"] and t["failure_class"] == "infrastructure" for t in tests)
        assert all(why in t["message"] and t["extra"].get("reference_failed") for t in tests), tests
    assert "prints" not in by_id
    assert "1 of 4 record(s) left out as hollow tasks" in proc.stdout + proc.stderr
    (left,) = doc["procarena_report"]["plforge"]["left_out_hollow"]
    assert left.startswith("prints: ") and "printed output" in left, left
    assert "plforge: 1 task(s) left out as hollow" in proc.stdout
    at_run = doc["procarena_report"]["plforge"]["hollow_at_run"]
    assert sorted(a.split(":", 1)[0] for a in at_run) == ["gold_always_raises", "gold_changes_nothing"], at_run
    assert any("gold raises on every call" in a for a in at_run), at_run
    assert "plforge: 2 task(s) hollow when gold ran, left out of the metrics as reference failures" in proc.stdout


def test_a_procedure_that_does_nothing_fails_a_mixed_case_record(tmp_path: Path) -> None:
    release = write_release(tmp_path / "release")
    records = tmp_path / "records.json"
    records.write_text(json.dumps(MIXED[:1]))
    answers = tmp_path / "answers.jsonl"
    nothing = "CREATE OR REPLACE PROCEDURE restock(p_toy integer, p_n integer) LANGUAGE plpgsql AS $$ BEGIN NULL; END $$;"
    answers.write_text(json.dumps({"task_id": "mixed_restock", "subset": "plforge", "answer": nothing}) + "\n")
    proc = _run(tmp_path, release, records, f"--plsql-answers={answers}", "--tb=short")
    assert "1 failed, 1 passed" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "the final state differs" in proc.stdout


def test_the_procarena_judging_mode_on_mixed_case_records(tmp_path: Path) -> None:
    """``options.judging: procarena`` in an own copy of the plforge manifest: a call on which gold
    raises is judged by ProcArena's rule (the same error passes that call; not raising fails it),
    where PLForge's rule leaves such a record out as hollow (gold raises on a call)."""
    release = write_release(tmp_path / "release")
    mine = tmp_path / "mytasks"
    mine.mkdir()
    manifest = (Path(__file__).resolve().parent.parent / "tasks" / "plforge.yaml").read_text()
    assert "judging: plforge" in manifest
    (mine / "plforge-pa.yaml").write_text(manifest.replace("name: plforge", "name: plforge-pa", 1)
                                          .replace("judging: plforge", "judging: procarena"))
    record = {**MIXED[0], "call": ["call restock(2, 5);", "call restock(3, 0);", "call restock(1, 1);"]}
    records = tmp_path / "records.json"
    records.write_text(json.dumps([record]))
    no_guard = RESTOCK.replace("IF p_n <= 0 THEN", "IF p_n < 0 THEN")
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps({"task_id": "mixed_restock", "subset": "plforge-pa", "answer": no_guard}) + "\n")

    def run(subset: str, *extra: str) -> dict:
        out = tmp_path / f"{subset}-{len(extra)}.json"
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--subset", subset, f"--plsql-tasks={mine}",
             f"--plsql-data={release}", f"--plsql-source=plforge={records}", f"--plsql-data-cache={tmp_path / 'cache'}",
             "-n", "0", "-q", f"--plsql-results={out}", *extra],
            cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert out.exists(), proc.stdout[-3000:] + proc.stderr[-2000:]
        return json.loads(out.read_text())

    ref = run("plforge-pa", "--plsql-model=reference")
    (task,) = ref["tasks"]
    assert [t["passed"] for t in task["tests"]] == [True, True, True], task["tests"]
    wrong = run("plforge-pa", f"--plsql-answers={answers}")
    (task,) = wrong["tasks"]
    # call-2 did not raise and logged a sale of 0; the states stay apart after it (call-3 too)
    assert [t["passed"] for t in task["tests"]] == [True, False, False], task["tests"]
    assert "raise" in task["tests"][1]["message"], task["tests"][1]["message"]
    plf = run("plforge", "--plsql-model=reference")
    (task,) = plf["tasks"]
    assert all(not t["passed"] and t["extra"].get("reference_failed") for t in task["tests"]), task["tests"]
