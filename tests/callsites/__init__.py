# tests/callsites — a job's call sites: resolution stored, sites across ranks, the card (issue #26).
