"""The HTML report fits a 1,280 px window for every family, and its charts plot like with like.

Measured in headless Chromium (Debian's package, as in tests/test_report.py): the page's
``document.documentElement.scrollWidth`` after layout, in a 1,280 px wide window, for a report of
each family from a real run -- smoke (PLSQLBench family), Spider on the shared excerpt, and
ProcArena Direct with a B2 task plus Interactive -- and for a document full of long unbroken
text (a hostile answer, long ids). Wide tables scroll inside their own box, never the page.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_plsqlbench import families
from pytest_plsqlbench.reporting.render import html
from pytest_plsqlbench.results import build_document

from test_report import Elements, chromium, dump_dom
from test_results import HEADER, PAPER, sample_tasks
from test_results_e2e import _env, smoke_run

REPO = Path(__file__).resolve().parent.parent
WINDOW = 1280
#: Appended to a copy of the page: the widths the test reads back from the dumped DOM.
MEASURE = (
    "<script>(function(){var d=document.documentElement;d.setAttribute('data-scroll-width',d.scrollWidth);"
    "d.setAttribute('data-client-width',d.clientWidth);"
    "var wide=[];document.querySelectorAll('table').forEach(function(t){"
    "if(t.scrollWidth>t.clientWidth+1)wide.push(t.id||'?');});d.setAttribute('data-scrolling-tables',wide.join(' '));"
    "})();</script>"
)


def layout(browser: str, page: Path) -> dict[str, str]:
    """The page's widths after layout in a 1,280 px window (``data-*`` of the root element)."""
    measured = page.with_name(page.stem + ".measured.html")
    measured.write_text(page.read_text(encoding="utf-8").replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    dom = dump_dom(browser, measured.resolve().as_uri(), f"--window-size={WINDOW},900")
    (root,) = Elements(dom).find("html")
    assert "data-scroll-width" in root, "the measuring script did not run"
    return root


def assert_fits(browser: str, page: Path) -> dict[str, str]:
    got = layout(browser, page)
    assert int(got["data-scroll-width"]) <= WINDOW, f"{page.name}: {got['data-scroll-width']} px wide in a {WINDOW} px window"
    assert int(got["data-scroll-width"]) <= int(got["data-client-width"]), got  # no horizontal scroll at page level
    return got


def run_pytest(folder: Path, *args: str) -> dict[str, Any]:
    """A real run in ``folder``; its results document."""
    out = folder / "r.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--plsql-cache", str(folder / "cache"),
         "--plsql-model=reference", f"--plsql-results={out}", "-q", *args],
        cwd=folder, env=_env(), capture_output=True, text=True, timeout=900,
    )
    assert out.is_file(), proc.stdout[-3000:] + proc.stderr[-2000:]
    return json.loads(out.read_text())


def report(folder: Path, document: dict[str, Any], name: str) -> Path:
    page = folder / f"{name}.html"
    page.write_text(html(document), encoding="utf-8")
    return page


def bars(dom: Elements, chart: str) -> set[str]:
    return {b["data-metric"] for b in dom.find("rect", class_="bar") if b.get("data-chart") == chart}


