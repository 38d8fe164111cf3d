"""Reports built from a results document: statistics, renderings, leaderboard entries, merges.

Everything here works on the JSON document that ``--plsql-results`` writes (see
:mod:`pytest_plsqlbench.results`), so it runs without pytest, a database or the task data.
"""
