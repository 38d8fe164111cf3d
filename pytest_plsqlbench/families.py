"""Metric families: how a subset's tasks become its scores, and how those scores are shown.

A subset's manifest names its family (``metrics: NAME``), or its loader does: a manifest without
``metrics:`` belongs to the registered family whose :attr:`MetricFamily.loaders` hold its
``loader:`` (:mod:`pytest_plsqlbench.manifests`). The results
document (:func:`pytest_plsqlbench.results.build_document`), the end-of-run summary, the HTML
report and ``plsqlbench merge`` ask the family for:

* :meth:`MetricFamily.task_figures` -- per-task figures stored in the task's entry;
* :meth:`MetricFamily.subset_figures` -- the subset's figures (``subsets[name]`` in the document);
* :attr:`MetricFamily.columns` -- the columns of its table (summary and HTML report), each a key
  of the subset figures, with a 95% CI where ``figures["ci"][key]`` exists;
* :meth:`MetricFamily.summary_lines` -- extra lines under the table (per-scenario breakdowns ...);
* :meth:`MetricFamily.document_figures` -- figures that pair subsets of the document (a family's
  subset figures see one subset only; ProcArena's retention needs a Direct and an Interactive one);
* :meth:`MetricFamily.html_sections` -- extra sections of the HTML report (episode timelines ...).

The core scores every task the same way first (:class:`~pytest_plsqlbench.metrics.TaskScores`:
tests judged, excluded and skipped, samples, pass@k's n and c); a family builds on it and on the
task results (:class:`~pytest_plsqlbench.results.record.TaskResult`: their tests carry each item's
``score`` and typed ``extra``).

Families come from the ``pytest_plsql_families`` hook (see :mod:`pytest_plsqlbench.registry`);
outside pytest (``plsqlbench report`` / ``merge``) from the same plug-ins, found through the
``pytest_plsqlbench`` entry points.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from . import registry
from .errors import UsageError
from .protocols import Family

if TYPE_CHECKING:
    from .manifests import Manifest
    from .metrics import TaskScores
    from .results.record import TaskResult

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Column:
    """One column of a family's table: ``key`` in the subset figures, shown under ``label``."""

    key: str
    label: str
    #: ``percent``: a fraction shown as a percentage; ``ratio``: a plain number (e.g. 1.35x);
    #: ``count``: an integer.
    unit: str = "percent"
    #: The HTML chart a ``percent`` column is drawn in: columns of one chart must be comparable
    #: (scores with scores; shares of failure types or of B2 bins in charts of their own).
    #: ``scores`` (:data:`CHARTS`) or a key of the family's ``charts``, or any other title.
    chart: str = "scores"


#: The core's chart titles by :attr:`Column.chart` key; a family adds its own (``Family.charts``).
CHARTS = {"scores": "Scores by subset (%), with 95% CIs"}


@dataclass(frozen=True)
class Leaderboard:
    """What a family tells the leaderboard entry (:mod:`pytest_plsqlbench.reporting.leaderboard`)
    about its site's datasets, the manifests' ``paper.leaderboard`` keys."""

    #: The site's datasets per split (``dev``/``test``): a split's overall needs all of them.
    splits: Mapping[str, tuple[str, ...]]
    #: Keys whose paper figures ran the published assertion blocks (``--plsql-assertions``), and
    #: why a run of them with other assertions does not compare (the refusal's words).
    published_assertions: tuple[str, ...] = ()
    assertions_reason: str = ""
    #: Key -> what an entry with that key's scores always says (its ``note``).
    notes: Mapping[str, str] = field(default_factory=dict)


@dataclass
class SubsetInput:
    """What the core hands a family for one subset."""

    name: str
    results: Sequence[TaskScores]
    #: The subset's scored task results (identity, metadata, tests, task figures), by task id.
    tasks: Sequence[TaskResult]
    #: Failed unit tests and failed analysis units by class, and the judged units.
    failure_tests: Counter[str]
    failure_units: Counter[str]
    units: int
    bootstrap: bool = True


class MetricFamily:
    """A way of scoring and showing subsets; subclass and return it from ``pytest_plsql_families``."""

    name: ClassVar[str] = ""
    columns: ClassVar[tuple[Column, ...]] = ()
    #: The dialect the paper's figures were measured in and how the leaderboard names them: a run
    #: in another dialect does not compare with them. None: no paper figures to compare with.
    paper_dialect: ClassVar[tuple[str, str] | None] = None
    #: Keys of figures computed from more than one results file (ProcArena's ``retention``):
    #: a reader keeps them as stated, never derives them again.
    external_figures: ClassVar[frozenset[str]] = frozenset()
    #: The manifests' ``loader:`` names this family reads: a manifest without ``metrics:`` using
    #: one of them is this family's subset.
    loaders: ClassVar[frozenset[str]] = frozenset()
    #: Source kinds this family names (a manifest's ``source.kind``) -> the core kind each is
    #: (:data:`pytest_plsqlbench.manifests.SOURCE_KINDS`).
    sources: ClassVar[Mapping[str, str]] = {}
    #: The leaderboard's facts about the family's datasets (None: its subsets are not ranked).
    leaderboard: ClassVar[Leaderboard | None] = None
    #: Titles of the family's own charts by :attr:`Column.chart` key.
    charts: ClassVar[Mapping[str, str]] = {}

    def task_figures(self, scores: TaskScores, task: TaskResult) -> dict[str, Any]:
        """Figures of one task (all samples), merged into its entry in the document."""
        return {}

    def subset_figures(self, data: SubsetInput) -> dict[str, Any]:
        """The subset's figures (``subsets[name]``), keyed by this family's column keys and more."""
        raise NotImplementedError

    def summary_lines(self, subsets: Mapping[str, Mapping[str, Any]], verbose: int = 0) -> list[str]:
        """Lines for the end-of-run summary, for the subsets of this family (table first)."""
        from .reporting.table import family_table_lines

        return family_table_lines(self, subsets, cis=verbose >= 0)

    def document_figures(self, subsets: dict[str, dict[str, Any]], tasks: Sequence[Mapping[str, Any]]) -> None:
        """Add figures across subsets to this family's ``subsets`` (in place), once every subset
        is scored; ``tasks`` are all the document's task entries. Default: nothing."""

    def html_sections(self, document: Mapping[str, Any], subsets: Mapping[str, Mapping[str, Any]]) -> list[str]:
        """HTML fragments the report shows after the charts, for this family's ``subsets``."""
        return []


