"""Frontends: turn inputs (assembly now, ELF later) into ``Timeline`` objects."""
