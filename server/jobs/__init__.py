"""Jobs domain: job list, and per job its rank x rank traffic, MPI operations and file I/O."""
