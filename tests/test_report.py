"""``plsqlbench report``: the text summary again, Markdown, and HTML that headless Chromium renders."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import pytest
from test_results import HEADER, PAPER, sample_tasks
from test_results_e2e import smoke_run

from pytest_plsqlbench.cli import main
from pytest_plsqlbench.reporting.render import html, markdown
from pytest_plsqlbench.results import build_document, write_document
from pytest_plsqlbench.summary import summary_lines

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
)


def chromium() -> str:
    """Debian's chromium; a clear failure where the suite requires it (CI), a skip elsewhere."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path:
        return path
    why = "headless Chromium is not installed (Debian: apt-get install -y chromium)"
    if os.environ.get("PLSQLBENCH_REQUIRE_CHROMIUM", "").strip() not in ("", "0"):
        pytest.fail(f"{why}; PLSQLBENCH_REQUIRE_CHROMIUM is set, so the HTML report test must run")
    pytest.skip(f"{why}; set PLSQLBENCH_REQUIRE_CHROMIUM=1 to make this a failure")


def rendered_dom(browser: str, page: Path) -> str:
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        proc = subprocess.run(
            [browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.resolve().as_uri()],
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert proc.returncode == 0 and "<html" in proc.stdout, proc.stderr[-2000:]
    return proc.stdout


class Elements(HTMLParser):
    """Every start tag of a document with its attributes, and the text of table cells."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.rows: dict[str, list[list[str]]] = {}
        self._table: list[str] = []
        self._cell: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        self.tags.append((tag, a))
        if tag == "table":
            self._table.append(a.get("id", ""))
        elif tag == "tr" and self._table:
            self.rows.setdefault(self._table[-1], []).append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "table" and self._table:
            self._table.pop()
        elif tag in ("td", "th") and self._cell is not None and self._table:
            self.rows[self._table[-1]][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)

    def find(self, tag: str, **attrs: str) -> list[dict[str, str]]:
        return [
            a
            for t, a in self.tags
            if t == tag and all(a.get(k.rstrip("_").replace("_", "-")) == v for k, v in attrs.items())
        ]


# --------------------------------------------------------------------------- HTML in a browser
@pytest.mark.slow
def test_html_report_renders_in_headless_chromium_with_table_and_chart(tmp_path: Path) -> None:
    browser = chromium()
    run = smoke_run()
    page = tmp_path / "report.html"
    assert main(["report", str(run["results"]), "--format", "html", "-o", str(page)]) == 0
    dom = Elements(rendered_dom(browser, page))
    smoke = run["doc"]["subsets"]["smoke"]
    # The subset table: one row per subset, with its numbers.
    subset_rows = dom.find("tr", class_="subset-row")
    assert [r["data-subset"] for r in subset_rows] == ["smoke"]
    header, row = dom.rows["subsets"][0], dom.rows["subsets"][1]
    assert header[:5] == ["Subset", "Tasks", "Tests", "Samples", "Mean Test Pass@1"]
    assert row[:3] == ["smoke", str(smoke["tasks"]), str(smoke["tests"])]
    assert row[4].startswith(f"{100 * smoke['mean_test_pass']:.2f} [")
    # The chart: an inline SVG with one bar per metric of the subset, sized by its value.
    assert dom.find("svg", id="chart-subsets")
    bars = {b["data-metric"]: b for b in dom.find("rect", class_="bar")}
    assert set(bars) == {"mean_test_pass", "suite_pass", "turn_suite_pass", "episode_pass"}
    for metric, bar in bars.items():
        assert float(bar["data-value"]) == pytest.approx(100 * smoke[metric], abs=0.01)
    assert float(bars["mean_test_pass"]["width"]) > float(bars["suite_pass"]["width"])
    # Failures, breakdowns (smoke tasks carry difficulty and construct metadata), the task list.
    assert dom.rows["failures"][1][0] == "smoke"
    assert {r[0] for r in dom.rows["by-difficulty"][1:]} >= {"simple", "intermediate"}
    assert len(dom.rows["tasks"]) - 1 == len(run["doc"]["tasks"])
    # Nothing is fetched when the page is viewed.
    assert not [
        a for _, a in dom.tags for k in ("src", "href") if a.get(k, "").startswith(("http:", "https:", "//"))
    ]


# --------------------------------------------------------------------------- text and Markdown
@pytest.mark.slow
def test_report_reprints_the_runs_terminal_summary(capsys: pytest.CaptureFixture[str]) -> None:
    run = smoke_run()
    assert main(["report", str(run["results"])]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed and all(line in run["stdout"].splitlines() for line in printed), printed


def test_text_report_matches_the_summary_and_honours_quiet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = build_document(HEADER, sample_tasks(), PAPER)
    path = tmp_path / "r.json"
    write_document(doc, path)
    assert main(["report", str(path)]) == 0
    assert capsys.readouterr().out.splitlines() == summary_lines(doc, 0)
    assert main(["report", str(path), "-q"]) == 0
    assert capsys.readouterr().out.splitlines() == summary_lines(doc, -1)
    assert main(["report", str(path), "--detailed"]) == 0
    assert "failed unit tests by class" in capsys.readouterr().out


def test_markdown_report_has_tables_breakdowns_chart_and_failing_tests(tmp_path: Path) -> None:
    doc = build_document(HEADER, sample_tasks(), PAPER)
    path = tmp_path / "r.json"
    write_document(doc, path)
    out = tmp_path / "report.md"
    assert main(["report", str(path), "--format", "markdown", "-o", str(out)]) == 0
    text = out.read_text()
    assert text == markdown(doc)
    assert "| mbpp | 3 | 8 | 1 | 66.67 [" in text
    assert "## By difficulty" in text and "| simple | 2 | 83.33 | 50.00 |" in text
    assert "## By reasoning type" in text and "| aggregation | 1 |" in text
    assert (
        '<svg id="chart-subsets"' in text and text.count('class="bar"') == 2 + 4
    )  # mbpp: mean, suite; s2mt: all four
    assert "- **mbpp/m2**" in text and "`case-1` (invalid_artifact)" in text
    assert "mbpp: compare Suite Pass@1 with leaderboard 'mbpp'" in text


def test_html_report_is_self_contained() -> None:
    page = html(build_document(HEADER, sample_tasks(), PAPER))
    dom = Elements(page)
    assert [r["data-subset"] for r in dom.find("tr", class_="subset-row")] == ["mbpp", "s2mt"]
    # One inline script (sorting, filtering), nothing loaded: no src, no link, no image.
    assert [a for t, a in dom.tags if t == "script"] == [{}]
    assert not dom.find("link") and not dom.find("img")
    assert "<style>" in page and "fetch(" not in page and "XMLHttpRequest" not in page


def test_report_of_an_old_file_fails_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "old.json"
    path.write_text(
        '{"format": "pytest-plsqlbench/results", "version": 1, "header": {}, "subsets": {}, "tasks": []}'
    )
    assert main(["report", str(path), "--format", "html", "-o", str(tmp_path / "x.html")]) == 2
    assert "results file is older (version 1)" in capsys.readouterr().err
    assert not (tmp_path / "x.html").exists()
