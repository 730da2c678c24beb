"""Tests of identity: proven senders (MUNGE, SO_PEERCRED) and job ownership (#13)."""
