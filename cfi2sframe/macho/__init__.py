"""Mach-O: the container of Apple's compact unwind (objects, images, universal files)."""
