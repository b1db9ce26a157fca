"""DuckDB SQL to Spark SQL: sqlglot's transpiler, plus the rewrites where its Spark output
would mean something else.

- ``list(x ORDER BY k [DESC], ...)`` keeps its order (sqlglot drops it for ``collect_list``):
  the values are sorted by their keys, ``DESC`` keys negated (keys must be numbers), ties
  broken by the value; ``list(DISTINCT x ORDER BY x)`` becomes a sorted ``collect_set``.
  Cut to its first n (``list(...)[:n]``: the detectors' top culprits and victims), it is
  ``min_by(x, keys, n)``, a heap of n entries a group: ``collect_list`` builds the whole
  group's list in one task, outside Spark's memory accounting, and the millions of victims
  of one resource in a 30M-event trace took a 4 GiB driver down.
- ``min_by(x, key, n)`` and ``max_by(x, key, n)`` keep their n (sqlglot drops it).
- ``list[i]`` (1-based) becomes ``element_at``, ``list[:n]`` becomes ``slice``.
- A number with a decimal point is a DOUBLE: Spark would make it a DECIMAL, whose division
  rules differ from DuckDB's (which divides in DOUBLE).
- ``printf`` becomes ``gigi_printf``, a function the Spark engine registers that formats as
  DuckDB does (C rules; Java's ``format_string`` rounds halves up).
- ``getvariable('name')`` becomes the parameter's value.

Where a query still does not transpile, its Spark form is written beside it
(``name.spark.sql``) and used instead (``spark_text``).
"""

from __future__ import annotations

import re
from pathlib import Path

from gigi.errors import DetectorError, did_you_mean

_VARIABLE = re.compile(r"getvariable\('(\w+)'\)")
MIN_BY_MAX = 100_000  # the largest n Spark's min_by(x, y, n) takes


def spark_text(path: Path) -> str:
    """The Spark form written beside a .sql file if there is one, else the file itself."""
    beside = path.with_name(path.name.removesuffix(".sql") + ".spark.sql")
    return beside.read_text() if beside.is_file() else path.read_text()


def substitute(sql: str, variables: dict[str, float], where: str = "query") -> str:
    def value(m: re.Match) -> str:
        name = m.group(1)
        if name not in variables:
            raise DetectorError(f"{where}: no parameter {name!r}{did_you_mean(name, variables)}")
        return f"CAST({float(variables[name])!r} AS DOUBLE)"

    return _VARIABLE.sub(value, sql)


def to_spark(sql: str, variables: dict[str, float] | None = None, where: str = "query") -> str:
    """``sql`` (DuckDB's dialect, one statement) in Spark's."""
    import sqlglot
    from sqlglot import exp

    tree = sqlglot.parse_one(substitute(sql, variables or {}, where), read="duckdb")
    if not isinstance(tree, exp.Query):  # a detector's Spark form is one query, as its own
        raise DetectorError(
            f"{where}: refused: a {tree.key.upper()} statement; only one read-only query "
            "(SELECT or WITH ... SELECT) runs on Spark"
        )
    for node in list(tree.walk())[::-1]:  # children before their parents
        new = _rewrite(node, exp, sqlglot)
        if new is not None and new is not node:
            if node is tree:
                tree = new
            else:
                node.replace(new)
    return tree.sql(dialect="spark")


