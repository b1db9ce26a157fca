"""Diagnosis: metrics, detectors, attribution, chains and ranking over one trace."""
