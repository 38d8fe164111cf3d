"""What the Spider subsets (and PLForge, which runs on Spider's databases) do per dialect.

The release is Oracle's text: DDL, data, gold SQL and reference answers as published. Oracle
runs it as it is; PostgreSQL transpiles it (:mod:`.transpile`, :mod:`.plpgsql`). Callers ask
the :class:`SpiderDialect` :func:`dialect_for` gives instead of comparing dialect names.
"""

from __future__ import annotations

import abc
from pathlib import Path
from typing import Any, ClassVar

from ..datasources import data_cache_dir
from ..errors import UsageError
from ..settings import DataSettings
from ..tasks import Fixture
from .plpgsql import TranslateError, translate_reference
from .prompts import postgres_prompt
from .schema import Catalog, Table, pg_ident
from .transpile import TranspileError, ddl_to_postgres, to_postgres


class SpiderDialect(abc.ABC):
    """The Spider release in one dialect: fixtures, the schema shown in prompts, task texts."""

    #: The dialect's name (``--plsql-dialect``).
    name: ClassVar[str]
    #: What the release's Oracle text is translated into (``plsqlbench validate`` reports how
    #: much of it was), or None when it runs as published.
    translated_to: ClassVar[str | None] = None
    #: The built schemas fold the release's mixed-case names to lower case (PLForge's gold,
    #: which quotes them, needs them renamed back).
    folds_names: ClassVar[bool] = False

    def cache_dir(self, data: DataSettings) -> Path | None:
        """Where built fixtures are cached on disk, or None when they are not built."""
        return None

    @abc.abstractmethod
    def fixture(self, catalog: Catalog, owner: str, cache: Path | None) -> tuple[Fixture, list[str]]:
        """The fixture of ``owner``'s schema and what of the release it leaves out (and why)."""

    @abc.abstractmethod
    def schema_name(self, owner: str) -> str:
        """The schema ``owner``'s tables are in."""

    @abc.abstractmethod
    def table_ddl(self, table: Table, names: frozenset[str]) -> list[str]:
        """``table``'s statements as the prompt shows them ([]: none can be shown)."""

    @abc.abstractmethod
    def spider_task(self, question: str, gold: str, reference: str | None,
                    meta: dict[str, Any]) -> tuple[str, str, str | None]:
        """(prompt, gold SQL, reference) of a Spider-PLSQL question; what could not be
        translated is noted in ``meta`` (``not_runnable`` when the task cannot run: the builder
        makes it the task's :attr:`~pytest_plsqlbench.tasks.Task.not_runnable`)."""


class Oracle(SpiderDialect):
    name = "oracle"

    def fixture(self, catalog: Catalog, owner: str, cache: Path | None) -> tuple[Fixture, list[str]]:
        return catalog.oracle_fixture(owner), []

    def schema_name(self, owner: str) -> str:
        return owner

    def table_ddl(self, table: Table, names: frozenset[str]) -> list[str]:
        return [table.ddl + ";"]

    def spider_task(self, question: str, gold: str, reference: str | None,
                    meta: dict[str, Any]) -> tuple[str, str, str | None]:
        return question, gold.strip().rstrip(";"), reference


class Postgres(SpiderDialect):
    name = "postgres"
    translated_to = "PostgreSQL"
    folds_names = True

    def cache_dir(self, data: DataSettings) -> Path | None:
        return data_cache_dir(data)

    def fixture(self, catalog: Catalog, owner: str, cache: Path | None) -> tuple[Fixture, list[str]]:
        pg = catalog.postgres_fixture(owner, cache)
        return pg.fixture, pg.problems

    def schema_name(self, owner: str) -> str:
        return pg_ident(owner).strip('"')

    def table_ddl(self, table: Table, names: frozenset[str]) -> list[str]:
        try:
            create, alters = ddl_to_postgres(table.ddl, names, pretty=True)
        except TranspileError:
            return []
        return [create + ";", *(a.replace(" NOT VALID", "") + ";" for a in alters)]

    def spider_task(self, question: str, gold: str, reference: str | None,
                    meta: dict[str, Any]) -> tuple[str, str, str | None]:
        gold_sql = gold.strip().rstrip(";")
        try:
            gold_sql = to_postgres(gold)
            meta["gold_transpiled"] = True
        except TranspileError as exc:
            meta["gold_transpiled"] = False
            meta.setdefault("not_runnable", f"the gold SQL does not transpile to PostgreSQL: {exc}")
        if reference is not None:
            try:
                reference = translate_reference(reference)
                meta["reference_translated"] = True
            except TranslateError as exc:
                meta["reference_translated"] = False
                meta["reference_translation_error"] = str(exc)
                reference = None
        return postgres_prompt(question), gold_sql, reference


DIALECTS: dict[str, SpiderDialect] = {d.name: d for d in (Postgres(), Oracle())}


def dialect_for(name: str) -> SpiderDialect:
    """The Spider adapter of dialect ``name``; UsageError naming the supported ones otherwise."""
    try:
        return DIALECTS[name]
    except KeyError:
        raise UsageError(f"the Spider databases have no adapter for dialect {name!r} "
                         f"(they run on {', '.join(DIALECTS)})") from None
