"""The HTML report: one self-contained page of a diagnosis, with a plot per finding.

``render(diagnosis, ReportConfig(...))`` returns the page; it fetches nothing when opened (inline
CSS and SVG, no script), and every text of the trace in it is escaped.
"""

from gigi.report._config import ReportConfig
from gigi.report._page import render

__all__ = ["ReportConfig", "render"]
