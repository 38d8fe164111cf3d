"""The ``alone`` marker of the project's own tests (tests/conftest.py): a test so marked runs
while no other xdist worker runs a test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

TESTS = '''
import json, os, time
import pytest

def _mark(name):
    start = time.monotonic()
    time.sleep(0.4)
    with open(os.environ["ALONE_LOG"], "a") as f:
        f.write(json.dumps([name, start, time.monotonic()]) + "\\n")

@pytest.mark.parametrize("n", range(6))
def test_shared(n):
    _mark(f"shared{n}")

@pytest.mark.alone
def test_alone():
    _mark("alone")

@pytest.mark.parametrize("n", range(6))
def test_shared_after(n):
    _mark(f"after{n}")
'''


def test_an_alone_test_overlaps_no_other_test(pytester: pytest.Pytester, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makeconftest((REPO / "tests" / "conftest.py").read_text(encoding="utf-8"))
    pytester.makeini("[pytest]\nmarkers =\n    alone: runs alone\n")
    pytester.makepyfile(test_machine=TESTS)
    log = tmp_path / "log.jsonl"
    monkeypatch.setenv("ALONE_LOG", str(log))
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider", "-p", "no:plsqlbench")
    result.assert_outcomes(passed=13)
    spans = {name: (start, end) for name, start, end in map(json.loads, log.read_text().splitlines())}
    alone = spans.pop("alone")
    overlapping = [name for name, (start, end) in spans.items() if start < alone[1] and alone[0] < end]
    assert not overlapping, (alone, spans)
    # ... and the other worker did run tests in parallel with each other (the lock is shared).
    shared = sorted(spans.values())
    assert any(b[0] < a[1] for a, b in zip(shared, shared[1:])), shared
