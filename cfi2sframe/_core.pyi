# The compiled core (_core.c, _core_reloc.c, _core_sframe_dump.c, _core_unwind_info.c);
# sframe/fastpath.py, sframe/encode.py, sframe/decode.py, sframe/dump.py, elf/reloc.py
# and compact/listing.py hold the
# reference of each function.

from collections.abc import Callable

OPCODES: dict[str, int]

_State = tuple[int, int, int | None, int | None, bool]

def fast_fres(body: bytes, start: _State, code_align: int, data_align: int, sp: int, fp: int,
              ra: int, tracks_ra: bool, big_endian: bool, fre_type: type,
              shapes: dict[_State, tuple[object, ...] | None],
              shape_of: Callable[[_State], tuple[object, ...] | None]
              ) -> tuple[object, ...] | None: ...

def fres_bytes(fres: tuple[tuple[object, ...], ...], addr_size: int, big_endian: bool,
               tails: dict[tuple[object, ...], bytes],
               tail_of: Callable[[tuple[object, ...]], bytes]) -> bytes: ...

def decode_fres(data: bytes, pos: int, end: int, count: int, addr_size: int,
                big_endian: bool, flex: bool, fre_type: type,
                table: tuple[tuple[bool, int, int, bool, int], ...]
                ) -> tuple[tuple[object, ...], int] | None: ...

def unwind_info_text(section: bytes, base: int, image: bytes,
                     symtab: tuple[int, int, int, int], wide: bool,
                     words: Callable[[int, int], str], stack_ind: int
                     ) -> tuple[str, list[tuple[object, ...]]] | None: ...

def relocate(contents: bytearray, rel: bytes, is64: bool, little: bool, rela: bool,
             kinds: dict[int, tuple[int, bool]],
             target_of: Callable[[int], tuple[str, int] | str]
             ) -> dict[int, tuple[str, int]] | None: ...

def sframe_dump(data: bytes, fde_start: int, first: int, last: int, entry: int,
                fre_start: int, fre_end: int, version: int, big: bool, pcrel: bool,
                address: int, aarch64: bool, masks: tuple[object, ...],
                fre_table: tuple[tuple[bool, int, int, bool, int], ...],
                columns_of: Callable[[bool, int, tuple[int, ...]], str],
                heads: tuple[str, str], text: bool) -> str | int | None: ...