class CoreFamily(MetricFamily):
    """The core's figures alone (App. C of PLSQLBench: Mean Test, Suite, Turn Suite and Episode
    Pass@1, pass@k, bootstrap CIs): a registered family's base, and how a subset that names no
    family (a results file older than ``metric_family``) is scored and shown."""

    columns: ClassVar[tuple[Column, ...]] = (
        Column("mean_test_pass", "Mean Test Pass@1"),
        Column("suite_pass", "Suite Pass@1"),
        Column("turn_suite_pass", "Turn Suite Pass@1"),
        Column("episode_pass", "Episode Pass@1"),
    )

    def task_figures(self, scores: TaskScores, task: TaskResult) -> dict[str, Any]:
        per_sample = [
            {
                "sample": s.sample,
                "test_pass": None if s.excluded else s.test_pass,
                "suite_pass": None if s.excluded else s.suite_pass,
                "turn_suite_pass": s.turn_suite_pass if s.multi_turn and not s.excluded else None,
                "episode_pass": s.episode_pass if s.multi_turn and not s.excluded else None,
                "excluded": s.excluded_reason,
            }
            for s in scores.samples
        ]
        return {**scores.as_dict(), "samples": per_sample}

    def subset_figures(self, data: SubsetInput) -> dict[str, Any]:
        from .metrics import subset_metrics

        m = subset_metrics(data.name, data.results, data.failure_tests, data.failure_units, data.units, data.bootstrap)
        return m.as_dict()


class FamilyRegistry(Mapping[str, Family]):
    """Name -> family (anything implementing the :class:`~pytest_plsqlbench.protocols.Family`
    protocol, :class:`MetricFamily` or not); later additions replace earlier ones of the same name."""

    def __init__(self, families: Iterable[Family] = ()) -> None:
        self._by_name: dict[str, Family] = {}
        self.add(families)

    def add(self, families: Iterable[Family]) -> FamilyRegistry:
        for family in families:
            if not isinstance(family, Family) or not family.name:
                raise TypeError(f"{family!r} is not a Family with a name")
            self._by_name[family.name] = family
        return self

    def __getitem__(self, name: str) -> Family:
        return self._by_name[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def add_installed(self) -> FamilyRegistry:
        """Add the families the ``pytest_plsqlbench`` entry points register that it lacks."""
        return self.add(f for f in registry.outside_pytest().families.values() if f.name not in self._by_name)

    def family(self, name: str | None) -> Family:
        """The family ``name`` (None or "": the core's figures alone, :class:`CoreFamily`); one
        clear error when it is unknown."""
        if not name:
            return CoreFamily()
        if name not in self._by_name:
            self.add_installed()
        if name not in self._by_name:
            raise UsageError(
                f"unknown metric family {name!r} (known: {', '.join(sorted(self._by_name))}); "
                "is the plugin that defines it installed?"
            )
        return self._by_name[name]


#: Every family known to this process: those registered at the run's start, or (outside pytest,
#: on the first name it lacks) those the ``pytest_plsqlbench`` entry points register.
REGISTRY = FamilyRegistry()


def register(families: Iterable[Family]) -> FamilyRegistry:
    """Add the run's registered families (run start; a conftest's replace a plug-in's)."""
    return REGISTRY.add(families)


def get(name: str | None) -> Family:
    return REGISTRY.family(name)


def known() -> list[Family]:
    """Every family known here: the run's, and those installed (the entry points')."""
    return list(REGISTRY.add_installed().values())


def of_manifest(manifest: Manifest) -> Family:
    """The registered family scoring ``manifest``'s subset; one clear error naming its loader when
    the manifest names no family and no registered family reads the loader."""
    if manifest.metrics is None:
        raise UsageError(
            f"no registered family reads loader {manifest.loader!r}: name the subset's family with "
            "'metrics:', or install the plugin that defines it"
        )
    return REGISTRY.family(manifest.metrics)


def lookup(name: str | None) -> Family:
    """The family for showing a document's subsets; the core's (:class:`CoreFamily`), with a
    warning, when the plugin defining ``name`` is not installed here (its figures are still in
    the document)."""
    try:
        return REGISTRY.family(name)
    except UsageError as exc:
        log.warning("%s; showing its subsets with the core's columns", exc)
        return CoreFamily()


def group_by_family(subsets: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Mapping[str, Any]]]:
    """Subsets of a document grouped by their family, in order of first appearance."""
    out: dict[str, dict[str, Mapping[str, Any]]] = {}
    for name, figures in subsets.items():
        out.setdefault(str(figures.get("metric_family") or ""), {})[name] = figures
    return out
