"""The schema-grounded PLSQLBench subsets: Spider-PLSQL, Spider2-ST and Spider2-MT.

Small modules, one concern each: :mod:`.release` reads the official release layout,
:mod:`.schema` turns its DDL/DML into per-owner fixtures, :mod:`.transpile` ports Oracle SQL
to PostgreSQL with sqlglot, :mod:`.plpgsql` translates the published PL/SQL reference blocks,
:mod:`.prompts` restates the output rules for PL/pgSQL, :mod:`.build` makes the tasks,
:mod:`.report` tells what ran and what could not, :mod:`.validate` checks the gold SQL.
"""
