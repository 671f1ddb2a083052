"""Developer tooling (checks, benchmarks)."""
