"""Run comparison: which runs are the same program (a history), and one run against another
or against the median of its history, with the differences ranked by their share of the
elapsed-time difference (docs/compare.md)."""
