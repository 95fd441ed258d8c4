"""Helpers shared by the tests, the demo and the benchmarks (not part of the installed
package: they depend on this checkout's paths and embedded models)."""
