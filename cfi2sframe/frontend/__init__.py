"""The assembly frontend: ``.cfi_*`` directives into ``Timeline`` objects, placed by a
real assembler run.  ELF input reaches the same ``Timeline``s through ``elf`` and
``dwarf``."""
