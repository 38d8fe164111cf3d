"""Built-in subset loaders (each a small pytest plugin implementing pytest_plsql_load_subset)."""
