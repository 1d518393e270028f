"""Persistence: the database engine and sessions (SQLite or PostgreSQL), the SQLModel tables, the append-only audit
log, and the lease by which a process claims rows it works on (service/migrations holds the schema history)."""
