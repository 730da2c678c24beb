"""Tests of the reports of a job, an incident and a fabric window (server/reports/)."""