def _rewrite(node, exp, sqlglot):
    if isinstance(node, exp.Anonymous) and node.name.lower() == "printf":
        fmt, *args = node.expressions
        strings = exp.Array(expressions=[exp.cast(a.copy(), "STRING") for a in args])
        return exp.Anonymous(this="gigi_printf", expressions=[fmt.copy(), strings])
    if isinstance(node, exp.Literal) and not node.is_string:
        text = node.this
        parent = node.parent
        already = isinstance(parent, exp.Cast) and parent.to.is_type("double")
        if "." in text and "e" not in text.lower() and not already:
            return exp.cast(node.copy(), "DOUBLE")
        return None
    if isinstance(node, exp.Bracket) and len(node.expressions) == 1:
        target, index = node.this.copy(), node.expressions[0]
        if isinstance(index, exp.Slice):
            lo = index.this.copy() if index.this is not None else exp.Literal.number(1)
            hi = index.expression
            if hi is None:
                length = exp.Anonymous(this="size", expressions=[target.copy()])
            else:
                length = exp.Sub(this=hi.copy(), expression=exp.Paren(this=lo.copy()))
                length = exp.Add(this=length, expression=exp.Literal.number(1))
            return exp.Anonymous(this="slice", expressions=[target, lo, length])
        return exp.Anonymous(this="element_at", expressions=[target, index.copy()])
    if isinstance(node, (exp.ArgMin, exp.ArgMax)) and node.args.get("count") is not None:
        # min_by(x, key, n): sqlglot drops the n for Spark, which takes it
        return exp.Anonymous(
            this="MIN_BY" if isinstance(node, exp.ArgMin) else "MAX_BY",
            expressions=[node.this.copy(), node.expression.copy(), node.args["count"].copy()],
        )
    if isinstance(node, exp.ArrayAgg) and isinstance(node.this, exp.Order):
        order = node.this
        value = order.this
        if isinstance(value, exp.Distinct):
            (inner,) = value.expressions
            text = f"ARRAY_SORT(COLLECT_SET({inner.sql('spark')}))"
            return sqlglot.parse_one(text, read="spark")
        keys = []
        for i, o in enumerate(order.expressions):
            key = o.this.sql("spark")
            keys.append(f"'k{i}', {'-(' + key + ')' if o.args.get('desc') else key}")
        entry = f"NAMED_STRUCT({', '.join(keys)}, 'v', {value.sql('spark')})"
        first = _first_n(node, exp)
        if first is not None:
            # the n least entries, in the order ARRAY_SORT gives them (the same struct
            # ordering, ties broken by the value); the slice around it cuts nothing more
            return exp.Anonymous(
                this="MIN_BY",
                expressions=[
                    value.copy(),
                    sqlglot.parse_one(entry, read="spark"),
                    exp.Literal.number(first),
                ],
            )
        text = f"TRANSFORM(ARRAY_SORT(COLLECT_LIST({entry})), s -> s.v)"
        return sqlglot.parse_one(text, read="spark")
    return None


def _first_n(node, exp) -> int | None:
    """n when ``node`` is cut to its first n elements (``[:n]`` or ``[1:n]``, n a number)."""
    parent = node.parent
    if not (
        isinstance(parent, exp.Bracket)
        and parent.this is node
        and len(parent.expressions) == 1
        and isinstance(parent.expressions[0], exp.Slice)
    ):
        return None
    lo, hi = parent.expressions[0].this, parent.expressions[0].expression
    if lo is not None and not (isinstance(lo, exp.Literal) and lo.this == "1"):
        return None
    if not (isinstance(hi, exp.Literal) and not hi.is_string and hi.this.isdigit()):
        return None
    return int(hi.this) if 0 < int(hi.this) <= MIN_BY_MAX else None


def gigi_printf(fmt: str | None, args: list[str | None] | None) -> str | None:
    """DuckDB's ``printf`` over arguments passed as text (Spark's cast to STRING, which
    keeps every digit of a DOUBLE): ``%d`` takes an integer, ``%f``/``%e``/``%g`` a float.

    >>> gigi_printf("%d tasks waited %.1f s, %.0f%%", ["3", "0.25", "12.5"])
    '3 tasks waited 0.2 s, 12%'
    """
    if fmt is None or args is None or any(a is None for a in args):
        return None
    values: list[object] = []
    specs = [m for m in _SPEC.finditer(fmt) if m.group(1) != "%"]
    for spec, arg in zip(specs, args, strict=False):
        letter = spec.group(1)
        if letter in "di":
            values.append(int(float(arg)) if any(c in arg for c in ".eE") else int(arg))
        elif letter in "feEgG":
            values.append(float(arg))
        else:
            values.append(arg)
    return fmt % tuple(values)


_SPEC = re.compile(r"%[-+ #0]*\d*(?:\.\d+)?([%a-zA-Z])")
