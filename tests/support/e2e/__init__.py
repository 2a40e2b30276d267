"""The end-to-end harness and the scenes several end-to-end modules use."""
