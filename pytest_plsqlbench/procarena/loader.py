"""``loader: procarena`` manifests: task files become the project's :class:`Task` objects.

Manifest::

    name: procarena-sample
    loader: procarena
    dialects: [postgres, oracle]
    options:
      dir: procarena-sample      # <dir>/<dialect>/*.yaml, relative to the manifest
      mode: direct               # or interactive: the tasks' Interactive forms (issue 15)

One task = one turn whose reference is the gold procedure, one unit test per call
(``call-1`` ... ``call-N``: the call statement is the test's script, the judge compares states),
fixtures = the database (``fixtures/<database>/<dialect>.sql``) plus, for A5, the task's
callable components. Metadata: scenario, category, database, dialect, procedure, signature and
``judge: procarena``, which is how the runner picks the call-suite judge.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import pytest

from ..errors import UsageError
from ..manifests import Manifest
from ..resources import fixtures_dir
from ..settings import Settings
from ..tasks import Fixture, Task, Turn, UnitTest
from . import JUDGE, SCENARIO_NAMES
from .describe import describe_fixture
from .hollow import spec_problems
from .prompt import render
from .spec import ProcSpec, SpecError, read

KIND = "procarena-state"  # the call-suite judge's kind (procarena.judge.CallSuiteJudge)

LOADER = "procarena"
#: What loading left out and why: shown on the terminal by :mod:`..loading`.
progress = logging.getLogger("pytest_plsqlbench.progress")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def fixture_dirs(manifest: Manifest) -> tuple[Path, ...]:
    found = (manifest.directory.parent / "fixtures", manifest.directory / "fixtures", fixtures_dir())
    return tuple(dict.fromkeys(d for d in found if d.is_dir()))


def database_fixture(spec: ProcSpec, search: tuple[Path, ...]) -> Fixture:
    for folder in search:
        path = folder / spec.database / f"{spec.dialect}.sql"
        if path.is_file():
            script = path.read_text(encoding="utf-8")
            return Fixture(key=f"procarena:{spec.database}:{spec.dialect}:{_digest(script)}", script=script,
                           description=spec.database, source=str(path))
    looked = ", ".join(str(d) for d in search) or "no fixtures folder"
    raise SpecError(f"{spec.path}: field 'database': fixture {spec.database}/{spec.dialect}.sql not found (looked in {looked})")


def build_task(spec: ProcSpec, subset: str, db_fixture: Fixture) -> Task:
    fixtures = [db_fixture]
    if spec.components:
        fixtures.append(Fixture(key=f"procarena:components:{spec.id}:{_digest(spec.components)}",
                                script=spec.components, description=f"{spec.id} components"))
    description = describe_fixture(db_fixture.script, spec.dialect)
    prompt = render(
        dialect=spec.dialect, requirement=spec.requirement, database=spec.database, procedure=spec.procedure,
        signature=spec.signature, description=description, materials=spec.materials, schema=spec.schema or None,
    )
    tests = tuple(
        UnitTest(id=f"call-{n}", kind=KIND, script=call, options={"call": n})
        for n, call in enumerate(spec.calls, 1)
    )
    if spec.b2 is not None:  # B2: one more item, after the calls: the gate and the measurement
        tests += (UnitTest(id="perf", kind="procarena-b2", script=None, options={"b2": True}),)
    metadata = {
        "judge": JUDGE,
        "scenario": spec.scenario,
        "scenario_name": SCENARIO_NAMES[spec.scenario],
        "category": spec.category,
        "database": spec.database,
        "schema": spec.schema,
        "dialect": spec.dialect,
        "procedure": spec.procedure,
        "signature": spec.signature,
        "n_calls": len(spec.calls),
        "task_file": str(spec.path),
        # Procedures are asked to write the task's tables: the write grants, the rollback (or
        # Oracle's restore) and the state judge contain that, so the pre-check allows it.
        "safety_allow": ["write"],
    }
    return Task(
        id=spec.id,
        subset=subset,
        dialect=spec.dialect,
        turns=(Turn(1, prompt, tests, reference=spec.gold, source_id=spec.id),),
        entry_points=(spec.procedure,),
        fixtures=tuple(fixtures),
        markers=(f"scenario_{spec.scenario}", f"category_{spec.category}", "procarena"),
        metadata=metadata,
    )


def task_files(manifest: Manifest, dialect: str) -> list[Path]:
    folder = manifest.directory / str(manifest.options.get("dir", manifest.name))
    if not folder.is_dir():
        raise UsageError(f"{manifest.path}: task folder {folder} does not exist")
    return sorted((folder / dialect).glob("*.yaml"))


def load_specs(manifest: Manifest, dialect: str) -> list[ProcSpec]:
    """Every task file of the manifest for ``dialect``, checked (ids unique, dialect matching)."""
    specs: list[ProcSpec] = []
    seen: dict[str, Path] = {}
    for path in task_files(manifest, dialect):
        spec = read(path)
        if spec.dialect != dialect:
            raise SpecError(f"{path}: field 'dialect' is {spec.dialect!r} but the file is in the {dialect}/ folder")
        if spec.id in seen:
            raise SpecError(f"{path}: field 'id' {spec.id!r} already used by {seen[spec.id]}")
        seen[spec.id] = path
        specs.append(spec)
    return specs


#: Per run, subset -> the hollow tasks its loader left out ("id: why"): the data report
#: (:mod:`.family`) names them in the terminal summary and the results file.
HOLLOW_KEY = pytest.StashKey[dict[str, list[str]]]()


def note_hollow(config: pytest.Config, subset: str, left_out: list[str]) -> None:
    """Keep what a loader of ``subset`` left out as hollow for the run's data report."""
    if left_out:
        config.stash.setdefault(HOLLOW_KEY, {})[subset] = left_out


