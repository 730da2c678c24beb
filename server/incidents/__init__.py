"""Incidents: detectors on the stored series, signals joined in time and topology."""
