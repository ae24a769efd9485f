# The compiled core (cfi2sframe/csrc/, one C file per Python module it mirrors, named
# after it: sframe_fastpath.c, sframe_encode.c, sframe_decode.c, sframe_dump.c,
# sframe_selfcheck.c,
# dwarf_replay.c, dwarf_cfi.c, elf_reloc.c, compact_listing.c, compact_table.c,
# compact_check.c, compact_lower.c, compact_text.c, table_writer.c, analysis_compare.c,
# analysis_stats.c, frontend_scan.c, xray.c, files.c; module.c the module); xray/text.py,
# xray/fast.py, sframe/fastpath.py, sframe/build.py, sframe/encode.py, sframe/decode.py,
# sframe/dump.py, sframe/selfcheck.py, elf/reloc.py, compact/listing.py, compact/table.py,
# compact/check.py, compact/lower.py, compact/table_writer.py, cli/compact.py (compact_text.c's),
# dwarf/cfi.py, frontend/scan.py,
# analysis/compare.py, analysis/stats.py and files.py hold the reference of each function.

from collections.abc import Callable
from typing import Any

OPCODES: dict[str, int]
EH_PE: dict[str, int]
ROW_STATE: dict[str, int]
UNWIND_INFO: dict[str, int]
UNWIND_TABLE: dict[str, int]

_State = tuple[int, int, int | None, int | None, bool]

# A target's and format's parameters by name, built once in Python (fastpath.core_target,
# build._lower_params, cfi._eh_target, stats._scan_params, decode._Reader.fre_params);
# the core reads each by its name.
_Params = dict[str, object]

def fast_fres(body: bytes, start: _State, code_align: int, data_align: int,
              shapes: dict[_State, tuple[object, ...] | None], target: _Params
              ) -> tuple[object, ...] | None: ...

def fres_bytes(fres: tuple[tuple[object, ...], ...], addr_size: int, big_endian: bool,
               tails: dict[tuple[object, ...], bytes],
               tail_of: Callable[[tuple[object, ...]], bytes]) -> bytes: ...

def decode_fres(data: bytes, pos: int, count: int, addr_size: int, flex: bool,
                section: _Params) -> tuple[tuple[object, ...], int] | None: ...

def unwind_info_text(section: bytes, base: int, image: bytes,
                     symtab: tuple[int, int, int, int], wide: bool,
                     words: Callable[[int, int], str], stack_ind: int
                     ) -> tuple[str, list[tuple[object, ...]]] | None: ...

def unwind_info_entries(section: bytes) -> tuple[
        list[int], list[int], list[int | None], list[int | None], int,
        list[tuple[object, ...]]] | None: ...

def unwind_info_rows(section: bytes, offsets: list[int]
                     ) -> list[tuple[int, int] | None] | None: ...

def unwind_info_misses(section: bytes, offsets: list[int], lengths: list[int],
                       encodings: list[int]) -> list[int] | None: ...

def unwind_info_build(offsets: list[int], lengths: list[int], encodings: list[int],
                      personalities: list[int | None], lsdas: list[int | None],
                      fde_offsets: list[int | None], *, dwarf: int, stack_ind: int,
                      max_common: int, max_index: int, max_compressed: int,
                      max_regular: int, max_personalities: int, reach: int, fde_mask: int
                      ) -> tuple[bytes, list[int], list[int], list[int]] | tuple[str, int] \
        | None: ...

def image_entries(*, offsets: list[int], ends: list[int], encodings: list[int],
                  in_code: dict[int, object], fde_starts: dict[int, int], relocated: bool,
                  code_problem: Callable[[int, int, int], str | bool | None], image: bytes,
                  sections: tuple[tuple[int, int, int], ...], base: int, mode_mask: int,
                  dwarf: int, stack_ind: int, reach: int
                  ) -> tuple[int, int, list[tuple[object, ...]]] | None: ...

def fde_extents(*, eh: bytes, address: int, address_size: int,
                cie_of: Callable[[int], object], code: tuple[tuple[int, int], ...]
                ) -> tuple[int, int, tuple[int, int, int] | None, list[int],
                           dict[int, int]] | None: ...

