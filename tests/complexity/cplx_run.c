/* Run one command under limits and report what it cost, for complexity.py.
 *
 *     cplx_run AS_BYTES FSIZE_BYTES CPU_SECONDS WALL_SECONDS ERRFILE -- CMD ARGS...
 *
 * (0 for no limit.) The child gets stdin and stdout on /dev/null, stderr in
 * ERRFILE, its own process group, SIGXFSZ ignored (writes past FSIZE fail
 * with EFBIG instead of killing it) and no core files. Prints one line:
 *
 *     status=W utime=S stime=S maxrss_kb=K killed=0|1
 *
 * W is the raw wait status; killed=1 when the wall-clock limit ran out.
 * It exists because the ru_maxrss of a child forked by Python counts the
 * Python process it was copied from (tens of MiB) until exec; this process
 * is small, so the peak it reports is the command's own. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t timed_out;
static pid_t child;

static void on_alarm(int sig)
{
    (void)sig;
    timed_out = 1;
    if (child > 0)
        kill(-child, SIGKILL);
}

static void lim(int what, unsigned long long v)
{
    if (!v)
        return;
    struct rlimit r = {v, v};
    if (what == RLIMIT_CPU)
        r.rlim_max = v + 2; /* SIGXCPU at the soft limit, SIGKILL later */
    setrlimit(what, &r);
}

int main(int argc, char **argv)
{
    if (argc < 8 || strcmp(argv[6], "--")) {
        fprintf(stderr, "usage: cplx_run AS FSIZE CPU WALL ERRFILE -- CMD ARGS...\n");
        return 2;
    }
    unsigned long long as = strtoull(argv[1], NULL, 10), fsize = strtoull(argv[2], NULL, 10);
    unsigned long long cpu = strtoull(argv[3], NULL, 10), wall = strtoull(argv[4], NULL, 10);
    child = fork();
    if (child < 0) {
        perror("cplx_run: fork");
        return 2;
    }
    if (child == 0) {
        setpgid(0, 0);
        signal(SIGXFSZ, SIG_IGN);
        int null = open("/dev/null", O_RDWR), err = open(argv[5], O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (null < 0 || err < 0)
            _exit(126);
        dup2(null, 0);
        dup2(null, 1);
        dup2(err, 2);
        lim(RLIMIT_AS, as);
        lim(RLIMIT_FSIZE, fsize);
        lim(RLIMIT_CPU, cpu);
        struct rlimit core = {0, 0};
        setrlimit(RLIMIT_CORE, &core);
        execvp(argv[7], argv + 7);
        dprintf(err, "cplx_run: cannot run %s: %s\n", argv[7], strerror(errno));
        _exit(127);
    }
    setpgid(child, child);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    if (wall)
        alarm((unsigned)wall);
    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    while (wait4(child, &status, 0, &ru) < 0) {
        if (errno != EINTR) {
            perror("cplx_run: wait4");
            return 2;
        }
    }
    alarm(0);
    kill(-child, SIGKILL); /* anything it left behind in its group */
    printf("status=%d utime=%.6f stime=%.6f maxrss_kb=%ld killed=%d\n", status,
           ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6, ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6,
           ru.ru_maxrss, (int)timed_out);
    return 0;
}
