"""Writers: section bytes -> what a user needs (raw bytes, assembly, object)."""
