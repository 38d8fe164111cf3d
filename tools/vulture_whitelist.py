"""Names vulture cannot see used: `vulture` (its configuration in pyproject.toml) reads this file
beside the package. Never imported or run: each line only *uses* a name, with why it is used.

Hook implementations (``pytest_*`` functions and methods) are left out by ``ignore_names`` in
pyproject.toml instead: pytest and pluggy call every ``pytest_*`` member of a plug-in by name.
Anything else vulture reports is dead: delete it rather than add it here.
"""

# ruff: noqa: B018, F821 -- bare names and attributes are what vulture counts as uses

# pytest's Node API: pytest calls these on our collectors and items (collect.py).
_.collect
_.runtest
_.reportinfo

# xdist's Scheduling protocol: xdist's DSession calls these on TaskScheduling (scheduler.py);
# `duration` is the protocol's parameter of mark_test_complete.
_.tests_finished
_.has_pending
_.add_node
_.add_node_collection
_.remove_node
_.mark_test_complete
_.remove_pending_tests_from_node
_.schedule
duration

# Attributes a driver or library reads: oracledb's connection options (dialects/oracle/),
# litellm's module switches (generation/client.py).
_.outputtypehandler
_.call_timeout
_.suppress_debug_info
_.telemetry

# Registered with atexit: kills the copies' servers this process started (dialects/pg_pristine.py).
_kill_live

# Dataclass fields read through the dataclass, not by name: compared by equality
# (dialects/oracle/janitor.py ObjectState: a snapshot's object changed), serialised with
# asdict/fields into JSON (procarena/interactive/episode.py EpisodeRecord, the results' usage;
# tasks.py Turn.source_id, the converted tasks' cache).
object_id
last_ddl
final_turn
requests
fallback_answers
source_id

# Interactive ProcArena's tools, dispatched by name: getattr(self, "_" + tool) (procarena/interactive/tools.py).
_._get_schema
_._describe_table
_._sample_rows
_._execute_scratch
_._compile_plsql
_._reset_scratch

# Read by the tests to see what the harness did: the objects an answer left (the Oracle janitor's
# and the PostgreSQL scratch schema's checks), the model requests a run made, the rows a Spider
# fixture loaded, the vocabulary every dropped MBPP case's reason must belong to.
_.candidate_objects
_.scratch_objects
_.requests
rows_loaded
CASE_REASONS