@pytest.fixture(scope="module")
def procarena_document(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """ProcArena Direct (an A1, a B2 and a B3 task) and Interactive, with the reference answers
    (B2 measured in one round: the page's layout, not the timing, is under test)."""
    folder = tmp_path_factory.mktemp("procarena")
    return run_pytest(folder, "--plsql-tasks", str(REPO / "tasks"), "--subset",
                      "procarena-sample,procarena-sample-interactive", "--plsql-task",
                      "postgres_a1_000,postgres_b2_000,postgres_b3_000", "--plsql-b2-repeats=1", "-n", "2")


@pytest.mark.slow
def test_smoke_report_fits_the_window(tmp_path: Path) -> None:
    browser = chromium()
    assert_fits(browser, report(tmp_path, smoke_run()["doc"], "smoke"))


@pytest.mark.slow
def test_spider_report_fits_the_window(tmp_path: Path, shared_data: Path) -> None:
    browser = chromium()
    doc = run_pytest(tmp_path, "--subset", "spider", "--plsql-dialect=postgres",
                     f"--plsql-data={shared_data / 'plsqlbench-spider-sample'}", "-n", "0",
                     "--plsql-keep-constant-tasks")
    assert doc["subsets"]["spider"]["tasks"] == 22
    assert_fits(browser, report(tmp_path, doc, "spider"))


@pytest.mark.slow
def test_procarena_reports_fit_the_window_and_chart_like_with_like(
    tmp_path: Path, procarena_document: dict[str, Any]
) -> None:
    browser = chromium()
    doc = procarena_document
    assert doc["subsets"]["procarena-sample"]["b2"]["tasks"] == 1  # the B2 task was measured
    page = report(tmp_path, doc, "procarena")
    got = assert_fits(browser, page)
    # The subset table (every EX, failure-type and B2 column) is wider than the page: it scrolls in its own box.
    assert "subsets" in got["data-scrolling-tables"].split()
    dom = Elements(page.read_text())
    family = families.get("procarena")
    kinds = {c.key: c.chart for c in family.columns if c.unit == "percent"}
    scores = bars(dom, "scores")
    assert scores and all(kinds[m] == "scores" for m in scores), scores
    assert "ex" in scores and not any(m.startswith(("type_", "b2_bin_")) for m in scores)
    assert bars(dom, "failure_types") == {f"type_{t}" for t in ("schema", "contract", "exception", "control_flow", "state_effect")}
    assert bars(dom, "b2_bins") and all(m.startswith("b2_bin_") for m in bars(dom, "b2_bins"))
    # The B2 chart shows only the subset that has B2 tasks.
    assert {b["data-group"] for b in dom.find("rect", class_="bar") if b.get("data-chart") == "b2_bins"} == {
        "procarena-sample"}
    # Each mode alone: Direct with B2, and Interactive.
    for name in ("procarena-sample", "procarena-sample-interactive"):
        part = {**doc, "subsets": {name: doc["subsets"][name]}, "tasks": [t for t in doc["tasks"] if t["subset"] == name]}
        assert_fits(browser, report(tmp_path, part, name))


def test_long_unbroken_text_wraps_or_scrolls_inside_its_box(tmp_path: Path) -> None:
    """A hostile answer (one 5,000-character token), a long subset name and long messages."""
    browser = chromium()
    tasks = sample_tasks()
    token = "x" * 5000
    for t in tasks:
        t["task_id"] = t["task_id"] + "-" + "y" * 300
        for a in t.get("answers", []):
            a["code"] = token
            a["raw"] = token
        for x in t["tests"]:
            x["message"] = token
            if not x.get("passed"):
                x["expected"], x["actual"] = [token], [token]
    doc = build_document(HEADER, tasks, PAPER)
    assert_fits(browser, report(tmp_path, doc, "hostile"))


def test_share_columns_are_charted_apart_from_scores() -> None:
    """A 0 % run whose failures are all of one type: the full bar is in the failure-type chart,
    the scores chart holds scores only (issue 29: "the only full bar is Contract")."""
    from pytest_plsqlbench.procarena.metrics import ProcArenaFamily

    family = ProcArenaFamily()
    by_kind: dict[str, list[str]] = {}
    for c in family.columns:
        if c.unit == "percent":
            by_kind.setdefault(c.chart, []).append(c.key)
    assert set(by_kind) == {"scores", "failure_types", "b2_bins"}
    figures: dict[str, Any] = {"metric_family": "procarena", "tasks": 2, "tests": 4}
    figures.update({k: 0.0 for k in by_kind["scores"]})
    figures.update({k: (1.0 if k == "type_contract" else 0.0) for k in by_kind["failure_types"]})
    document = {"header": HEADER, "subsets": {"interactive-run": figures}, "tasks": []}
    dom = Elements(html(document))
    full = [b for b in dom.find("rect", class_="bar") if float(b["data-value"]) == 100.0]
    assert [(b["data-chart"], b["data-metric"]) for b in full] == [("failure_types", "type_contract")]
    assert bars(dom, "scores") == set(by_kind["scores"])
    assert not bars(dom, "b2_bins")  # no B2 figures: no empty chart
    titles = [s["id"] for s in dom.find("svg", class_="chart")]
    assert titles == ["chart-subsets", "chart-failure_types"]
    # Each chart is titled by whoever owns its kind: the core the scores, the family its shares.
    assert "<title>Scores by subset (%), with 95% CIs</title>" in html(document)
    assert "<title>Failure types (% of tasks)</title>" in html(document)
