"""The ProcArena task file: one YAML file per task per dialect (format in docs/procarena.md).

Parsing is strict: every field is checked and a problem is one :class:`UsageError` naming the
file and the field, so a content author fixes it without reading a traceback. The visible part
(requirement, materials, signature) goes to the prompt; the hidden part (gold, calls,
components, mutants, equivalent_mutants, behaviour, ``b2``, ``interactive``) never does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import UsageError
from ..manifests import yaml_error
from . import SCENARIOS
from .dialects import ADAPTERS, adapter_for

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_ID = re.compile(r"^(postgres|oracle)_([ab][1-5])_(\d{3,})$")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*$")
MIN_CALLS = 1
B2_PATTERNS = ("cursor_loop", "n_plus_one", "aggregate_in_loop")
LEDGER_OPS = ("jargon", "mask", "contradiction")
#: The User Simulator's two holders (ProcArena §3.3.2): the requirement holder keeps what the
#: perturbation took out of or set against the requirement (omissions, contradictions); the
#: knowledge holder keeps the definitions that knowledge injection replaced by jargon.
HOLDERS = ("requirement", "knowledge")
HOLDER_OF_OP = {"jargon": "knowledge", "mask": "requirement", "contradiction": "requirement"}


class SpecError(UsageError):
    """A task file that does not follow the format (message: ``file: field: problem``)."""


@dataclass(frozen=True)
class Material:
    file: str
    kind: str
    text: str


@dataclass(frozen=True)
class Mutant:
    why: str
    code: str


@dataclass(frozen=True)
class B2Fields:
    """Performance-optimization fields (issue 14): loaded and checked now, used by the B2 judge."""

    pattern: str
    degraded: str
    scale_rows: int = 10000
    scale: Mapping[str, int] = field(default_factory=dict)
    repeats: int = 7
    min_speedup: float = 1.1


@dataclass(frozen=True)
class LedgerEntry:
    id: str
    op: str
    key: str
    answer: str
    #: Which holder answers for the entry: the task file's ``holder``, else the one its ``op`` implies.
    holder: str = ""

    def __post_init__(self) -> None:
        if not self.holder:
            object.__setattr__(self, "holder", HOLDER_OF_OP.get(self.op, "requirement"))


@dataclass(frozen=True)
class InteractiveForm:
    """The paired Interactive task (issue 15): underspecified requirement + elicitation ledger."""

    requirement: str
    ledger: tuple[LedgerEntry, ...]


@dataclass(frozen=True)
class ProcSpec:
    id: str
    scenario: str
    dialect: str
    database: str
    procedure: str
    signature: str
    requirement: str
    materials: tuple[Material, ...]
    gold: str
    calls: tuple[str, ...]
    path: Path
    components: str | None = None
    behaviour: str = ""
    mutants: tuple[Mutant, ...] = ()
    b2: B2Fields | None = None
    interactive: InteractiveForm | None = None
    #: Schema holding the task's tables (``database`` for our own tasks; a Spider owner for PLForge).
    schema: str = ""
    #: Generated mutants (:mod:`.mutate` ids) judged equivalent to gold, each with the reason.
    equivalent: Mapping[str, str] = field(default_factory=dict)

    @property
    def category(self) -> str:
        return "synthesis" if self.scenario.startswith("a") else "editing"


def _text(raw: Mapping[str, Any], key: str, where: str, *, required: bool = True) -> str:
    value = raw.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or not value.strip():
        raise SpecError(f"{where}: field {key!r} must be a non-empty string")
    return value


def _materials(raw: Any, where: str) -> tuple[Material, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise SpecError(f"{where}: field 'materials' must be a list of {{file, kind, text}}")
    out = []
    for n, item in enumerate(raw, 1):
        here = f"{where}: field 'materials' item {n}"
        if not isinstance(item, dict):
            raise SpecError(f"{here}: must be a mapping {{file, kind, text}}")
        unknown = set(item) - {"file", "kind", "text"}
        if unknown:
            raise SpecError(f"{here}: unknown key(s) {sorted(unknown)}")
        for key in ("file", "kind", "text"):
            if not isinstance(item.get(key), str) or not item[key].strip():
                raise SpecError(f"{here}: {key!r} must be a non-empty string")
        out.append(Material(item["file"], item["kind"], item["text"]))
    return tuple(out)


def _calls(raw: Any, dialect: str, where: str) -> tuple[str, ...]:
    if not isinstance(raw, list) or len(raw) < MIN_CALLS or not all(isinstance(c, str) and c.strip() for c in raw):
        raise SpecError(f"{where}: field 'calls' must be a non-empty list of call statements")
    adapter = adapter_for(dialect)
    for n, call in enumerate(raw, 1):
        first = call.strip().split(None, 1)[0].upper()
        if first not in adapter.call_words:
            raise SpecError(f"{where}: field 'calls' item {n}: a {dialect} call is written {adapter.call_form}, "
                            f"got {call.strip()[:40]!r}")
    return tuple(c.strip() for c in raw)


def _mutants(raw: Any, where: str) -> tuple[Mutant, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise SpecError(f"{where}: field 'mutants' must be a list of {{why, code}}")
    out = []
    for n, item in enumerate(raw, 1):
        if not isinstance(item, dict) or not isinstance(item.get("code"), str) or not item["code"].strip():
            raise SpecError(f"{where}: field 'mutants' item {n}: needs a non-empty 'code' (and a 'why')")
        out.append(Mutant(str(item.get("why") or f"mutant {n}"), item["code"]))
    return tuple(out)


def _equivalent(raw: Any, where: str) -> dict[str, str]:
    """``equivalent_mutants: [{id: <mutant id>, why: <reason>}]`` (a reason is required)."""
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise SpecError(f"{where}: field 'equivalent_mutants' must be a list of {{id, why}}")
    out: dict[str, str] = {}
    for n, item in enumerate(raw, 1):
        here = f"{where}: field 'equivalent_mutants' item {n}"
        if not isinstance(item, dict) or set(item) - {"id", "why"}:
            raise SpecError(f"{here}: must be a mapping {{id, why}}")
        if not all(isinstance(item.get(k), str) and item[k].strip() for k in ("id", "why")):
            raise SpecError(f"{here}: needs a mutant 'id' and the reason it is equivalent ('why')")
        if item["id"] in out:
            raise SpecError(f"{here}: mutant {item['id']!r} listed twice")
        out[item["id"].strip()] = " ".join(item["why"].split())
    return out


def _b2(raw: Any, where: str) -> B2Fields:
    here = f"{where}: field 'b2'"
    if not isinstance(raw, dict):
        raise SpecError(f"{here}: a b2 task needs a mapping with pattern, degraded, scale_rows ...")
    unknown = set(raw) - {"pattern", "degraded", "scale_rows", "scale", "repeats", "min_speedup"}
    if unknown:
        raise SpecError(f"{here}: unknown key(s) {sorted(unknown)}")
    if raw.get("pattern") not in B2_PATTERNS:
        raise SpecError(f"{here}.pattern: one of {list(B2_PATTERNS)}, not {raw.get('pattern')!r}")
    if not isinstance(raw.get("degraded"), str) or not raw["degraded"].strip():
        raise SpecError(f"{here}.degraded: the correct-but-slow procedure is required")
    scale = raw.get("scale") or {}
    if not isinstance(scale, dict) or not all(isinstance(v, int) and v > 0 for v in scale.values()):
        raise SpecError(f"{here}.scale: a mapping schema.table -> positive row count")
    try:
        fields = B2Fields(
            pattern=raw["pattern"], degraded=raw["degraded"], scale_rows=int(raw.get("scale_rows", 10000)),
            scale={str(k): int(v) for k, v in scale.items()}, repeats=int(raw.get("repeats", 7)),
            min_speedup=float(raw.get("min_speedup", 1.1)),
        )
    except (TypeError, ValueError):
        raise SpecError(f"{here}: scale_rows and repeats must be integers, min_speedup a number") from None
    if fields.scale_rows <= 0 or fields.repeats <= 0 or fields.min_speedup <= 0:
        raise SpecError(f"{here}: scale_rows, repeats and min_speedup must be positive")
    return fields


def _interactive(raw: Any, where: str) -> InteractiveForm:
    here = f"{where}: field 'interactive'"
    if not isinstance(raw, dict):
        raise SpecError(f"{here}: must be a mapping with requirement and ledger")
    requirement = _text(raw, "requirement", here)
    ledger = raw.get("ledger")
    if not isinstance(ledger, list) or not ledger:
        raise SpecError(f"{here}.ledger: a non-empty list of {{id, op, key, answer}}")
    entries = []
    for n, item in enumerate(ledger, 1):
        at = f"{here}.ledger item {n}"
        if not isinstance(item, dict) or not all(isinstance(item.get(k), str) and item[k].strip() for k in ("id", "op", "key", "answer")):
            raise SpecError(f"{at}: needs string id, op, key and answer")
        if item["op"] not in LEDGER_OPS:
            raise SpecError(f"{at}: op must be one of {list(LEDGER_OPS)}, not {item['op']!r}")
        holder = item.get("holder", HOLDER_OF_OP[item["op"]])
        if holder not in HOLDERS:
            raise SpecError(f"{at}: holder must be one of {list(HOLDERS)}, not {holder!r}")
        entries.append(LedgerEntry(item["id"], item["op"], item["key"], item["answer"], holder))
    ids = [e.id for e in entries]
    if len(set(ids)) != len(ids):
        raise SpecError(f"{here}.ledger: duplicate entry ids {ids}")
    return InteractiveForm(requirement, tuple(entries))


KNOWN_FIELDS = frozenset(
    {"id", "scenario", "dialect", "database", "procedure", "signature", "requirement", "materials", "components",
     "gold", "calls", "behaviour", "mutants", "equivalent_mutants", "b2", "interactive"}
)


def parse(raw: Any, path: Path) -> ProcSpec:
    """One task file's content, checked; ``path`` only names the file in messages."""
    where = str(path)
    if not isinstance(raw, dict):
        raise SpecError(f"{where}: a ProcArena task file must be a mapping")
    unknown = set(raw) - KNOWN_FIELDS
    if unknown:
        raise SpecError(f"{where}: unknown field(s) {sorted(unknown)}")
    task_id = _text(raw, "id", where).strip()
    m = _ID.match(task_id)
    if not m:
        raise SpecError(f"{where}: field 'id' must read <dialect>_<scenario>_<nnn> (e.g. postgres_a1_000), not {task_id!r}")
    dialect = _text(raw, "dialect", where).strip()
    if dialect not in ADAPTERS:
        raise SpecError(f"{where}: field 'dialect' must be one of {list(ADAPTERS)}, not {dialect!r}")
    scenario = _text(raw, "scenario", where).strip().lower()
    if scenario not in SCENARIOS:
        raise SpecError(f"{where}: field 'scenario' must be one of {list(SCENARIOS)}, not {scenario!r}")
    if (m.group(1), m.group(2)) != (dialect, scenario):
        raise SpecError(f"{where}: field 'id' {task_id!r} disagrees with dialect {dialect!r} / scenario {scenario!r}")
    database = _text(raw, "database", where).strip()
    procedure = _text(raw, "procedure", where).strip()
    for key, value in (("database", database), ("procedure", procedure)):
        if not _NAME.match(value):
            raise SpecError(f"{where}: field {key!r} must be a plain identifier, not {value!r}")
    signature = _text(raw, "signature", where).strip()
    if not signature.lower().startswith(procedure.lower()):
        raise SpecError(f"{where}: field 'signature' must start with the procedure name {procedure!r}")
    components = raw.get("components")
    if components is not None and (not isinstance(components, str) or not components.strip()):
        raise SpecError(f"{where}: field 'components' must be SQL text")
    if scenario == "a5" and not components:
        raise SpecError(f"{where}: field 'components' is required for an a5 task (the callable components)")
    b2 = _b2(raw.get("b2"), where) if scenario == "b2" else None
    if scenario != "b2" and raw.get("b2") is not None:
        raise SpecError(f"{where}: field 'b2' belongs to b2 tasks only")
    interactive = _interactive(raw["interactive"], where) if raw.get("interactive") is not None else None
    if scenario == "b2" and interactive is not None:
        raise SpecError(f"{where}: field 'interactive': b2 has no Interactive form (paper §3.3)")
    gold = _text(raw, "gold", where)
    if not re.search(rf"\bPROCEDURE\s+(\w+\.)?\"?{re.escape(procedure)}\"?\b", gold, re.I):
        raise SpecError(f"{where}: field 'gold' must create PROCEDURE {procedure}")
    return ProcSpec(
        id=task_id,
        scenario=scenario,
        dialect=dialect,
        database=database,
        procedure=procedure,
        signature=signature,
        requirement=_text(raw, "requirement", where),
        materials=_materials(raw.get("materials"), where),
        gold=gold,
        calls=_calls(raw.get("calls"), dialect, where),
        path=path,
        components=components or None,
        behaviour=_text(raw, "behaviour", where, required=False),
        mutants=_mutants(raw.get("mutants"), where),
        b2=b2,
        interactive=interactive,
        schema=database,
        equivalent=_equivalent(raw.get("equivalent_mutants"), where),
    )


def read(path: Path) -> ProcSpec:
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_LOADER)
    except yaml.YAMLError as exc:
        raise yaml_error(path, exc) from None
    except OSError as exc:
        raise SpecError(f"{path}: cannot read ({exc.strerror})") from None
    return parse(raw, path)
