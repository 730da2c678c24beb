"""The fabric domain: InfiniBand topology, link load and errors, topology events."""
