"""Exports of a trace and its diagnosis for other tools: ``export_perfetto(target, out)``
writes a Chrome JSON trace that ui.perfetto.dev and the Perfetto trace processor open."""

from gigi.export._perfetto import ExportSummary, PerfettoConfig, export_perfetto

__all__ = ["ExportSummary", "PerfettoConfig", "export_perfetto"]
