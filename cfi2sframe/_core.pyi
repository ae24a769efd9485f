# The compiled core (_core.c); sframe/fastpath.py holds the reference of each function.

OPCODES: dict[str, int]

def fast_rows(body: bytes, start: tuple[int, int, int | None, int | None, bool],
              code_align: int, data_align: int, sp: int, fp: int, ra: int, tracks_ra: bool,
              big_endian: bool
              ) -> list[tuple[int, tuple[int, int, int | None, int | None, bool]]] | None: ...
