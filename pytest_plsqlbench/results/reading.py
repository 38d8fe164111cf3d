"""Reading, checking and writing results documents: the one reader every report and merge uses.

The document is versioned (:data:`RESULTS_VERSION`); its format, version by version, is in
``docs/reporting.md``. :func:`read_results` reads a file into the typed records of
:mod:`.record`, :func:`read_document` into its document scored again; both give one clear error
for every way a file can be wrong.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from .. import __version__, families
from ..errors import UsageError
from ..outcomes import PASSED
from ..textfiles import read_text
from .document import score
from .record import ResultsFile, ScoredDocument
from .version import RESULTS_FORMAT, RESULTS_VERSION  # re-exported: the reader checks them

#: Header fields that must agree for two documents to be parts of one run (``merge``).
RUN_IDENTITY = (
    "plugin_version",
    "dialect",
    "database",
    "model",
    "model_resolved",
    "answers_digest",
    "temperature",
    "max_tokens",
    "samples",
    "assertions",
    "timeout_s",
    "safety",
    "limit",  # shards of a --plsql-limit run partition one sample: same limit, same seed
    "seed",
)


class ResultsFormatError(UsageError):
    """A file that is not a results document of the version this plugin reads."""


def check_document(doc: Any, source: str = "results") -> dict[str, Any]:
    """Return ``doc`` if it is a current results document, else raise one clear error."""
    if not isinstance(doc, dict) or doc.get("format") != RESULTS_FORMAT:
        raise ResultsFormatError(
            f'{source}: not a pytest-plsqlbench results file (no "format": "{RESULTS_FORMAT}")'
        )
    version = doc.get("version")
    if version != RESULTS_VERSION:
        if isinstance(version, int) and version < RESULTS_VERSION:
            how = (
                f"older (version {version}); re-run the benchmark, or re-score it from the answer cache "
                f"with --plsql-cache-only, to get a version {RESULTS_VERSION} file"
            )
        elif isinstance(version, int):
            how = (
                f"newer (version {version}) than this pytest-plsqlbench {__version__} reads "
                f"(version {RESULTS_VERSION}); upgrade pytest-plsqlbench"
            )
        else:
            how = f"of unknown version {version!r}"
        raise ResultsFormatError(f"{source}: results file is {how}")
    for key in ("header", "subsets", "tasks"):
        if key not in doc:
            raise ResultsFormatError(f"{source}: results file lacks {key!r} (truncated or edited?)")
    _check_header(doc["header"], source)
    if not isinstance(doc["subsets"], dict) or not all(isinstance(m, dict) for m in doc["subsets"].values()):
        raise ResultsFormatError(f"{source}: 'subsets' must map subset names to objects (edited?)")
    if not isinstance(doc["tasks"], list):
        raise ResultsFormatError(f"{source}: 'tasks' must be a list of task entries (edited?)")
    for index, task in enumerate(doc["tasks"]):
        _check_task(task, index, source)
    return doc


_SHARD_TEXT = re.compile(r"^(\d+)/(\d+)$")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_header(header: Any, source: str) -> None:
    def bad(what: str) -> ResultsFormatError:
        return ResultsFormatError(f"{source}: header: {what} (edited?)")

    if not isinstance(header, dict):
        raise bad("not an object")
    shard = header.get("shard")
    if shard is not None:
        m = _SHARD_TEXT.match(shard) if isinstance(shard, str) else None
        if m is None or not 1 <= int(m.group(1)) <= int(m.group(2)):
            raise bad(f"shard {shard!r} is not I/N with 1 <= I <= N")
    subsets = header.get("subsets", [])
    if not isinstance(subsets, list) or not all(isinstance(x, str) for x in subsets):
        raise bad(f"subsets {subsets!r} is not a list of names")
    revisions = header.get("data_revisions") or {}
    if not isinstance(revisions, dict):
        raise bad(f"data_revisions {revisions!r} is not an object")
    samples = header.get("samples")
    if samples is not None and not (_is_int(samples) and samples >= 1):
        raise bad(f"samples {samples!r} is not a positive integer")


def _check_task(task: Any, index: int, source: str) -> None:
    """One task entry: what :func:`build_document` and the reports read from it."""
    where = f"{source}: task entry {index + 1}"
    if not isinstance(task, dict):
        raise ResultsFormatError(f"{where}: not an object (edited?)")
    for key in ("subset", "task_id"):
        if not isinstance(task.get(key), str) or not task[key]:
            raise ResultsFormatError(f"{where}: no {key!r} (a non-empty string is required; edited?)")
    where += f" ({task['subset']}/{task['task_id']})"
    n_turns = task.get("n_turns", 1)
    if not (_is_int(n_turns) and n_turns >= 1):
        raise ResultsFormatError(f"{where}: n_turns {n_turns!r} is not a positive integer")
    if task.get("n_tests") is not None and not (_is_int(task["n_tests"]) and task["n_tests"] >= 0):
        raise ResultsFormatError(f"{where}: n_tests {task['n_tests']!r} is not a count")
    for key in ("tests", "answers"):
        items = task.get(key, [])
        if not isinstance(items, list) or not all(isinstance(x, dict) for x in items):
            raise ResultsFormatError(f"{where}: {key!r} is not a list of objects")
    for n, test in enumerate(task.get("tests", []), 1):
        if not isinstance(test.get("test_id"), str):
            raise ResultsFormatError(f"{where}: test {n} has no 'test_id'")
        turn, sample = test.get("turn", 1), test.get("sample")
        if not (_is_int(turn) and turn >= 1):
            raise ResultsFormatError(f"{where}: test {test['test_id']!r}: turn {turn!r} is not a turn number")
        if sample is not None and not (_is_int(sample) and sample >= 0):
            raise ResultsFormatError(f"{where}: test {test['test_id']!r}: sample {sample!r} is not a count")
        if not isinstance(test.get("passed", False), bool):
            raise ResultsFormatError(f"{where}: test {test['test_id']!r}: 'passed' is not true/false")
        if not isinstance(test.get("failure_class", PASSED), str):
            raise ResultsFormatError(f"{where}: test {test['test_id']!r}: failure_class is not a name")
        score = test.get("score")
        if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))):
            raise ResultsFormatError(f"{where}: test {test['test_id']!r}: score {score!r} is not a number")
    for answer in task.get("answers", []):
        for key in ("turn", "sample"):
            value = answer.get(key)
            if value is not None and not _is_int(value):
                raise ResultsFormatError(f"{where}: an answer's {key} {value!r} is not an integer")
        if not isinstance(answer.get("usage") or {}, dict):
            raise ResultsFormatError(f"{where}: an answer's usage is not an object")


def _load(path: Path) -> dict[str, Any]:
    """The checked document of a results file (one error message for every way it can be wrong)."""
    try:
        text = read_text(path)
    except OSError as exc:
        raise ResultsFormatError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ResultsFormatError(f"{path}: not a results file (not UTF-8 JSON, plain or gzipped: {exc})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResultsFormatError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    return check_document(doc, str(path))


def read_results(path: Path) -> ResultsFile:
    """What a results file saved, as types (a file of another version refused with one message
    naming its version and what to do); its figures are left behind, :func:`.document.score`
    derives them."""
    return ResultsFile.from_json(_load(path))


def read_document(path: Path) -> ScoredDocument:
    """The document of a results file, scored again from its tests (:func:`check_figures`)."""
    return check_figures(_load(path), str(path))


#: Document-level figures derived from the tasks, besides each subset's.
_DERIVED = ("overall", "failure_classes", "failure_units")


def check_figures(doc: dict[str, Any], source: str = "results") -> ScoredDocument:
    """``doc`` with every figure derived again from its tests; one error if the file states
    other figures and was written by this version of the plugin.

    Every report reads the figures (``report``, ``leaderboard``, ``compare``, ``merge``), so none is
    taken from the file: :func:`.document.score` derives them from the saved results, as ``merge``
    always did, and a file whose numbers were edited -- a headline raised, a count made into markup
    for the HTML report -- is refused, never shown. A file of another version may score differently
    (a metric fixed since), so its figures are replaced, not judged; a figure it does not state is
    not asked for. The figures a file cannot give alone (its families'
    :attr:`~pytest_plsqlbench.families.MetricFamily.external_figures`: ProcArena's retention, paired
    with another run's Direct results) are kept as stated."""
    try:
        rebuilt = score(ResultsFile.from_json(doc))
    except (TypeError, ValueError, KeyError, AttributeError, ArithmeticError) as exc:
        raise ResultsFormatError(f"{source}: its tests cannot be scored ({type(exc).__name__}: {exc}) (edited?)") from None
    if set(doc["subsets"]) != set(rebuilt["subsets"]):
        raise ResultsFormatError(f"{source}: its subsets {sorted(doc['subsets'])} are not those of its tests "
                                 f"{sorted(rebuilt['subsets'])} (edited?)")
    outside = _outside_of(doc["subsets"])
    keys = ("subsets", *(k for k in _DERIVED if k in doc))
    stated = {k: doc[k] for k in keys}
    derived = {k: rebuilt[k] for k in keys}
    if doc["header"].get("plugin_version") == __version__:
        given = dict(_leaves(stated))
        for where, want in _leaves(derived):
            if where in given and not outside(where) and not _same(given[where], want):
                raise ResultsFormatError(f"{source}: {'.'.join(map(str, where))} is not what its tests give "
                                         f"({_figure(want)!r}) (edited?)")
    return ScoredDocument({**doc, **_overlay(stated, derived, (), outside), "tasks": rebuilt["tasks"]}, rebuilt.results)


def _outside_of(subsets: Mapping[str, Mapping[str, Any]]) -> Callable[[tuple[Any, ...]], bool]:
    """Whether a figure (its path in the document) is derived from more than this file: a key on
    its path is one of the external figures of the families of the document's subsets."""
    names: set[str] = set()
    for family, _ in families.group_by_family(subsets).items():
        names |= families.lookup(family).external_figures
    return lambda where: any(key in names for key in where)


def _overlay(stated: Any, derived: Any, where: tuple[Any, ...], outside: Callable[[tuple[Any, ...]], bool]) -> Any:
    """``derived``, but what only ``stated`` can know (``outside``) and keys it alone has."""
    if isinstance(stated, dict) and isinstance(derived, dict):
        return {**stated, **{k: _overlay(stated.get(k), v, (*where, k), outside) for k, v in derived.items()}}
    if outside(where) and derived is None:
        return stated
    return derived


def _same(given: Any, want: Any) -> bool:
    if isinstance(given, float) and isinstance(want, float) and given != given and want != want:
        return True  # NaN
    return _figure(given) == _figure(want)


def _leaves(value: Any, where: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, (*where, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _leaves(item, (*where, index))
    else:
        yield where, value


def _figure(value: Any) -> Any:
    """A stored figure as JSON gives it back (floats to 9 significant digits)."""
    return float(f"{value:.9g}") if isinstance(value, float) else value


def write_document(doc: Mapping[str, Any], path: Path) -> None:
    """Write atomically: a reader never sees half a file, even if the run is killed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)  # after a failed write or replace: no stray file beside it
