"""Scan C/C++ source for application resources and their WAIT/ACQUIRE/USE/RELEASE sites:
libclang parses, an offline heuristic or an LLM proposes, static verification keeps only what
it confirms, and ``write`` produces the sites and resources tables of trace format v1."""

from gigi.scan._parse import ScanError, builtin_include_dir
from gigi.scan._scan import ScanResult, report_of, scan, write

__all__ = ["ScanError", "ScanResult", "builtin_include_dir", "report_of", "scan", "write"]
