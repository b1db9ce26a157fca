"""Diagnosis: metrics, detectors, attribution, chains and ranking over one trace.

``diagnose(target)`` returns a ``Diagnosis``; ``Diagnosis.to_json()`` is the document that
``../shared/spec/diagnosis-output.md`` specifies.
"""

from gigi.diagnosis._diagnose import Diagnosis, Finding, diagnose

__all__ = ["Diagnosis", "Finding", "diagnose"]
