"""Reports: a job, a fabric window or an incident as one HTML or PDF file."""
