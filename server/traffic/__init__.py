"""The traffic domain: what each job puts on the wire and on which links (measured on-wire
bytes, routed and modelled attribution)."""
