"""The Direct-mode prompt, in the paper's order (§2.1): requirement, database description,
the required signature, then the scenario attachment (materials).

Only visible fields reach it; gold, calls, components' source, mutants, ``behaviour`` and the
Interactive ledger never do (a test checks this for every sample task).
"""

from __future__ import annotations

from collections.abc import Sequence

from .dialects import adapter_for
from .spec import Material


def render(
    *,
    dialect: str,
    requirement: str,
    database: str,
    procedure: str,
    signature: str,
    description: str,
    materials: Sequence[Material] = (),
    schema: str | None = None,
) -> str:
    adapter = adapter_for(dialect)
    where = f" in schema `{schema}`" if schema else ""
    rules = [
        f"Create it with CREATE OR REPLACE PROCEDURE {procedure}(...), without a schema prefix.",
        f"Refer to the tables schema-qualified ({schema}.<table>)." if schema else "Refer to the tables by name.",
        "Do not COMMIT or ROLLBACK: the caller owns the transaction.",
        "Create no tables of your own: every table is part of the database state that is checked.",
        "Raise an error where the requirement says the call must fail"
        + f" ({adapter.raise_statement}).",
    ]
    parts = [
        f"Write one stored procedure for the {adapter.label} database `{database}`.",
        "",
        "## Requirement",
        requirement.strip(),
        "",
        f"## Database `{database}`{where}",
        description.strip(),
        "",
        "## Required signature",
        signature.strip(),
        "",
        *[f"- {r}" for r in rules],
    ]
    if materials:
        parts += ["", "## Attachments"]
        for m in materials:
            parts += ["", f"### {m.file} ({m.kind})", m.text.rstrip()]
    return "\n".join(parts).rstrip() + "\n"
