"""Helpers the tests share: emulators, harnesses, builders. No tests live here."""
