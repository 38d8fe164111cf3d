"""JUnit XML that CI dashboards show well: one testcase per benchmark item, named by node id.

pytest's junitxml turns ``smoke/clamp_value/below`` into ``name="smoke.clamp_value.below"`` with
an empty classname; dashboards then group every item under one nameless class. On the controller
we set, before junitxml records the report, ``classname`` = the task (``smoke.clamp_value``, plus
``.sample-K``) and ``name`` = the node id, and make sure the ``failure_class`` property reaches the
XML (junitxml takes properties from the *teardown* report, which the call's record never sees).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from ..nodeids import junit_classname

log = logging.getLogger(__name__)

try:  # pytest's own key for its LogXML plugin object; absent means no --junitxml support to adjust.
    from _pytest.junitxml import xml_key as _XML_KEY
except ImportError:  # pragma: no cover - pytest moved it
    _XML_KEY = None


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
