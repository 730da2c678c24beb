"""stacklens presentation: what the pages and the reports show of the API's data (the job
card registry, figures, formatting, report model); depends on the API contract only."""
