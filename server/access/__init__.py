"""Who is asking and what they may read: the viewer of each request (gate.py), API tokens
(tokens.py), OIDC login (oidc.py) and the one owner filter of every job query
(owner.py). See docs/access.md."""
