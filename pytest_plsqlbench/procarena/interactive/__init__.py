"""ProcArena Interactive mode (issue 15): the Solver's tools, a budget, the User Simulator, episodes.

Modules: :mod:`.tasks` (Interactive forms of the task files), :mod:`.tools` (the nine actions and
their scratch environment), :mod:`.budget` (budget and price list), :mod:`.simulator` (ledger and
model simulators), :mod:`.episode` (the loop and its record), :mod:`.cache` (whole episodes
cached), :mod:`.play` (options and the generate hook), :mod:`.metrics` (retention, turns,
tokens, tool shares). See docs/procarena-interactive.md.
"""
