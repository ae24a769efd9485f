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
 * ``files._close_later`` under ``CFI2SFRAME_CORE=python``, closes at once.
 *
 * ``copy_later`` runs ``copying.kernel_copy``'s loop and then ``start_writeback`` on a
 * thread of its own that never takes the GIL: the early copy of ``--emit elf``'s input
 * into its unnamed output (``files.start_copy``; libLLVM-14: 110 MB, ~35 ms of the
 * kernel's time) runs beside the conversion where a core is free.  A Python thread
 * did the same but took the GIL back after each call, and under load the command's
 * thread then waited for it to be scheduled.  The thread works on descriptors of its
 * own and tells how far it got and the error that stopped it (which ones are only a
 * refusal is ``kernel_copy``'s to say) through a pipe the caller reads once. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
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

/* One early copy: the thread's own descriptors, the bytes asked, the step per call, and
 * the pipe's write end that takes the outcome. */
struct copy_job {
    int source, target, told, replaced;
    int64_t length, step, ahead;
};

/* cachestat(2) (Linux 6.5; the same number on x86-64 and the generic table AArch64
 * uses), which the C library does not wrap yet: its range and what it counts. */
#if defined(__x86_64__) || defined(__aarch64__)
#define CACHESTAT_CALL 451
#endif
struct cachestat_range {
    uint64_t off, len;
};
struct cachestat_counts {
    uint64_t cache, dirty, writeback, evicted, recently_evicted;
};

/* The page cache of the file an output replaces, given back while the conversion runs,
 * where every page of it is clean: its last close (after the rename, at the exit)
 * then has none to truncate (libLLVM-14's 110 MB: 6-8 ms of CPU).  A dirty page or a
 * write in flight, or no cachestat, and nothing is asked (dropping would start the
 * writeback of a file about to be freed). */
static void drop_if_clean(int fd) {
#ifdef CACHESTAT_CALL
    struct cachestat_range whole = {0, 0};
    struct cachestat_counts counts;
    if (syscall(CACHESTAT_CALL, fd, &whole, &counts, 0) == 0 && counts.cache > 0
            && counts.dirty == 0 && counts.writeback == 0)
        (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
#else
    (void)fd;
#endif
}

/* The copying thread: ``kernel_copy``'s loop (each call from the offset reached, at
 * most ``step`` bytes; stopped by an error other than EINTR or by a call that copies
 * nothing), the writeback of its first ``ahead`` bytes started (at most those
 * copied; none where that is 0), then (bytes copied,
 * errno or 0) written to the pipe once the copy's descriptors are closed. */
static void *copying(void *arg) {
    struct copy_job *job = arg;
    int64_t done = 0, error = 0;
    while (done < job->length) {
        off_t from = (off_t)done, to = (off_t)done;
        int64_t left = job->length - done;
        ssize_t got = copy_file_range(job->source, &from, job->target, &to,
                                      (size_t)(left < job->step ? left : job->step), 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            error = errno;
        if (got <= 0)
            break;
        done += got;
    }
#ifdef SYNC_FILE_RANGE_WRITE
    int64_t ahead = done < job->ahead ? done : job->ahead;
    if (ahead > 0)
        (void)sync_file_range(job->target, 0, (off_t)ahead, SYNC_FILE_RANGE_WRITE);
#endif
    if (job->replaced >= 0) {
        drop_if_clean(job->replaced);
        (void)close(job->replaced);  /* never the last reference: the caller holds one */
    }
    (void)close(job->source);  /* first: none of the job's is open once it has told */
    (void)close(job->target);
    int64_t outcome[2] = {done, error};
    ssize_t put;
    do
        put = write(job->told, outcome, sizeof outcome);  /* atomic: under PIPE_BUF */
    while (put < 0 && errno == EINTR);
    (void)close(job->told);
    free(job);
    return NULL;
}

/* copy_later(source, target, length, step, ahead, replaced=-1) -> the read end of a
 * pipe that gives, once the thread is done, 16 bytes: the bytes copied and the errno
 * that stopped the copy (0: none), native int64s; or None where no thread could be had
 * (the caller copies).  ``replaced``: the file the output will replace, whose clean
 * page cache the thread drops once it has copied (``drop_if_clean``).  ``source`` and
 * ``target`` stay the caller's: the thread copies through duplicates. */
PyObject *copy_later(PyObject *Py_UNUSED(self), PyObject *args) {
    int source, target;
    long long length, step, ahead;
    int replaced = -1;
    if (!PyArg_ParseTuple(args, "iiLLL|i:copy_later", &source, &target, &length, &step, &ahead,
                          &replaced))
        return NULL;
    if (length < 0 || step <= 0 || ahead < 0) {
        PyErr_SetString(PyExc_ValueError, "copy_later: a negative length or ahead, or no step");
        return NULL;
    }
    struct copy_job *job = malloc(sizeof *job);
    if (job == NULL)
        return PyErr_NoMemory();
    int ends[2];
    job->source = fcntl(source, F_DUPFD_CLOEXEC, 0);
    job->target = fcntl(target, F_DUPFD_CLOEXEC, 0);
    /* (only a hint: where it cannot be had, nothing is dropped) */
    job->replaced = replaced < 0 ? -1 : fcntl(replaced, F_DUPFD_CLOEXEC, 0);
    if (job->source < 0 || job->target < 0 || pipe2(ends, O_CLOEXEC) != 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        goto failed;
    }
    job->told = ends[1];
    job->length = length;
    job->step = step;
    job->ahead = ahead;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t thread;
    int refused = pthread_create(&thread, NULL, copying, job);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (refused == 0) {
        pthread_detach(thread);
        return PyLong_FromLong(ends[0]);
    }
    (void)close(ends[0]);
    (void)close(ends[1]);
    (void)close(job->source);
    (void)close(job->target);
    if (job->replaced >= 0)
        (void)close(job->replaced);
    free(job);
    Py_RETURN_NONE;
failed:
    if (job->source >= 0)
        (void)close(job->source);
    if (job->target >= 0)
        (void)close(job->target);
    if (job->replaced >= 0)
        (void)close(job->replaced);
    free(job);
    return NULL;
}
