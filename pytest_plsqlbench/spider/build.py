"""Tasks of the three schema-grounded subsets, built from a release folder.

* **spider** (Spider-PLSQL, paper §3.4/B.4): one task per question; the answer *is* the
  program (``answer_mode="execute"``) and its one test compares what it prints with the
  gold SQL's rows, computed in the worker's database (kind ``rows``).
* **spider2-st**: one task per instance; each published test script is one item, judged
  against the output the reference answer gives for the same script in a clean state.
* **spider2-mt**: one task per conversation, turns in ``turn_index`` order, per-turn items.

Tasks whose tables are not in the data are still built -- so collection lists every test --
but carry ``Task.not_runnable`` with the reason; the loader turns that into a skip
that names it, and the end-of-run report counts them. Nothing is dropped without a word.
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from ..collect import marker_name
from ..errors import DataError
from ..manifests import Manifest
from ..settings import Settings
from ..tasks import Fixture, Task, Turn, UnitTest
from . import release
from .dialects import dialect_for
from .schema import Catalog

log = logging.getLogger(__name__)

FAMILY = {"spider": "spider", "spider2-st": "spider2", "spider2-mt": "spider2"}
#: The task files each loader reads (besides its family's schema files).
DATA_FILES = {
    "spider": (release.SPIDER1,),
    "spider2-st": (release.SPIDER2_ST, release.META_ST),
    "spider2-mt": (release.SPIDER2_MT, release.META_MT),
}
DIFFICULTY_ORDER = ("simple", "intermediate", "advanced")
CONSTRUCT_KEYS = ("constructs", "plsql_constructs", "required_constructs")
_CREATE_UNIT = re.compile(
    r"^\s*CREATE\s+(?:OR\s+REPLACE\s+)?(?:(?:NON)?EDITIONABLE\s+)?"
    r"(PACKAGE\s+BODY|PACKAGE|PROCEDURE|FUNCTION|TYPE\s+BODY|TYPE|TRIGGER|VIEW)\s+([\w$#\".]+)",
    re.I | re.M,
)


@dataclass
class LoadNotes:
    """What a load found that is not a task: for the end-of-run report."""

    subset: str
    root: Path
    family: str
    ddl_files: list[str] = field(default_factory=list)
    dml_files: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    schema_problems: dict[str, list[str]] = field(default_factory=dict)
    orphan_data: list[str] = field(default_factory=list)
    #: Owner -> what its load does beyond the published statements (:mod:`.adjust`).
    adjustments: dict[str, list[str]] = field(default_factory=dict)
    #: Owner -> why it cannot be loaded at all (its tasks are not runnable).
    unloadable: dict[str, list[str]] = field(default_factory=dict)
    #: ``OWNER.TABLE`` used by a runnable task but without rows in the data -> why.
    tables_without_rows: dict[str, str] = field(default_factory=dict)
    #: DML entries left out because they are another database's rows.
    foreign_rows: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- helpers
def _markers(meta: Mapping[str, Any], constructs: Iterable[str]) -> list[str]:
    out: list[str] = []
    difficulty = meta.get("difficulty")
    if isinstance(difficulty, str) and difficulty.strip():
        out.append(f"difficulty_{marker_name(difficulty)}")
    for reason in release.iter_strings(meta.get("reasoning_types")):
        out.append(f"reasoning_{marker_name(reason)}")
    for construct in constructs:
        out.append(f"construct_{marker_name(construct)}")
    return list(dict.fromkeys(out))


def _with_status(markers: list[str], why: str | None) -> tuple[str, ...]:
    """Task markers plus ``not_runnable`` (so ``-m "not not_runnable"`` deselects those)."""
    return tuple(dict.fromkeys([*markers, *(["not_runnable"] if why else [])]))


def _constructs(meta: Mapping[str, Any], reference: str | None) -> tuple[list[str], str | None]:
    """PL/SQL constructs from the metadata when it has them, else from the reference's CREATEs."""
    for key in CONSTRUCT_KEYS:
        values = list(release.iter_strings(meta.get(key)))
        if values:
            return values, "metadata"
    if not reference:
        return [], None
    kinds = [" ".join(m.group(1).upper().split()) for m in _CREATE_UNIT.finditer(reference)]
    kinds = [k for k in kinds if k not in ("PACKAGE BODY", "TYPE BODY")]
    return list(dict.fromkeys(k.lower() for k in kinds)), "reference" if kinds else None


