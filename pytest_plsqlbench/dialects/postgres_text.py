"""How psql and the server read a PostgreSQL script, and what the safety check knows of its namespaces."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from pglast import parser as pg_parser

from ..lexicon import Lexicon, SafetyRules


def _statement_slices(text: str) -> Sequence[slice]:
    """The statements of ``text`` as slices, from the scanner in C (pglast's annotation says
    strings whatever ``only_slices`` asks for)."""
    return cast("Sequence[slice]", pg_parser.split(text, with_parser=False, only_slices=True))


#: PostgreSQL's own scanner reads every token (strings with ``standard_conforming_strings`` on,
#: ``E''``/``U&''``, nested comments, dollar-quoted bodies) as the server will; its C splitter
#: cuts megabyte data fixtures.
POSTGRES_LEXICON = Lexicon(
    scanner=pg_parser.scan,
    slices=_statement_slices,
    dollar_quotes=True,
    backslash_commands=True,
    fence_names=frozenset({"pgsql", "plpgsql", "pl/pgsql", "pl-pgsql", "postgres", "postgresql", "psql"}),
)
#: Answers create their objects in the candidate's schema ``answers`` (first on the search path;
#: ``pg_temp`` for temporary ones); ``public.f`` names the entry point ``f`` too.
POSTGRES_SAFETY = SafetyRules(
    scratch_schemas=frozenset({"answers", "pg_temp"}),
    default_schemas=frozenset({"public"}),
    create_schema_is_elsewhere=True,
    objects_live_in_scratch=True,
    routine_bodies_are_dynamic=True,
)
