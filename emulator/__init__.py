"""The InfiniBand fabric emulator used by `stacklens fabric-sim`, the demo, tests and benchmarks.

Not part of the product's data path: the sampler (collector/fabric) reads any fabric it can
reach through MAD or sysfs, and finds a running emulator only through the attach file that
`stacklens fabric-sim` writes. Modules: `fattree` (ibsim topology files), `ibsim` (ibsim +
opensm, counter moves for emulated flows, faults), `jobtraffic` (the flows of the jobs
stored in the database).
"""
