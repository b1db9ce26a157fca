"""Culprit groups: blame added up over tasks that are one thing to a person.

Seven hundred transactions of one UPDATE from eight sessions are, to whoever reads the
diagnosis, one culprit: the statement. Blame is summed two ways:

- by **name**, normalized as pg_stat_statements and performance_schema digests do: literals
  (numbers, quoted strings, hex) become ``?`` and ``IN (?, ?, ?)`` becomes ``IN (...)``;
- by **lineage**: each task under the task at the top of its chain of parents (a session
  above its transactions and their statements, a request above its children).

A group of one task says nothing its task does not, so only groups of two tasks or more are
kept.
"""

from __future__ import annotations

import re

_QUOTED = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"")
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:0x[0-9a-fA-F]+|\d+(?:\.\d+)*(?:[eE][-+]?\d+)?)(?![\w])")
_IN_LIST = re.compile(r"\(\s*\?(?:\s*,\s*\?)+\s*\)")
_SPACE = re.compile(r"\s+")
# how many groups of each kind a finding names
MOST = 5
# the most blamed tasks a resource's groups are formed of (the rest only count in the total)
LARGEST = 2_000


def normalize_name(name: str | None) -> str:
    """A task's name with its literals replaced, so that runs of one statement or route share
    it.

    >>> normalize_name("UPDATE t SET v = v + 5 WHERE id = 17")
    'UPDATE t SET v = v + ? WHERE id = ?'
    >>> normalize_name("SELECT * FROM t1 WHERE name IN ('a', 'b''c', 'd')")
    'SELECT * FROM t1 WHERE name IN (...)'
    >>> normalize_name("txn 3.41")
    'txn ?'
    >>> normalize_name("GET /items/981 (conn 0x7f3a)")
    'GET /items/? (conn ?)'
    """
    if not name:
        return "(unnamed)"
    text = _QUOTED.sub("?", name)
    text = _NUMBER.sub("?", text)
    text = _IN_LIST.sub("(...)", text)
    return _SPACE.sub(" ", text).strip()


def _sql_list(values) -> str:
    return ", ".join(str(int(v)) for v in values)


def _roots(engine, tasks: list[int]) -> dict[int, int]:
    """task -> the task at the top of its chain of parents (itself when it has none)."""
    parent: dict[int, int | None] = {}
    frontier = set(tasks)
    for _ in range(64):  # chains deeper than this are cut there
        frontier -= parent.keys()
        if not frontier:
            break
        for task, up in engine.rows(
            f"SELECT task, parent FROM tasks WHERE task IN ({_sql_list(sorted(frontier))})"
        ):
            parent[int(task)] = None if up is None or up == task else int(up)
        for task in frontier:  # a task with no row in the tasks table has no parent known
            parent.setdefault(task, None)
        frontier = {up for task in frontier if (up := parent[task]) is not None}
    roots = {}
    for task in tasks:
        seen, top = {task}, task
        while (up := parent.get(top)) is not None and up not in seen:
            seen.add(up)
            top = up
        roots[task] = top
    return roots


def _names(engine, tasks) -> dict[int, str]:
    tasks = sorted(set(tasks))
    if not tasks:
        return {}
    rows = engine.rows(f"SELECT task, name FROM tasks WHERE task IN ({_sql_list(tasks)})")
    return {int(t): n for t, n in rows if n}


def blame_by_culprit(engine, resource: str) -> dict[int, float]:
    """culprit -> wait ns blamed on it, for one resource, in whole nanoseconds: engines sum
    in different orders, and ties must break by task id, not by rounding noise."""
    quoted = "'" + resource.replace("'", "''") + "'"
    return {
        int(c): float(round(ns))
        for c, ns in engine.rows(
            f"SELECT culprit, sum(blame_ns) FROM metrics_blame WHERE resource = {quoted} "
            "GROUP BY culprit"
        )
        if ns and round(ns)
    }


def culprit_groups(engine, weights: dict[int, float]) -> list[dict]:
    """The groups by name and by lineage of the tasks in ``weights`` (task -> its blame, or 1
    each where there is none), the largest share first, at most ``MOST`` of each kind."""
    if not weights:
        return []
    total = sum(weights.values()) or 1.0
    if len(weights) > LARGEST:  # the tail's tasks count in the total, not in a group
        kept = sorted(weights, key=lambda t: (-weights[t], t))[:LARGEST]
        weights = {t: weights[t] for t in kept}
    names = _names(engine, weights)
    roots = _roots(engine, list(weights))
    root_names = _names(engine, set(roots.values()) - names.keys())
    root_names.update(names)
    groups = []
    for by, key_of, label_of in (
        ("name", lambda t: normalize_name(names.get(t)), lambda key: key),
        ("lineage", lambda t: roots[t], lambda key: root_names.get(key, f"task {key}")),
    ):
        members: dict[object, list[int]] = {}
        for task in weights:
            members.setdefault(key_of(task), []).append(task)
        found = []
        for key, tasks in members.items():
            if len(tasks) < 2:
                continue
            tasks.sort(key=lambda t: (-weights[t], t))
            share = sum(weights[t] for t in tasks) / total
            entry = {"by": by, "name": label_of(key), "tasks": len(tasks)}
            if by == "lineage":
                entry["root_task"] = key
            entry |= {"blame_share": round(share, 4), "first_tasks": tasks[:5]}
            found.append((str(key), entry))
        found.sort(key=lambda f: (-f[1]["blame_share"], -f[1]["tasks"], str(f[1]["name"]), f[0]))
        found = [entry for _, entry in found]
        groups += found[:MOST]
    return groups
