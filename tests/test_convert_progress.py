"""Loading says what it does and how long it took: once, on the process that owns the terminal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def _plus_file(path: Path) -> Path:
    rows = [
        {
            "task_id": f"Mbpp/{900 + i}",
            "prompt": f'"""\nAdd {i}.\n"""',
            "entry_point": f"add_{i}",
            "canonical_solution": f"def add_{i}(x):\n    return x + {i}\n",
            "base_input": [[1], [2]],
            "plus_input": [[3], ["a"]],
            "atol": 0,
            "assertion": f"assert add_{i}(1) == {1 + i}\n",
        }
        for i in (1, 2)
    ]
    rows.append(
        {
            "task_id": "Mbpp/903",
            "prompt": '"""\nIs it a number?\n"""',
            "entry_point": "is_num",
            "canonical_solution": "def is_num(x):\n    return isinstance(x, (int, float))\n",
            "base_input": [[1], [2.5]],
            "plus_input": [["a"]],
            "atol": 0,
            "assertion": "assert is_num(1) == True\n",
        }
    )
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def _run(pytester: pytest.Pytester, src: Path, cache: Path, *extra: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--subset", "mbpp-plus", f"--plsql-source=mbppplus={src}",
        f"--plsql-data-cache={cache}", "--collect-only", *extra,
    )


def _progress(result: pytest.RunResult) -> list[str]:
    return [x for x in (result.outlines + result.errlines) if x.startswith("plsqlbench: mbpp-plus:")]


def test_conversion_says_what_it_does_how_long_and_the_counts(pytester, tmp_path):
    src, cache = _plus_file(tmp_path / "MbppPlus.jsonl"), tmp_path / "cache"
    first = _progress(_run(pytester, src, cache, "-q"))
    assert len(first) == 2, first
    assert "converting" in first[0] and str(src) in first[0]
    done = first[1]
    assert "converted 2 tasks (6 tests) in " in done
    assert "of 3 source tasks:" in done and "1 left out as a constant passes them (Mbpp/903;" in done
    assert "--plsql-keep-constant-tasks keeps them" in done and "source cases dropped" in done
    again = _progress(_run(pytester, src, cache))
    assert len(again) == 1 and "read from the conversion cache 2 tasks" in again[0]
    kept = _run(pytester, src, cache, "--plsql-keep-constant-tasks")
    (line,) = _progress(kept)
    assert "3 tasks" in line and "passed by a constant kept on request (Mbpp/903)" in line
    assert _progress(_run(pytester, src, cache, "-qq")) == []


def test_progress_is_shown_once_under_xdist(pytester, tmp_path):
    src, cache = _plus_file(tmp_path / "MbppPlus.jsonl"), tmp_path / "cache"
    result = _run(pytester, src, cache, "-n", "2")
    lines = _progress(result)
    assert len(lines) == 2, result.outlines + result.errlines
    assert "converted 2 tasks" in lines[1]


def test_a_download_says_what_it_fetches_its_size_and_how_long(tmp_path, caplog):
    """Over an HTTP server on 127.0.0.1 (the data download itself is tested in test_datasources)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from pytest_plsqlbench.datasources import download
    from pytest_plsqlbench.manifests import Source
    from pytest_plsqlbench.settings import DataSettings

    body = b'{"task_id": 1}\n' * 1000

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/data.jsonl"
    try:
        with caplog.at_level("INFO", logger="pytest_plsqlbench.progress"):
            download(Source(name="x", url=url, file="data.jsonl"), DataSettings(cache=tmp_path), "mini")
    finally:
        server.shutdown()
        server.server_close()
    lines = [r.getMessage() for r in caplog.records if r.name == "pytest_plsqlbench.progress"]
    assert lines[0].startswith(f"plsqlbench: mini: downloading {url} (first use;")
    assert lines[1].startswith(f"plsqlbench: mini: downloaded {url} (0.0 MB, sha256 ") and lines[1].endswith("s")


def test_a_long_conversion_says_how_far_it_is_the_rate_and_the_eta(caplog):
    """Every PROGRESS_EVERY seconds: done/total, tasks per second and the time left."""
    import logging

    from pytest_plsqlbench.loaders.mbpp import _Counted

    ticks = iter(range(0, 1000, 3))  # each task takes 3 s of the fake clock
    counted = _Counted(list(range(10)), "mbpp-plus", every=5.0, clock=lambda: float(next(ticks)))
    with caplog.at_level(logging.INFO, logger="pytest_plsqlbench.progress"):
        assert list(counted) == list(range(10)) and len(counted) == 10
    lines = [r.getMessage() for r in caplog.records if r.name == "pytest_plsqlbench.progress"]
    assert lines[0] == "plsqlbench: mbpp-plus: converting: 2/10 tasks, 0.3 tasks/s, ETA 24s"
    assert len(lines) == 4 and lines[-1].startswith("plsqlbench: mbpp-plus: converting: 8/10 tasks")


def test_conversion_progress_lines_reach_the_terminal(pytester, tmp_path, monkeypatch):
    """A conversion longer than the interval prints its progress line where the others go."""
    import pytest_plsqlbench.loaders.mbpp as mbpp

    src, cache = _plus_file(tmp_path / "MbppPlus.jsonl"), tmp_path / "cache"
    monkeypatch.setattr(mbpp, "PROGRESS_EVERY", 0.0)
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "--subset", "mbpp-plus", f"--plsql-source=mbppplus={src}",
        f"--plsql-data-cache={cache}", "--collect-only",
    )
    lines = _progress(result)
    assert any(x.startswith("plsqlbench: mbpp-plus: converting: 1/3 tasks") and "ETA" in x for x in lines), lines
