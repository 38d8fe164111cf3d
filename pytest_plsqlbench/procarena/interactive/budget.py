"""The interaction budget and the price list of the Solver's actions (ProcArena §5.1).

Budget = base + per_entry x |ledger| + patience. The paper's text gives 6 + 2|L| + 3; the
published episode records (procarena-site, ``condition: tools+ask@B14+2L+6``) ran 14 + 2|L| + 6.
The paper's text is the default (``--plsql-budget=paper``); ``records`` or three numbers
``BASE,PER_ENTRY,PATIENCE`` choose otherwise.

Prices: the paper says environment tools cost 0.5-1 unit, ask_user and ask_selector 2, submit
nothing; the records' ``budget.by_tool`` pin the rest (get_schema 1, describe_table 0.5,
sample_rows 0.5, execute_scratch 1, compile_plsql 0.5, reset_scratch 0.5). A malformed or
unknown action costs 1 (every issued action costs, paper Table 2). ``--plsql-tool-costs``
overrides single prices (``ask_user=3,execute_scratch=0.5``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ...errors import UsageError

PRESETS: dict[str, tuple[float, float, float]] = {"paper": (6.0, 2.0, 3.0), "records": (14.0, 2.0, 6.0)}

PRICES: dict[str, float] = {
    "get_schema": 1.0,
    "describe_table": 0.5,
    "sample_rows": 0.5,
    "execute_scratch": 1.0,
    "compile_plsql": 0.5,
    "reset_scratch": 0.5,
    "ask_user": 2.0,
    "ask_selector": 2.0,
    "submit": 0.0,
}
#: What a malformed or unknown action costs (its own bucket in the price list).
MALFORMED = "malformed"
MALFORMED_COST = 1.0
#: ProcArena's step cap (§5.1): at most this many recorded actions per episode.
MAX_STEPS = 60


@dataclass(frozen=True)
class BudgetRule:
    base: float = 6.0
    per_entry: float = 2.0
    patience: float = 3.0
    name: str = "paper"

    def limit(self, ledger_size: int) -> float:
        return self.base + self.per_entry * ledger_size + self.patience

    def describe(self) -> str:
        return f"{self.base:g} + {self.per_entry:g}*|ledger| + {self.patience:g}"


def parse_rule(text: str | None) -> BudgetRule:
    """``paper`` | ``records`` | ``BASE,PER_ENTRY,PATIENCE`` (non-negative numbers)."""
    text = (text or "paper").strip()
    if text in PRESETS:
        return BudgetRule(*PRESETS[text], name=text)
    parts = [p.strip() for p in text.split(",")]
    try:
        numbers = [float(p) for p in parts]
    except ValueError:
        numbers = []
    if len(numbers) != 3 or any(n < 0 for n in numbers):
        raise UsageError(f"--plsql-budget: 'paper', 'records' or BASE,PER_ENTRY,PATIENCE (three numbers >= 0), not {text!r}")
    base, per_entry, patience = numbers
    return BudgetRule(base, per_entry, patience, name=text)


def parse_prices(text: str | None) -> dict[str, float]:
    """The price list with ``name=cost[,name=cost...]`` overrides applied."""
    prices = {**PRICES, MALFORMED: MALFORMED_COST}
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or name not in prices:
            raise UsageError(f"--plsql-tool-costs: 'tool=cost' with a tool among {sorted(prices)}, not {part!r}")
        try:
            cost = float(value)
        except ValueError:
            cost = -1.0
        if cost < 0:
            raise UsageError(f"--plsql-tool-costs: the cost of {name} must be a number >= 0, not {value.strip()!r}")
        prices[name] = cost
    return prices


@dataclass
class Budget:
    """Units spent in one episode, per tool; every issued action is charged."""

    limit: float
    prices: Mapping[str, float]
    spent: float = 0.0
    by_tool: dict[str, float] = field(default_factory=dict)

    def price(self, tool: str) -> float:
        return float(self.prices.get(tool, self.prices.get(MALFORMED, MALFORMED_COST)))

    def affordable(self, tool: str) -> bool:
        return self.spent + self.price(tool) <= self.limit + 1e-9

    def charge(self, tool: str) -> float:
        cost = self.price(tool)
        self.spent += cost
        self.by_tool[tool] = self.by_tool.get(tool, 0.0) + cost
        return cost

    @property
    def remaining(self) -> float:
        return max(0.0, self.limit - self.spent)

    @property
    def exhausted(self) -> bool:
        return self.spent >= self.limit - 1e-9

    def line(self) -> str:
        """What every tool result ends with."""
        return f"[budget: {self.spent:g} of {self.limit:g} units spent, {self.remaining:g} left]"
