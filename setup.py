"""Package list for setuptools (metadata lives in pyproject.toml).

The repository keeps ``tasks/`` and ``fixtures/`` at the top level, where people read and
write them; the wheel ships them inside the package as ``pytest_plsqlbench/bundled_tasks`` and
``pytest_plsqlbench/bundled_fixtures`` (mapped in pyproject's ``package-dir``).
"""

from setuptools import find_packages, setup

setup(packages=find_packages(include=["pytest_plsqlbench*"]) + ["pytest_plsqlbench.bundled_tasks", "pytest_plsqlbench.bundled_fixtures"])
