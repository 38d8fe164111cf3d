"""JUnit XML that CI dashboards show well: one testcase per benchmark item, named by node id.

pytest's junitxml turns ``smoke/clamp_value/below`` into ``name="smoke.clamp_value.below"`` with
an empty classname; dashboards then group every item under one nameless class. On the controller
we set, before junitxml records the report, ``classname`` = the task (``smoke.clamp_value``, plus
``.sample-K``) and ``name`` = the node id, and make sure the ``failure_class`` property reaches the
XML (junitxml takes properties from the *teardown* report, which the call's record never sees).
The ``<testsuite>`` carries the run's metrics as properties (:func:`suite_properties`), so a
dashboard that shows pytest's pass rate shows the benchmark's figures beside it.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping
from typing import Any

import pytest

from ..nodeids import junit_classname

log = logging.getLogger(__name__)

#: pytest's own key for its LogXML plugin object; None (pytest moved it): no --junitxml support to adjust.
_XML_KEY: pytest.StashKey[Any] | None = getattr(importlib.import_module("_pytest.junitxml"), "xml_key", None)


def testcase_attributes(nodeid: str) -> dict[str, str]:
    """``subset/task[/sample-k][/turn-t]/test`` -> classname (task) and name (node id)."""
    return {"classname": junit_classname(nodeid), "name": nodeid}


def decorate(config: pytest.Config, report: pytest.TestReport, failure_class: str | None) -> None:
    """Adjust the junitxml testcase of a benchmark item's report (no-op without --junitxml)."""
    xml: Any = config.stash.get(_XML_KEY, None) if _XML_KEY is not None else None
    if xml is None:
        return
    try:
        reporter = xml.node_reporter(report)
    except Exception as exc:  # noqa: BLE001 - never break a run over report cosmetics
        log.debug("junitxml: cannot adjust %s: %s", report.nodeid, exc)
        return
    # junitxml keeps attributes set before record_testreport (as record_xml_attribute does).
    attrs = testcase_attributes(report.nodeid)
    prefix = getattr(xml, "prefix", None)
    if prefix:  # --junit-prefix
        attrs["classname"] = f"{prefix}.{attrs['classname']}"
    reporter.attrs.update(attrs)
    recorded = any(name == "failure_class" for name, _ in report.user_properties)
    if report.when == "teardown" and failure_class and not recorded:
        report.user_properties.append(("failure_class", failure_class))


def suite_properties(document: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``<testsuite>`` properties: each subset's figures under its metric family's columns, as the
    summary prints them (percent with two decimals, ``1.35x``, counts), how pytest's item counts
    relate to them, and ``plsql.interrupted`` when the run stopped early."""
    from .. import families
    from .table import cell, item_counts

    header = document.get("header") or {}
    props: list[tuple[str, str]] = [("plsql.model", str(header.get("model"))), ("plsql.dialect", str(header.get("dialect")))]
    if header.get("interrupted"):
        props.append(("plsql.interrupted", str(header["interrupted"])))
    counts = item_counts(document)
    for key in ("items", "passed", "failed", "skipped", "judged", "left_out"):
        props.append((f"plsql.items.{key}", str(counts[key])))
    for name, members in families.group_by_family(document.get("subsets") or {}).items():
        family = families.lookup(name)
        for subset, m in members.items():
            props.append((f"plsql.{subset}.tasks", str(m.get("tasks", 0))))
            props.append((f"plsql.{subset}.excluded_tasks", str(len(m.get("excluded_tasks") or []))))
            for column in family.columns:
                if m.get(column.key) is not None:
                    props.append((f"plsql.{subset}.{column.key}", cell(m[column.key], column.unit)))
    return props


def add_suite_properties(config: pytest.Config, document: Mapping[str, Any]) -> None:
    """Hand the suite properties to junitxml (no-op without --junitxml); call before its
    ``pytest_sessionfinish`` writes the file."""
    xml: Any = config.stash.get(_XML_KEY, None) if _XML_KEY is not None else None
    if xml is None:
        return
    for name, value in suite_properties(document):
        xml.add_global_property(name, value)
