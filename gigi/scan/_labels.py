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


MAX_SITES = 3  # sites per labeled function a user can still read


def kinds_right(found: set[str], labeled: set[str]) -> bool:
    """Whether the kinds a scan gave a function are its labeled ones: every labeled kind found,
    and nothing else but a USE (which kind of access a function's job is reads differently
    to different readers; an ACQUIRE where a RELEASE is does not)."""
    return labeled <= found and found - labeled <= {"USE"}


def evaluate_functions(result: ScanResult, labels: dict) -> dict:
    """A scan against function labels (``tests/scan_real/*.json``: ``functions`` with their
    ``kinds``, and ``decoys``), per stage ('recall': proposed; 'verified': after
    verification): labeled functions found, with their kinds right, sites per labeled
    function, decoys hit, and functions of the labeled files hit that are neither (false
    positives, as the labels are complete within their files). Matched by file and function:
    resources are named differently by different readers."""
    labeled: dict[tuple[str, str], set[str]] = {}
    for f in labels["functions"]:
        labeled.setdefault((f["file"], f["function"]), set()).update(f["kinds"])
    decoys = {(d["file"], d["function"]) for d in labels.get("decoys", [])}
    files = set(labels["files"])
    out: dict = {"labeled": len(labeled), "decoys": len(decoys)}
    for stage in ("recall", "verified"):
        kinds: dict[tuple[str, str], set[str]] = {}
        sites: dict[tuple[str, str], set[tuple[str, int]]] = {}
        for c, ok, _ in result.candidates:
            if (stage == "verified" and not ok) or c.file not in files:
                continue
            key = (c.file, c.function)
            kinds.setdefault(key, set()).add(c.kind)
            sites.setdefault(key, set()).add((c.kind, c.line))
        found = [k for k in labeled if k in kinds]
        right = [k for k in found if kinds_right(kinds[k], labeled[k])]
        crowded = [k for k in found if len(sites[k]) > MAX_SITES]
        other = sorted(k for k in kinds if k not in labeled and k not in decoys)
        # per kind, by function: of the functions labeled with it, those given it (recall);
        # of the functions given it, those labeled with it (precision)
        per_kind = {}
        for kind in KINDS:
            truth = {k for k, ks in labeled.items() if kind in ks}
            given = {k for k, ks in kinds.items() if kind in ks}
            hit = len(truth & given)
            per_kind[kind] = {
                "labeled": len(truth),
                "given": len(given),
                "recall": hit / len(truth) if truth else 1.0,
                "precision": hit / len(given) if given else 1.0,
            }
        out[stage] = {
            "per_kind": per_kind,
            "found": len(found),
            "recall": len(found) / len(labeled) if labeled else 1.0,
            "kind_right": len(right) / len(found) if found else 1.0,
            "crowded": len(crowded),
            "sites_max": max((len(sites[k]) for k in found), default=0),
            "decoys_hit": sum(k in kinds for k in decoys),
            "decoy_rate": sum(k in kinds for k in decoys) / len(decoys) if decoys else 0.0,
            "unlabeled_hit": len(other),
            "precision": len(found) / (len(found) + len(other) + sum(k in kinds for k in decoys))
            if kinds
            else 1.0,
            "missed": sorted(
                f"{f}:{fn} {'+'.join(sorted(labeled[(f, fn)]))}"
                for f, fn in labeled
                if (f, fn) not in kinds
            ),
            "wrong_kind": sorted(
                f"{f}:{fn} labeled {'+'.join(sorted(labeled[(f, fn)]))} "
                f"found {'+'.join(sorted(kinds[(f, fn)]))}"
                for f, fn in found
                if (f, fn) not in right
            ),
            "false": [f"{f}:{fn} {'+'.join(sorted(kinds[(f, fn)]))}" for f, fn in other]
            + [f"{f}:{fn} (decoy)" for f, fn in sorted(decoys) if (f, fn) in kinds],
        }
    return out
