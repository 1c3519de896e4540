"""Readers: each turns one artifact format into typed records. All file I/O lives here."""