def relocate(contents: bytearray, rel: bytes, is64: bool, little: bool, rela: bool,
             kinds: dict[int, tuple[int, bool]],
             target_of: Callable[[int], tuple[str, int] | str]
             ) -> dict[int, tuple[str, int]] | None: ...

def rela_within(rela: bytes, symbols: bytes, big: bool, start: int, stop: int) -> bool: ...

def sframe_dump(data: bytes, first: int, last: int, *, fde_start: int, entry: int,
                fre_start: int, fre_end: int, version: int, big: bool, pcrel: bool,
                address: int, aarch64: bool, masks: tuple[object, ...],
                fre_table: tuple[tuple[bool, int, int, bool, int], ...],
                columns_of: Callable[[bool, int, tuple[int, ...]], str],
                heads: tuple[str, str], text: bool) -> str | int | None: ...

def lower_fdes(fdes: tuple[tuple[object, ...], ...],
               cies: dict[int, tuple[object, ...]],
               shapes: dict[_State, tuple[object, ...] | None],
               direct: dict[tuple[int, bytes], tuple[object, ...] | None], params: _Params
               ) -> list[tuple[object, ...] | None]: ...

# lower_fdes of a linked file's .eh_frame bytes: (per FDE its function or None, the
# None FDEs' offsets, FDE count), or None (the section is out of the ordinary).
def eh_functions(eh: bytes, address: int, address_size: int,
                 names: dict[tuple[str, int], str],
                 cie_of: Callable[[int], tuple[object, ...]], params: _Params
                 ) -> tuple[list[tuple[object, ...] | None], list[int], int] | None: ...

# eh_functions' pass to an SFrame V2 section's sorted FDE table: (starts, FDEs without
# their start fields, FRE bytes, FRE count, function count, FDE count), or None.
def eh_table_v2(eh: bytes, address: int, address_size: int,
                cie_of: Callable[[int], tuple[object, ...]], params: _Params,
                general: Callable[[list[int]], list[tuple[tuple[object, ...], ...]] | None],
                encoding: tuple[dict[tuple[object, ...], bytes],
                                Callable[[tuple[object, ...]], bytes], tuple[int, ...], int,
                                int]) -> tuple[bytes, bytes, bytes, int, int, int] | None: ...

# A V2 FDE table placed: each start less its field's address; or the index of the first
# start out of a signed 32-bit field's range.
def place_fdes(starts: bytes, fdes: bytes, first: int, fde_size: int,
               big_endian: bool) -> bytes | int: ...

def fdes_v2(functions: tuple[tuple[object, ...], ...], big_endian: bool,
            tails: dict[tuple[object, ...], bytes],
            tail_of: Callable[[tuple[object, ...]], bytes], addr_sizes: tuple[int, ...],
            pc_mask_bit: int, pauth_bit: int) -> tuple[tuple[bytes, ...], bytes, int]: ...

def eh_fdes(eh: bytes, address: int, names: dict[tuple[str, int], str],
            cie_of: Callable[[int], object], placements: dict[int, tuple[str, int]],
            target: _Params) -> list[tuple[object, ...]] | None: ...

# One FDE body's rows by the replay's full mode (every register's rule), or None (the
# interpreter decides); params: replay_params' capsule (cfi._replay).
def cfi_rows(body: bytes, initial: bytes, params: object) -> tuple[object, ...] | None: ...

# cfi_rows' parameters (code_align, data_align, big_endian, row_type, states and state_of
# by name, cfi._replay_params) read once: a capsule.
def replay_params(params: _Params) -> object: ...

# compact/lower.state_ids: each row's state objects' addresses, in order.
def row_state_ids(rows: tuple[object, ...]) -> bytes: ...

# cli/compact._Rows.text: compact's listing of functions (text, compact, inexact,
# inexact in the body), or None (the Python formatter decides).
def compact_rows_text(functions: list[Any], tail: Callable[[Any, Any], tuple[str, bool]],
                      check: bool) -> tuple[str, int, int, int] | None: ...

# compact/lower.placed_spans: a placed row's inexact spans and exact bytes.
def placed_spans(rows: tuple[tuple[object, ...], ...], exact: tuple[int, ...], size: int
                 ) -> tuple[tuple[tuple[int, int], ...], int] | None: ...

