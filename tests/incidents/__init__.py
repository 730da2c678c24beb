"""Incidents of real jobs under the hooks: the victims by every kind of waiting and the call
sites they name (issue #31 points 2 and 5, issue #26 point 3)."""
