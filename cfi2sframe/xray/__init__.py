"""XRay traces (LLVM's flight data recorder and basic modes): bytes in, records out.

``records`` reads the header and the records as they are written, ``expand`` gives
each function call and event its absolute TSC, CPU, thread, process and arguments as
``llvm-xray`` expands them, ``check`` lists every problem of a trace.  No container:
symbolizing through a binary's ``xray_instr_map`` builds on ``expand``'s function IDs.
"""
