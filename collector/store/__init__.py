"""Store: writers that commit validated frames to PostgreSQL with COPY."""
