"""Apple compact unwind: encodings, rows and their check against the CFI."""