def _entry_points(reference: str | None) -> tuple[str, ...]:
    if not reference:
        return ()
    names = []
    for m in _CREATE_UNIT.finditer(reference):
        if "BODY" not in m.group(1).upper():
            names.append(m.group(2).strip('"').split(".")[-1].strip('"'))
    return tuple(dict.fromkeys(names))


def _owners(tables: Iterable[str], db_id: str, catalog: Catalog) -> list[str]:
    owners = sorted({t.split(".", 1)[0].strip().strip('"').upper() for t in tables if "." in t})
    return owners or catalog.owners_of_db(db_id)


def gold_shape(gold: str) -> tuple[bool, int | None]:
    """(ordered, columns) of a gold query: a top-level ORDER BY, and its select-list width."""
    try:
        tree = sqlglot.parse_one(gold, read="oracle")
    except SqlglotError:
        return bool(re.search(r"\border\s+by\b[^)]*$", gold, re.I)), None
    ordered = tree.args.get("order") is not None
    select = tree
    while isinstance(select, exp.SetOperation):
        select = select.this
    if not isinstance(select, exp.Select):
        return ordered, None
    star = any(
        isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))
        for e in select.expressions
    )
    return ordered, None if star else len(select.expressions)


class _Schema:
    """Per-load view of the catalog: fixtures, prompts and availability for a task's tables."""

    def __init__(
        self, catalog: Catalog, settings: Settings, notes: LoadNotes, prompt_scope: str, revision: str
    ) -> None:
        self.revision = revision
        self.catalog = catalog
        self.settings = settings
        self.notes = notes
        self.prompt_scope = prompt_scope
        self.dialect = dialect_for(settings.database.dialect)
        self.cache = self.dialect.cache_dir(settings.data)

    def _adjust(self, owner: str) -> list[str]:
        """Note the owner's load adjustments once; return why it cannot load, if so."""
        adjust = self.catalog.adjustments(owner)
        if adjust.relaxed and owner not in self.notes.adjustments:
            self.notes.adjustments[owner] = [r.describe() for r in adjust.relaxed]
        if adjust.unloadable:
            self.notes.unloadable[owner] = adjust.unloadable
        return adjust.unloadable

    def describe(self) -> str:
        files = (
            ", ".join(str(p.relative_to(self.notes.root)) for p in self.catalog.ddl_files) or "no DDL file"
        )
        return files

    def resolve(
        self, tables: list[str], db_id: str
    ) -> tuple[tuple[Fixture, ...], str | None, dict[str, Any]]:
        """(fixtures, schema DDL for the prompt, metadata) -- metadata says if it can run."""
        owners = _owners(tables, db_id, self.catalog)
        meta: dict[str, Any] = {"owners": owners, "data_revision": self.revision}
        missing = self.catalog.missing(tables) if tables else []
        known = self.catalog.owners()
        absent_owners = [o for o in owners if o not in known] or ([] if owners else [db_id.upper() or "?"])
        if absent_owners or missing:
            if absent_owners:
                why = f"schema {', '.join(absent_owners)} not in the data ({self.describe()})"
            else:
                why = f"table(s) {', '.join(missing)} not in the data ({self.describe()})"
            meta.update({"not_runnable": why, "schema": "absent", "missing_tables": missing or tables})
            return (), None, meta
        meta["schema"] = "present"
        meta["data_rows"] = sum(self.catalog.data_rows(o) for o in owners)
        unloadable = [why for o in owners for why in self._adjust(o)]
        if unloadable:
            why = f"data error: schema {', '.join(owners)} cannot be loaded: {'; '.join(unloadable)}"
            meta.update({"not_runnable": why, "data_error": True})
            return (), None, meta
        empty = [t for t in (tables or []) if not self.catalog.table_rows(t)]
        if empty and meta["data_rows"]:
            meta["tables_without_rows"] = empty
            for t in empty:
                self.notes.tables_without_rows.setdefault(t.upper(), self.catalog.why_no_rows(t))
        fixtures = []
        for owner in owners:
            fixture, problems = self.dialect.fixture(self.catalog, owner, self.cache)
            fixtures.append(fixture)
            if problems:
                self.notes.schema_problems[owner] = problems
                meta["schema_problems"] = len(problems)
        keys = (
            tables
            if self.prompt_scope == "tables" or not tables
            else [t.key for o in owners for t in self.catalog.owner_tables(o)]
        )
        ddl = self.catalog.ddl_text(keys, self.dialect.table_ddl)
        return tuple(fixtures), ddl or None, meta


