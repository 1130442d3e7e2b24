"""Read-only questions over a project: SQL over cached results, listing, doctor, the DAG picture,
the manual."""