# agree's checker: the target's sp, fp, ra, tracks_ra, the byte order, then states,
# state_of, fre_ids, fre_id_of and none_id; built once per check (compare._FastCheck).
_Checker = tuple[int, int, int, bool, bool, dict[object, int | None],
                 Callable[[_State], int | None], dict[object, int | None],
                 Callable[[tuple[int, tuple[int, ...]]], int | None], int]

def agree(body: bytes, start: _State, code_align: int, data_align: int, size: int,
          fres: tuple[tuple[object, ...], ...], checker: _Checker) -> bool: ...

# verify_scan's object placements: .eh_frame's relocated fields and their sections'
# bases, .sframe's and theirs, the name of a field no relocation placed, the span.
_Placed = tuple[dict[int, tuple[str, int]], dict[str, int], dict[int, tuple[str, int]],
                dict[str, int], str, int]

def verify_scan(eh: bytes, sframe: bytes, *, eh_address: int, address_size: int,
                big_endian: bool, fde_start: int, entry: int, count: int, version: int,
                pcrel: bool, address: int, fre_start: int, fre_end: int, num_fres: int,
                fre_type_mask: int, pc_mask_bit: int, unused_bits: int, fde_type_mask: int,
                flex_type: int, fre_addr_sizes: tuple[int, ...], attr_size: int, sp: int,
                fp: int, ra: int, tracks_ra: bool,
                fre_table: tuple[tuple[bool, int, int, bool, int], ...],
                states: dict[object, int | None], state_of: Callable[[_State], int | None],
                fre_ids: dict[object, int | None],
                fre_id_of: Callable[[bytes], int | None], placed: _Placed | None,
                counts: _Counts | None
                ) -> tuple[int, bytearray, list[int]] | tuple[int, bytearray, list[int],
                                                              _Counted] | None: ...

# stats_scan's memos and parameters (also verify_scan's ``counts``), and its answer:
# FDEs, functions, V2 and V3 FRE bytes, the FDEs left, the lowest and highest start.
_Counts = tuple[dict[_State, tuple[object, ...] | None],
                dict[tuple[object, ...], tuple[int, int]], _Params]
_Counted = tuple[int, int, int, int, list[int], int, int]

def stats_scan(eh: bytes, eh_address: int, shapes: dict[_State, tuple[object, ...] | None],
               sizes: dict[tuple[object, ...], tuple[int, int]], params: _Params
               ) -> _Counted | None: ...

def scan_cfi(text: str, comment_chars: str, statement: type
             ) -> tuple[list[tuple[str, int, int]], list[tuple[str, int, int]]] | None: ...

def with_labels(text: str, offsets: tuple[int, ...], prefix: str) -> str | None: ...

def probe_symbols(symtab: bytes, strtab: bytes, is64: bool, big_endian: bool, prefix: bytes,
                  count: int) -> tuple[list[tuple[int, int] | None], list[int]] | None: ...

def function_names(symtab: bytes, strtab: bytes, is64: bool, big_endian: bool, limit: int,
                   sections: tuple[str, ...] | None) -> dict[tuple[str, int], str]: ...

def fde_index(data: bytes, *, fde_start: int, count: int, entry: int, wide: bool, big: bool,
              base: int, step: int) -> tuple[bytes, bytes, bool] | None: ...

def sframe_check(data: bytes, *, fde_start: int, count: int, entry: int, fre_start: int,
                 fre_end: int, version: int, big: bool, pcrel: bool, address: int,
                 sorted: bool, num_fres: int, unused: int,
                 masks: tuple[object, ...]) -> bool | None: ...

def xray_labels(labels: dict[int, str]) -> object | None: ...

def xray_dump(data: bytes, at: int, stop: int | None, labels: object | None, lines: int
              ) -> tuple[str, int, int | None, bool]: ...

def xray_stacks(data: bytes, per_thread: bool
                ) -> tuple[list[tuple[int | None, tuple[int, ...], int, int, int]],
                           list[tuple[int, int, int]]] | None: ...

def start_writeback(fd: int) -> bool: ...

def close_later(fd: int) -> bool: ...

def copy_later(source: int, target: int, length: int, step: int, ahead: int,
               replaced: int = ...) -> int | None: ...
