"""Jobs domain: job list and per-job rank x rank traffic."""
