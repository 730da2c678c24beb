"""stacklens collector: receives hook frames, validates them and stores them in PostgreSQL."""
