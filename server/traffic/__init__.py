"""The traffic domain: what each job sends and over which links: its monitored traffic (the
MPI's own counts per peer, monitored.py), and every inter-host flow routed over the
fabric's forwarding tables so each link's measured bytes split into job x category plus
`other` (attribution.py)."""
