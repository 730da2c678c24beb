"""Call sites of a job: where in the program its MPI and I/O time is spent (issue #26;
docs/callsites.md)."""
