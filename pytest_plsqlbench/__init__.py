"""pytest-plsqlbench: PL/SQL code-generation benchmarks as pytest items."""

from .answers import Answer, Exchange
from .tasks import Fixture, Task, Turn, UnitTest

__version__ = "0.1.0"
__all__ = ["Answer", "Exchange", "Fixture", "Task", "Turn", "UnitTest", "__version__"]
