"""Reading-side analysis: ``compare`` (diff two SFrame sections, verify one against
the file's DWARF CFI) and ``unwind`` (the stack walker, SFrame and compact unwind)."""