# --------------------------------------------------------------------------- subsets
def load(manifest: Manifest, settings: Settings, root: Path) -> tuple[list[Task], LoadNotes]:
    """The tasks of ``manifest`` (loader spider / spider2-st / spider2-mt) from ``root``."""
    loader = manifest.loader
    family = FAMILY[loader]
    catalog = Catalog.spider(root) if family == "spider" else Catalog.spider2(root)
    notes = LoadNotes(
        manifest.name,
        root,
        family,
        [str(p.relative_to(root)) for p in catalog.ddl_files],
        [str(p.relative_to(root)) for p in catalog.dml_files],
    )
    notes.orphan_data = catalog.orphan_data()
    notes.foreign_rows = list(catalog.foreign_rows)
    scope = str(manifest.options.get("schema_prompt", "tables"))
    if scope not in ("tables", "owner"):
        raise DataError(f"{manifest.path}: options.schema_prompt must be 'tables' or 'owner', not {scope!r}")
    # The revision: the release commit, or a digest of every file this subset reads.
    read = [root / rel for rel in DATA_FILES[loader] if (root / rel).is_file()]
    revision = release.data_revision(root, [*read, *catalog.ddl_files, *catalog.dml_files])
    schema = _Schema(catalog, settings, notes, scope, revision)
    if loader == "spider":
        tasks = _spider(manifest, settings, root, schema)
    elif loader == "spider2-st":
        tasks = _spider2_st(manifest, settings, root, schema)
    else:
        tasks = _spider2_mt(manifest, settings, root, schema, notes)
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        raise DataError(f"subset {manifest.name!r}: duplicate instance ids in the data: {dupes[:5]}")
    return tasks, notes


def _spider(manifest: Manifest, settings: Settings, root: Path, schema: _Schema) -> list[Task]:
    path = release.require(root, release.SPIDER1, manifest.name)
    tasks = []
    for rec in release.read_jsonl(path):
        row = rec.data
        iid, question, gold = row.get("instance_id"), row.get("question"), row.get("gold_sql_query")
        if not isinstance(iid, str) or not isinstance(question, str) or not isinstance(gold, str):
            raise DataError(f"{rec.where}: needs string instance_id, question and gold_sql_query")
        tables = list(release.iter_strings(row.get("tables")))
        db_id = str(row.get("db_id") or "")
        fixtures, ddl, meta = schema.resolve(tables, db_id)
        reference = row.get("reference_answer") if isinstance(row.get("reference_answer"), str) else None
        ordered, columns = gold_shape(gold)
        meta.update({"db_id": db_id, "tables": tables, "instance_id": iid})
        prompt, gold_sql, reference = schema.dialect.spider_task(question, gold, reference, meta)
        options: dict[str, Any] = {"gold_sql": gold_sql, "ordered": ordered}
        if columns:
            options["columns"] = columns
        test = UnitTest(id="result", kind="rows", script=None, options=options)
        not_runnable = meta.pop("not_runnable", None)  # the resolver's or translation's verdict: a Task field
        tasks.append(
            Task(
                id=iid,
                subset=manifest.name,
                dialect=settings.database.dialect,
                turns=(Turn(1, prompt.rstrip() + "\n", (test,), reference, source_id=iid),),
                fixtures=fixtures,
                schema_ddl=ddl,
                answer_mode="execute",
                markers=_with_status([], not_runnable),
                metadata=meta,
                not_runnable=not_runnable,
            )
        )
    return tasks


def _tests(row: Mapping[str, Any], where: str) -> tuple[UnitTest, ...]:
    scripts = row.get("tests")
    if not isinstance(scripts, list) or not scripts or not all(isinstance(s, str) for s in scripts):
        raise DataError(f"{where}: 'tests' must be a non-empty list of scripts")
    return tuple(UnitTest(id=f"test-{n}", kind="reference", script=s) for n, s in enumerate(scripts, 1))


def _row_strings(rec: release.Record, *keys: str) -> list[str]:
    values = [rec.data.get(k) for k in keys]
    if not all(isinstance(v, str) and v.strip() for v in values):
        raise DataError(f"{rec.where}: needs non-empty strings {', '.join(keys)}")
    return values  # type: ignore[return-value]


