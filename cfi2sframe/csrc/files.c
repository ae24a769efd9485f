/* The compiled core's part of ``files.py``: ``start_writeback`` asks the kernel to
 * start writing a new file's dirty pages to the disk and returns without waiting for
 * them (Linux's ``sync_file_range`` with ``SYNC_FILE_RANGE_WRITE`` alone), so that the
 * written file's check runs while the disk works and the ``fsync`` after it waits for
 * less; the pages stay in the page cache, where the check reads them.  Only a hint:
 * the ``fsync`` is what makes the file durable and what reports an error, so its own
 * failure is not looked at.  The reference, ``files._synced`` under
 * ``CFI2SFRAME_CORE=python``, asks nothing before the ``fsync``;
 * tests/system/test_hostile.py runs both against strace's injected failures. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <fcntl.h>

#include "core.h"

/* start_writeback(fd) -> whether the kernel was asked (False where there is no such
 * call, or it refused: the fsync does it all). */
PyObject *start_writeback(PyObject *Py_UNUSED(self), PyObject *args) {
    int fd;
    if (!PyArg_ParseTuple(args, "i:start_writeback", &fd))
        return NULL;
    int asked = 0;
#ifdef SYNC_FILE_RANGE_WRITE
    Py_BEGIN_ALLOW_THREADS
    asked = sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE) == 0;
    Py_END_ALLOW_THREADS
#endif
    return PyBool_FromLong(asked);
}
