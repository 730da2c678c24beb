"""Traffic attribution: every inter-host flow of every job routed over the fabric's
forwarding tables, and each link's measured bytes split into job x layer plus `other`."""
