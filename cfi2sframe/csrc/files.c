/* The compiled core's part of ``files.py``: ``start_writeback`` asks the kernel to
 * start writing a new file's dirty pages to the disk and returns without waiting for
 * them (Linux's ``sync_file_range`` with ``SYNC_FILE_RANGE_WRITE`` alone), so that the
 * written file's check runs while the disk works and the ``fsync`` after it waits for
 * less; the pages stay in the page cache, where the check reads them.  Only a hint:
 * the ``fsync`` is what makes the file durable and what reports an error, so its own
 * failure is not looked at.  The reference, ``files._synced`` under
 * ``CFI2SFRAME_CORE=python``, asks nothing before the ``fsync``;
 * tests/system/test_hostile.py runs both against strace's injected failures.
 *
 * ``close_later`` closes a descriptor on a thread of its own: the last reference to a
 * file an ``--in-place`` rename replaced, whose freeing (the inode truncated, its
 * blocks discarded where the file system is mounted with ``discard``, its inode
 * written where it has no journal) waits on the disk for as long as the file's
 * ``fsync``; the worker goes on to its next file meanwhile.  The thread never takes
 * the GIL (a Python thread waited for it, ~1 ms a file); it reads descriptors from a
 * pipe and closes them, for the process's life; what is left at the exit the kernel
 * closes there, so a run ends only once every old inode is freed.  The reference,
 * ``files._close_later`` under ``CFI2SFRAME_CORE=python``, closes at once. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

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

/* The closing thread's pipe and the process that started it: a forked child (which
 * has no such thread) starts its own.  Read and changed with the GIL held. */
static int closer_in = -1, closer_out = -1;
static pid_t closer_pid = 0;
/* Descriptors queued and not yet closed: past CLOSER_MOST the caller closes its own,
 * so a slow disk never holds more than these open (the descriptor limit is ~1,024). */
#define CLOSER_MOST 64
static atomic_int closer_queued;

/* The closing thread: each descriptor read from the pipe closed (its errors are
 * nothing to report: a descriptor held only to keep an inode has nothing to flush). */
static void *closing(void *arg) {
    int in = (int)(intptr_t)arg, fd;
    for (;;) {
        ssize_t got = read(in, &fd, sizeof fd);
        if (got == (ssize_t)sizeof fd) {
            (void)close(fd);
            atomic_fetch_sub(&closer_queued, 1);
        } else if (got == 0 || (got < 0 && errno != EINTR))
            return NULL;  /* (never: the write end stays open for the process's life) */
    }
}

/* Whether this process has its closing thread, started now if not (all signals
 * blocked in it: they stay the main thread's). */
static int closer_running(void) {
    if (closer_pid == getpid())
        return 1;
    if (closer_pid != 0) {  /* a forked child: its parent's pipe is no use here */
        (void)close(closer_in);
        (void)close(closer_out);
        closer_pid = 0;
        atomic_store(&closer_queued, 0);
    }
    int ends[2];
    if (pipe2(ends, O_CLOEXEC) != 0)
        return 0;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t thread;
    int failed = pthread_create(&thread, NULL, closing, (void *)(intptr_t)ends[0]);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (failed) {
        (void)close(ends[0]);
        (void)close(ends[1]);
        return 0;
    }
    pthread_detach(thread);
    closer_in = ends[0];
    closer_out = ends[1];
    closer_pid = getpid();
    return 1;
}

/* close_later(fd) -> True once the closing thread has it, False where it was closed
 * here (no thread could be started, or CLOSER_MOST are queued). */
PyObject *close_later(PyObject *Py_UNUSED(self), PyObject *args) {
    int fd;
    if (!PyArg_ParseTuple(args, "i:close_later", &fd))
        return NULL;
    int queued = 0;
    if (closer_running() && atomic_load(&closer_queued) < CLOSER_MOST) {
        atomic_fetch_add(&closer_queued, 1);
        ssize_t put;
        Py_BEGIN_ALLOW_THREADS
        do
            put = write(closer_out, &fd, sizeof fd);  /* atomic: under PIPE_BUF */
        while (put < 0 && errno == EINTR);
        Py_END_ALLOW_THREADS
        queued = put == (ssize_t)sizeof fd;
        if (!queued)
            atomic_fetch_sub(&closer_queued, 1);
    }
    if (!queued) {
        Py_BEGIN_ALLOW_THREADS
        (void)close(fd);
        Py_END_ALLOW_THREADS
    }
    return PyBool_FromLong(queued);
}
