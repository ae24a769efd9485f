"""XRay traces (LLVM's flight data recorder and basic modes): bytes in, records out.

``records`` reads the header and the records as they are written, ``expand`` gives
each function call and event its absolute TSC, CPU, thread, process and arguments as
``llvm-xray`` expands them, ``check`` lists every problem of a trace; none of them
reads a container.  The binary's side: ``instr_map`` reads an instrumented ELF file's
``xray_instr_map`` into the functions behind the trace's IDs, ``coverage`` says which
of their entry and exit sleds unwind information covers.
"""
