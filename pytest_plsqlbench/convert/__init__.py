"""Rule-based Python-to-PL/SQL conversion of MBPP and MBPP+ (PLSQLBench App. B.5).

``convert_file(source, path, dialect, subset=...)`` reads evalplus MBPP+, sanitized MBPP or
PLSQLBench's MBPP-PLSQL and returns a :class:`ConversionResult` with one
:class:`~pytest_plsqlbench.tasks.Task` per convertible record, and a reason for every
rejected record and every dropped test case.
"""

from .model import ConversionResult, DroppedCase, Rejection
from .pipeline import CONVERTER_VERSION, convert_file

__all__ = ["CONVERTER_VERSION", "ConversionResult", "DroppedCase", "Rejection", "convert_file"]
