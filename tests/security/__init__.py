"""Security tests: each finding of issue #12 reproduced, then fixed."""