def load(manifest: Manifest, settings: Settings, left_out: list[str] | None = None) -> list[Task]:
    """The subset's tasks; the hollow ones are left out, each appended to ``left_out`` as
    "id: why" when a list is given."""
    search = fixture_dirs(manifest)
    tasks = []
    fixtures: dict[str, Fixture] = {}
    mode = str(manifest.options.get("mode") or "direct")
    if mode not in ("direct", "interactive"):
        raise UsageError(f"{manifest.path}: options.mode must be 'direct' or 'interactive', not {mode!r}")
    left_out = left_out if left_out is not None else []
    specs = load_specs(manifest, settings.database.dialect)
    for spec in specs:
        if mode == "interactive" and spec.interactive is None:
            continue  # B2, and any task without an Interactive form (docs/procarena-interactive.md)
        hollow_why = spec_problems(spec)
        if hollow_why:  # part of the task no call can judge: left out, and counted (plsqlbench validate says why)
            left_out.append(f"{spec.id}: {hollow_why[0]}")
            continue
        if spec.database not in fixtures:
            fixtures[spec.database] = database_fixture(spec, search)
        if mode == "interactive":
            from .interactive.tasks import build_interactive_task

            tasks.append(build_interactive_task(spec, manifest.name, fixtures[spec.database], build_task))
        else:
            tasks.append(build_task(spec, manifest.name, fixtures[spec.database]))
    if left_out:
        progress.info("plsqlbench: %s: %d of %d task(s) left out as hollow tasks:\n  %s", manifest.name,
                      len(left_out), len(specs), "\n  ".join(left_out))
    return tasks


def spec_of(task: Task) -> ProcSpec:
    """The full task file behind a task (hidden fields included), for validate and tests."""
    return read(Path(str(task.metadata["task_file"])))


@pytest.hookimpl(trylast=True)
def pytest_plsql_load_subset(config: pytest.Config, manifest: Manifest, settings: Settings) -> list[Task] | None:
    if manifest.loader != LOADER:
        return None
    left_out: list[str] = []
    tasks = load(manifest, settings, left_out)
    note_hollow(config, manifest.name, left_out)
    return tasks