def _spider2_st(manifest: Manifest, settings: Settings, root: Path, schema: _Schema) -> list[Task]:
    path = release.require(root, release.SPIDER2_ST, manifest.name)
    metadata = release.metadata_by_id(root, release.META_ST)
    tasks = []
    for rec in release.read_jsonl(path):
        iid, question, reference = _row_strings(rec, "instance_id", "question", "reference_answer")
        row = rec.data
        tables = list(release.iter_strings(row.get("tables")))
        db_id = str(row.get("db_id") or "")
        fixtures, ddl, meta = schema.resolve(tables, db_id)
        annotation = metadata.get(iid, {})
        constructs, constructs_from = _constructs(annotation, reference)
        meta.update({"db_id": db_id, "tables": tables, "instance_id": iid})
        meta.update(_annotation_meta(annotation, constructs, constructs_from))
        not_runnable = meta.pop("not_runnable", None)  # the resolver's or translation's verdict: a Task field
        tasks.append(
            Task(
                id=iid,
                subset=manifest.name,
                dialect=settings.database.dialect,
                turns=(Turn(1, question.rstrip() + "\n", _tests(row, rec.where), reference, source_id=iid),),
                entry_points=_entry_points(reference),
                fixtures=fixtures,
                schema_ddl=ddl,
                markers=_with_status(_markers(annotation, constructs), not_runnable),
                metadata=meta,
                not_runnable=not_runnable,
            )
        )
    return tasks


def _annotation_meta(
    annotation: Mapping[str, Any], constructs: list[str], source: str | None
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(annotation.get("difficulty"), str):
        out["difficulty"] = annotation["difficulty"]
    if annotation.get("reasoning_types"):
        out["reasoning_types"] = list(release.iter_strings(annotation["reasoning_types"]))
    if annotation.get("source_example_id"):
        out["source_example_id"] = annotation["source_example_id"]
    if constructs:
        out["constructs"] = constructs
        out["constructs_from"] = source
    return out


def _spider2_mt(
    manifest: Manifest, settings: Settings, root: Path, schema: _Schema, notes: LoadNotes
) -> list[Task]:
    path = release.require(root, release.SPIDER2_MT, manifest.name)
    metadata = release.metadata_by_id(root, release.META_MT)
    conversations: dict[str, list[release.Record]] = defaultdict(list)
    for rec in release.read_jsonl(path):
        _row_strings(rec, "instance_id", "conversation_id", "question", "reference_answer")
        if not isinstance(rec.data.get("turn_index"), int):
            raise DataError(f"{rec.where}: 'turn_index' must be an integer")
        conversations[rec.data["conversation_id"]].append(rec)
    tasks = []
    for cid, recs in conversations.items():
        recs.sort(key=lambda r: r.data["turn_index"])
        indexes = [r.data["turn_index"] for r in recs]
        declared = recs[0].data.get("turn_count")
        count = declared if isinstance(declared, int) else len(recs)
        if indexes != list(range(1, count + 1)):
            why = f"conversation {cid}: turns {indexes} of {count} in the data; not collected (incomplete)"
            log.warning("subset %s: %s", manifest.name, why)
            notes.skipped.append(why)
            continue
        turns, tables, db_ids, per_turn, markers = [], [], [], [], []
        hardest = None
        for rec in recs:
            row = rec.data
            annotation = metadata.get(row["instance_id"], {})
            constructs, constructs_from = _constructs(annotation, row["reference_answer"])
            markers += _markers(annotation, constructs)
            difficulty = annotation.get("difficulty")
            if difficulty in DIFFICULTY_ORDER and (
                hardest is None or DIFFICULTY_ORDER.index(difficulty) > DIFFICULTY_ORDER.index(hardest)
            ):
                hardest = difficulty
            per_turn.append(
                {
                    "turn": row["turn_index"],
                    "instance_id": row["instance_id"],
                    **_annotation_meta(annotation, constructs, constructs_from),
                }
            )
            tables += [t for t in release.iter_strings(row.get("tables")) if t not in tables]
            db_ids.append(str(row.get("db_id") or ""))
            turns.append(
                Turn(
                    row["turn_index"],
                    row["question"].rstrip() + "\n",
                    _tests(row, rec.where),
                    row["reference_answer"],
                    source_id=row["instance_id"],
                )
            )
        db_id = db_ids[0]
        fixtures, ddl, meta = schema.resolve(tables, db_id)
        meta.update({"db_id": db_id, "tables": tables, "conversation_id": cid, "turns": per_turn})
        if hardest:
            meta["difficulty"] = hardest
        entry_points = tuple(dict.fromkeys(n for t in turns for n in _entry_points(t.reference)))
        not_runnable = meta.pop("not_runnable", None)  # the resolver's or translation's verdict: a Task field
        tasks.append(
            Task(
                id=cid,
                subset=manifest.name,
                dialect=settings.database.dialect,
                turns=tuple(turns),
                entry_points=entry_points,
                fixtures=fixtures,
                schema_ddl=ddl,
                markers=_with_status(markers, not_runnable),
                metadata=meta,
                not_runnable=not_runnable,
            )
        )
    return tasks
