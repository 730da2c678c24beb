"""Communicator families of a job: how its communicators were made and the traffic and time
of each family (issue #27; docs/families.md)."""
