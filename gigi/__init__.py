"""gigi: diagnose performance problems in application-defined resources.

Entry points: ``gigi.probes`` (record), ``gigi.ingest`` (trace to store), ``gigi.queries``
(SQL over a store or trace), and the ``gigi-query`` command.
"""

__version__ = "0.1.0"
