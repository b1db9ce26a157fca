"""What a report shows and how finely: the one configuration of ``gigi.report.render``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class ReportConfig:
    # Root the sites' relative ``file`` paths are relative to. The lines around each site are
    # copied into the page, so the page then holds source code: mind where it is sent. Paths
    # that leave the root are refused. None: the page says "source not available".
    source: Path | None = None
    # Time windows per plot: finer shows shorter episodes; each window adds about 30 bytes per
    # series to the page and a little to the timeline query.
    windows: int = 200
    # Lines of code shown before and after a site's own line.
    context_lines: int = 3
    # Culprits whose holds are marked on a finding's plot, most responsible first.
    culprits_marked: int = 3
    # Resources plotted on a healthy trace's page, most waited for first.
    healthy_resources: int = 12
