"""Support code for iceduck's tests and benchmarks (not shipped with the package): the reference peer."""
