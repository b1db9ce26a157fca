"""Diagnosis: metrics, detectors, attribution, chains and ranking over one trace.

>>> # diagnose(target) -> Diagnosis; Diagnosis.to_json() follows diagnosis-output.md
"""

from gigi.diagnosis._diagnose import Diagnosis, Finding, diagnose

__all__ = ["Diagnosis", "Finding", "diagnose"]
