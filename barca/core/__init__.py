"""The vocabulary every layer shares: errors, types, records, events, text tables, settings and
barca.toml. Imports no other barca package."""
