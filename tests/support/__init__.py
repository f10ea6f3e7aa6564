"""Test support shared by all unit tests: builders, a fake clock, an in-memory fake of the API client."""
