"""The traffic domain: what each job puts on the wire and on which links: measured on-wire
bytes (wire.py), and every inter-host flow routed over the fabric's forwarding tables so
each link's measured bytes split into job x layer plus `other` (attribution.py)."""
