"""The subcommands: the module that runs each and its line in ``--help`` (apart from
``cli/__init__``, which imports the subcommand modules that read it)."""

# Subcommand -> (module in this package, one line for --help).
SUBCOMMANDS = {
    "dump": ("dump", "print an SFrame section as readelf --sframe does"),
    "lookup": ("lookup", "the CFA/FP/RA recovery rules at given PCs"),
    "diff": ("diff", "compare two SFrame sections by meaning, PC by PC"),
    "verify": ("verify", "check a file's SFrame against its own DWARF CFI at every PC"),
    "stats": ("stats", "SFrame coverage and sizes for ELF files"),
    "compact": ("compact", "Apple compact unwind encodings from the same CFI"),
    "extract": ("extract", "write one section's bytes (__unwind_info, .sframe) to a file"),
    "stacks": ("stacks", "an XRay trace's call stacks: folded, Chrome trace events, account"),
    "unwind": ("unwind", "walk a register and stack snapshot with SFrame or compact unwind"),
}
