"""Recorders for servers that expose their own resource state (MariaDB's performance_schema,
PostgreSQL's lock and activity views): they poll it and write trace format v1, knowing nothing
of analysis."""
