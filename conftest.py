"""Root conftest: the project's own tests drive the plugin through pytester subprocesses."""

pytest_plugins = ["pytester"]
