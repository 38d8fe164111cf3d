"""Hostile-answer subsets for the integrity tests (issue 10): tasks written as YAML the way a user
adds their own, answers in an answers file, run through the real plugin in a subprocess."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

SHOP = Path(__file__).resolve().parent.parent / "fixtures" / "shop"


def write_subset(root: Path, name: str, tasks: dict[str, dict[str, Any]], answers: dict[str, str | None],
                 ) -> tuple[Path, Path]:
    """``tasks``: id -> {entry_points, tests[, fixtures]}; ``answers``: id -> answer (None: left out)."""
    folder = root / f"{name}-tasks"
    (folder / name).mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.yaml").write_text(f"name: {name}\nloader: yaml\ndialects: [postgres]\noptions: {{dir: {name}}}\n")
    for position, (task_id, raw) in enumerate(tasks.items(), 1):
        doc = {"id": task_id, "prompt": "p", "entry_points": raw.get("entry_points", [task_id]), "tests": raw["tests"]}
        if raw.get("fixtures"):
            doc["fixtures"] = raw["fixtures"]
        (folder / name / f"{position:02d}_{task_id}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    answers_file = root / f"{name}-answers.jsonl"
    answers_file.write_text("".join(
        json.dumps({"task_id": task_id, "answer": code}) + "\n" for task_id, code in answers.items() if code is not None
    ))
    return folder, answers_file


def run_plugin(pytester: pytest.Pytester, folder: Path, subset: str, answers: Path, *extra: str,
               ) -> tuple[dict[str, Any], pytest.RunResult]:
    out = pytester.path / f"{subset}-results.json"
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:xdist", "--subset", subset, "--plsql-tasks", str(folder),
        f"--plsql-answers={answers}", f"--plsql-results={out}", "--plsql-timeout=2", *extra, timeout=600,
    )
    return json.loads(out.read_text()), result


def by_test(doc: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(t["task_id"], x["test_id"]): x for t in doc["tasks"] for x in t["tests"]}
