"""Diagnosis: metrics, detectors, attribution, chains and ranking over one trace.

``diagnose(target)`` returns a ``Diagnosis``; ``Diagnosis.to_json()`` is the document that
the README's diagnosis output section describes.
"""

from gigi.diagnosis._diagnose import Diagnosis, Finding, Unexplained, Verdict, diagnose
from gigi.diagnosis._explain import explain

__all__ = ["Diagnosis", "Finding", "Unexplained", "Verdict", "diagnose", "explain"]
