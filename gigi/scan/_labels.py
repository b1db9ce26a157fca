"""Precision and recall of a scan against labels (``labels.json``: the true resources and
events of a source tree), per kind and per stage: what the recall proposed, and what passed
static verification."""

from __future__ import annotations

import json
from pathlib import Path

from gigi.scan._scan import KINDS, ScanResult

LINE_SLACK = 2  # a site within this many lines of the label's counts as placed right


def load_labels(path: str | Path) -> dict:
    labels = json.loads(Path(path).read_text())
    for key in ("resources", "events"):
        if key not in labels:
            raise ValueError(f"{path}: labels need {key!r}")
    return labels


def evaluate(result: ScanResult, labels: dict) -> dict:
    """Per kind and stage ('recall': proposed; 'verified': after verification): true
    positives, false positives, false negatives, precision, recall; and how many true
    positives sit within LINE_SLACK lines of the label."""
    truth = {(e["file"], e["function"], e["kind"], e["resource"]): e for e in labels["events"]}
    out: dict = {}
    for stage in ("recall", "verified"):
        found = {}
        for c, ok, _ in result.candidates:
            if stage == "verified" and not ok:
                continue
            found.setdefault((c.file, c.function, c.kind, c.resource), c)
        per = {}
        for kind in (*KINDS, "all"):
            t = {k for k in truth if kind in ("all", k[2])}
            f = {k for k in found if kind in ("all", k[2])}
            tp, fp, fn = t & f, f - t, t - f
            placed = sum(
                truth[k].get("line") is not None
                and abs(found[k].line - truth[k]["line"]) <= LINE_SLACK
                for k in tp
            )
            per[kind] = {
                "tp": len(tp),
                "fp": len(fp),
                "fn": len(fn),
                "precision": len(tp) / len(f) if f else 1.0,
                "recall": len(tp) / len(t) if t else 1.0,
                "placed": placed,
                "false_positives": sorted("/".join(k) for k in fp),
                "missed": sorted("/".join(k) for k in fn),
            }
        out[stage] = per
    true_res = {r["name"] for r in labels["resources"]}
    got_res = {g.name for g in result.resources}
    out["resources"] = {
        "tp": len(true_res & got_res),
        "fp": sorted(got_res - true_res),
        "fn": sorted(true_res - got_res),
    }
    return out
