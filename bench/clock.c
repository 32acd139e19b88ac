/* The benches' precise clock: clock TIMEFILE CMD [ARG...] runs CMD with the wall time taken
 * around the process alone (posix_spawn, which does not copy this process's page tables, then
 * wait4), writes "seconds 0 user system" to TIMEFILE (as /usr/bin/time -f "%e %M %U %S" would,
 * less the peak RSS) and exits with CMD's status (128 + the signal that ended it).
 *
 * bench/lib.sh builds it with cc when bench_clock=precise: timed from Python, whose fork copies
 * the interpreter's page tables, a process of 20 ms measured 2 to 5 ms longer here, a tenth or a
 * quarter of what it measured, and a process of 200 ms about the same 2 to 5 ms. */
#define _GNU_SOURCE
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>

extern char **environ;

static double seconds(const struct timeval *tv) { return (double)tv->tv_sec + (double)tv->tv_usec / 1e6; }

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: clock TIMEFILE CMD [ARG...]\n");
        return 2;
    }
    struct timespec t0, t1;
    pid_t pid;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int e = posix_spawnp(&pid, argv[2], NULL, NULL, argv + 2, environ);
    if (e) {
        fprintf(stderr, "%s: %s\n", argv[2], strerror(e));
        return 127;
    }
    int status;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0)
        if (errno != EINTR) {
            perror("wait4");
            return 2;
        }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double dt = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    FILE *f = fopen(argv[1], "w");
    if (!f || fprintf(f, "%.6f 0 %.6f %.6f\n", dt, seconds(&ru.ru_utime), seconds(&ru.ru_stime)) < 0 || fclose(f)) {
        perror(argv[1]);
        return 2;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
