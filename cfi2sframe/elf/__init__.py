"""The ELF container: ``read`` (headers, sections, segments, symbols), ``reloc``
(relocations of one section), and the two writers, ``obj`` (adds ``.sframe`` to a
relocatable object) and ``linked`` (adds a loadable ``.sframe`` to a linked file, with
``grow``)."""
