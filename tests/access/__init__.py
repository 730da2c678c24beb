"""Tests of identity and access (server/access/)."""
