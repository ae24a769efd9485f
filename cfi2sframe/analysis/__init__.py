"""Reading-side analysis: ``compare`` (diff two SFrame sections, verify one against
the file's DWARF CFI) and ``unwind`` (the stack walker, SFrame and compact unwind)."""


def gdb_snapshot_path() -> str:
    """The gdb script defining ``snapshot JSON MAPS`` (``gdb_snapshot.py``, run by gdb's
    own Python, never imported here)."""
    from pathlib import Path

    return str(Path(__file__).with_name("gdb_snapshot.py"))
