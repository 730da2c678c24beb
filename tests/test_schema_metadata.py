"""The ORM metadata (stacklens/schema.py) equals a recorded description of it: tables,
columns (type, nullability, key), indexes, constraints, table options and the mapped
identity. It guards restructurings of schema.py that must not change the schema (columns
generated from one declaration); a deliberate schema change comes with a migration and a
new recording:

    .venv/bin/python -m tests.test_schema_metadata > tests/fixtures/schema_metadata.json
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy import Constraint, Table
from sqlalchemy.sql.expression import FromClause
from sqlalchemy.sql.schema import ColumnCollectionConstraint

from stacklens.schema import Base

RECORDED = Path(__file__).parent / "fixtures" / "schema_metadata.json"


def _table(table: Table) -> dict[str, Any]:
    return {
        "columns": [[c.name, repr(c.type), c.nullable, c.primary_key] for c in table.columns],
        "indexes": sorted(
            [i.name, [c.name for c in i.columns], {k: str(v) for k, v in i.dialect_kwargs.items()}]
            for i in table.indexes
        ),
        "constraints": sorted(
            f"{type(c).__name__} {c.name} {sorted(x.name for x in _columns(c))}"
            for c in table.constraints
        ),
        "options": {k: str(v) for k, v in table.dialect_kwargs.items()},
        "info": table.info,
    }


def _columns(constraint: Constraint) -> list[Any]:
    """The columns a table constraint names (every table constraint here names some)."""
    assert isinstance(constraint, ColumnCollectionConstraint), constraint
    return list(constraint.columns)


def _table_name(table: FromClause) -> str:
    """The name of a mapped class's table."""
    assert isinstance(table, Table), table
    return table.name


def describe() -> dict[str, Any]:
    """Every table of the metadata, and every mapped class's table and identity columns."""
    return {
        "tables": {name: _table(t) for name, t in sorted(Base.metadata.tables.items())},
        "mappers": sorted(
            [m.class_.__name__, _table_name(m.local_table), [c.name for c in m.primary_key]]
            for m in Base.registry.mappers
        ),
    }


def test_metadata_is_as_recorded():
    assert describe() == json.loads(RECORDED.read_text())


if __name__ == "__main__":
    print(json.dumps(describe(), indent=1, sort_keys=True))
