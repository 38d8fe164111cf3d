"""``plsqlbench report``: the text summary again, Markdown, and HTML that headless Chromium renders."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from pytest_plsqlbench.cli import main
from pytest_plsqlbench.reporting.render import html, markdown
from pytest_plsqlbench.results import TaskResult, build_document, write_document
from pytest_plsqlbench.summary import summary_lines

from test_results import HEADER, PAPER, sample_tasks, task
from test_results_e2e import smoke_run

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-dev-shm-usage",  # containers: a small /dev/shm
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


def dump_dom(browser: str, url: str, *flags: str) -> str:
    """The DOM headless Chromium leaves after ``url``'s scripts ran; a page that fails to render
    fails the test. (Chromium reserves far more address space than it uses: it dies at start, by
    SIGTRAP, under a lowered RLIMIT_AS such as the one each embedded server gets --
    test_pristine.py holds that this process's own limit is never lowered for that.)"""
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        proc = subprocess.run(
            [browser, *CHROMIUM_FLAGS, *flags, f"--user-data-dir={profile}", "--dump-dom", url],
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert proc.returncode == 0 and "<html" in proc.stdout, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    return proc.stdout


def rendered_dom(browser: str, page: Path, fragment: str = "") -> str:
    """The DOM after the page's script ran; ``fragment`` is the address's ``#...`` part."""
    return dump_dom(browser, page.resolve().as_uri() + fragment)


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


# --------------------------------------------------------------------------- drill-down, order, filter
def audited_tasks() -> list[dict]:
    """Tasks whose ids sort differently as text and as numbers, with prompts, answers and scripts."""
    out = []
    for n, ok in ((100, True), (11, False), (2, False), (3, True)):
        t = task("mbpp", f"Mbpp/{n}", [[True, ok]], metadata={"difficulty": "simple"})
        t["prompts"] = [f"Write a function for problem {n} & return <x>."]
        t["answers"][0]["code"] = f"CREATE FUNCTION f{n}() ..."
        if n == 11:
            t["answers"][0]["raw"] = "Sure! ```sql\nCREATE FUNCTION f11() ...\n```"
        for x in t["tests"]:
            x["script"] = f"SELECT f{n}(ARRAY[1,2,{n}]);"
            if not x["passed"]:
                x.update(expected=["42"], actual=["<NULL>"], message="expected '42', got <NULL>")
        out.append(t)
    out[2]["tests"][1]["failure_class"] = "invalid_artifact"  # Mbpp/2
    return out


def test_html_tasks_are_in_natural_order_with_filter_options_by_class() -> None:
    page = html(build_document({**HEADER, "subsets": ["mbpp"]}, audited_tasks(), PAPER))
    dom = Elements(page)
    rows = dom.find("tr", class_="task-row")
    assert [r["data-task"] for r in rows] == ["mbpp/Mbpp/2", "mbpp/Mbpp/3", "mbpp/Mbpp/11", "mbpp/Mbpp/100"]
    assert [r["data-classes"] for r in rows] == ["invalid_artifact", "passed", "wrong_output", "passed"]
    options = [a["value"] for t, a in dom.tags if t == "option"]
    assert options == ["", "passed", "invalid_artifact", "wrong_output"]
    # Numeric columns sort by value, not by their text.
    assert [r[3] for r in dom.rows["tasks"][1:]] == ["50.00", "100.00", "50.00", "100.00"]
    assert 'data-v="0.5"' in page and 'data-v="1.0"' in page
    # Markdown lists them in the same order.
    text = markdown(build_document({**HEADER, "subsets": ["mbpp"]}, audited_tasks(), PAPER))
    assert text.index("| Mbpp/2 |") < text.index("| Mbpp/11 |") < text.index("| Mbpp/100 |")


def test_html_drill_down_shows_prompt_answer_raw_reply_and_failing_tests() -> None:
    page = html(build_document({**HEADER, "subsets": ["mbpp"]}, audited_tasks(), PAPER))
    dom = Elements(page)
    details = {a["id"]: a for a in dom.find("details", class_="task-detail")}
    assert list(details) == ["task-mbpp/Mbpp/2", "task-mbpp/Mbpp/3", "task-mbpp/Mbpp/11", "task-mbpp/Mbpp/100"]
    assert dom.find("a", href="#task-mbpp/Mbpp/11")
    section = page[page.index('id="task-mbpp/Mbpp/11"') : page.index('id="task-mbpp/Mbpp/100"')]
    assert "Write a function for problem 11 &amp; return &lt;x&gt;." in section  # escaped, whole
    assert '<pre class="answer">CREATE FUNCTION f11() ...</pre>' in section
    assert "The model's raw reply" in section and "Sure! ```sql" in section
    assert section.count('class="failing-test"') == 1
    assert '<pre class="input">SELECT f11(ARRAY[1,2,11]);</pre>' in section
    assert '<pre class="expected">42</pre>' in section and '<pre class="actual">&lt;NULL&gt;</pre>' in section
    passing = page[page.index('id="task-mbpp/Mbpp/100"') :]
    assert 'class="failing-test"' not in passing.split("</details>")[0]
    assert "raw reply" not in page[page.index('id="task-mbpp/Mbpp/3"') : page.index('id="task-mbpp/Mbpp/11"')]


def test_chart_values_stand_clear_of_bars_and_whiskers() -> None:
    from pytest_plsqlbench.reporting.chart import bar_chart

    groups = [("a-long-subset-name", {"mean_test_pass": 0.6, "suite_pass": 0.95}, {"mean_test_pass": (0.4, 0.8), "suite_pass": (0.9, 1.0)})]
    dom = Elements(bar_chart(groups, {"mean_test_pass": "Mean Test Pass@1", "suite_pass": "Suite Pass@1"}))
    whiskers = {p["data-metric"]: float(p["data-x2"]) for p in dom.find("path", class_="ci")}
    bars = {b["data-metric"]: float(b["x"]) + float(b["width"]) for b in dom.find("rect", class_="bar")}
    values = {v["data-metric"]: float(v["x"]) for v in dom.find("text", class_="value")}
    assert set(values) == {"mean_test_pass", "suite_pass"}
    for metric, x in values.items():
        assert x > whiskers[metric] and x > bars[metric]
    svg = dom.find("svg")[0]
    assert values["suite_pass"] + 40 <= float(svg["width"])  # "100.0" fits inside the picture
    assert int(svg["font-size"]) >= 13 and float(dom.find("rect", class_="bar")[0]["height"]) >= 16


def test_breakdown_pools_small_labels_and_keeps_the_acronym_capitalised() -> None:
    from pytest_plsqlbench.reporting.breakdown import DIMENSIONS, MIN_TASKS_PER_ROW, breakdown

    construct = DIMENSIONS[2]
    assert construct.heading == "By PL/SQL construct" and DIMENSIONS[0].heading == "By difficulty"
    tasks = []
    for n in range(12):  # "loop" on 4 tasks, "cursor" on 3, ten labels on one task each
        labels = [f"c{n}"] + (["loop"] if n < 4 else []) + (["cursor"] if 4 <= n < 7 else [])
        figures = {"test_pass": 1.0 if n % 2 else 0.0, "suite_pass": 0.0}
        tasks.append(TaskResult("s", str(n), metadata={"plsql_constructs": labels}, figures=figures))
    rows = breakdown(tasks, construct)
    assert [r["label"] for r in rows[:2]] == ["loop", "cursor"]
    assert len(rows) == 3 and rows[2]["label"].startswith("other (12 labels of < 3 tasks each: c0, c1, c10")
    assert rows[2]["tasks"] == 12 and rows[2]["mean_test_pass"] == pytest.approx(0.5)
    assert all(r["tasks"] >= MIN_TASKS_PER_ROW for r in rows)
    few = breakdown(tasks[:3], construct)  # few labels: every one keeps its row
    assert len(few) == 4 and {r["label"] for r in few} == {"c0", "c1", "c2", "loop"}
    page = html(build_document(HEADER, sample_tasks(), PAPER))
    assert "By pL/SQL" not in page


def test_html_report_filters_sorts_and_opens_a_task_in_headless_chromium(tmp_path: Path) -> None:
    """The inline script at work: a filter by class, a sort by a column, one task opened -- each
    from the address's fragment, as a link to that view would give it."""
    browser = chromium()
    page = tmp_path / "report.html"
    page.write_text(html(build_document({**HEADER, "subsets": ["mbpp"]}, audited_tasks(), PAPER)))

    def visible(dom: Elements) -> list[str]:
        return [r["data-task"] for r in dom.find("tr", class_="task-row") if "hidden" not in r]

    plain = Elements(rendered_dom(browser, page))
    assert visible(plain) == ["mbpp/Mbpp/2", "mbpp/Mbpp/3", "mbpp/Mbpp/11", "mbpp/Mbpp/100"]
    assert not [d for d in plain.find("details", class_="task-detail") if "open" in d]

    wrong = Elements(rendered_dom(browser, page, "#class=wrong_output"))
    assert visible(wrong) == ["mbpp/Mbpp/11"]
    assert "1 of 4 tasks shown" in rendered_dom(browser, page, "#class=wrong_output")

    # Column 3 is the test pass: descending, the passing tasks first, then Mbpp/2 and Mbpp/11 in natural order.
    by_pass = Elements(rendered_dom(browser, page, "#sort=3&desc"))
    assert visible(by_pass)[:2] == ["mbpp/Mbpp/3", "mbpp/Mbpp/100"] or visible(by_pass)[:2] == ["mbpp/Mbpp/100", "mbpp/Mbpp/3"]
    assert set(visible(by_pass)[2:]) == {"mbpp/Mbpp/2", "mbpp/Mbpp/11"}
    assert by_pass.find("table", id="tasks")[0]["data-sorted"] == "3-desc"
    by_id = Elements(rendered_dom(browser, page, "#sort=1&desc"))
    assert visible(by_id) == ["mbpp/Mbpp/100", "mbpp/Mbpp/11", "mbpp/Mbpp/3", "mbpp/Mbpp/2"]  # natural, reversed

    opened = Elements(rendered_dom(browser, page, "#task-mbpp/Mbpp/11"))
    assert [d["id"] for d in opened.find("details", class_="task-detail") if "open" in d] == ["task-mbpp/Mbpp/11"]


def test_answer_text_in_the_markdown_report_renders_as_nothing_but_text() -> None:
    """A failing test's message is the answer's: raw HTML, links and escape sequences in it
    must not come alive where the Markdown is rendered (a CI job summary)."""
    tasks = sample_tasks()
    hostile = "<img src=x onerror=alert(1)> **passed** [ok](http://x) ``tick`` \x1b[2K\u202e"
    tasks[1]["tests"][1]["message"] = hostile
    text = markdown(build_document(HEADER, tasks, PAPER))
    line = next(x for x in text.splitlines() if "`case-1` (invalid_artifact)" in x)
    assert "``` <img src=x onerror=alert(1)> **passed** [ok](http://x) ``tick`` \\x1b[2K\\u202e ```" in line
    assert "\x1b" not in text and "\u202e" not in text


@pytest.mark.parametrize(("edit", "says"), [
    (lambda d: d["subsets"]["mbpp"].update(mean_test_pass=1.0), "subsets.mbpp.mean_test_pass is not what its tests give"),
    (lambda d: d["subsets"]["mbpp"].update(tasks="<img src=x onerror=alert(1)>"), "subsets.mbpp.tasks is not what"),
    (lambda d: d["subsets"]["mbpp"]["ci"].update(mean_test_pass=[1]), "subsets.mbpp.ci.mean_test_pass"),
    (lambda d: d["overall"]["dev"].update(mean_test_pass=1.0), "overall.dev.mean_test_pass"),
    (lambda d: d["failure_classes"].update(wrong_output=0), "failure_classes.wrong_output"),
    (lambda d: d["subsets"].pop("s2mt"), "are not those of its tests"),
    (lambda d: d["subsets"]["mbpp"].update(episode_pass=0.97), "subsets.mbpp.episode_pass"),  # None for single-turn
])
def test_a_results_file_whose_figures_were_edited_is_refused_by_every_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Any, says: str
) -> None:
    """The reports read the stored figures: they are derived again from the tests, as merge does,
    and a file that states other numbers is refused with one line, never shown or published."""
    doc = build_document(HEADER, sample_tasks(), PAPER)
    edit(doc)
    path = tmp_path / "r.json"
    write_document(doc, path)
    for argv in (["report", str(path)], ["report", str(path), "--format", "html", "-o", str(tmp_path / "r.html")],
                 ["leaderboard", str(path), "--method", "m", "--category", "c", "--allow-noncomparable"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert says in err and "Traceback" not in err and err.count("\n") == 1
    assert not (tmp_path / "r.html").exists()


def test_a_lone_surrogate_in_an_answer_does_not_stop_the_html_report(tmp_path: Path) -> None:
    """Nor does a task's own figure edited into something else: it is derived again."""
    tasks = sample_tasks()
    tasks[0]["answers"] = [{"turn": 1, "sample": 0, "status": "ok", "source": "answers-file", "code": "SELECT 1; -- \ud800"}]
    doc = build_document(HEADER, tasks, PAPER)
    doc["tasks"][1]["test_pass"] = "<b>x</b>"
    path = tmp_path / "r.json"
    write_document(doc, path)
    assert main(["report", str(path), "--format", "html", "-o", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "\\ud800" in page and "<b>x</b>" not in page


def test_a_file_of_another_version_is_read_with_its_figures_derived_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A metric fixed since may score an older file differently: its figures are replaced, not
    judged, and a figure it never stated is not asked for. No stated number is ever shown."""
    doc = build_document({**HEADER, "plugin_version": "0.0.9"}, sample_tasks(), PAPER)
    right = doc["subsets"]["mbpp"]["mean_test_pass"]
    doc["subsets"]["mbpp"]["mean_test_pass"] = 1.0
    del doc["subsets"]["mbpp"]["metric_family"]
    path = tmp_path / "old.json"
    write_document(doc, path)
    assert main(["report", str(path), "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert f"| mbpp | 3 | 8 | 1 | {100 * right:.2f} [" in out and "| mbpp | 3 | 8 | 1 | 100.00" not in out
