/*
 * pause: PID 1 of a pod sandbox for the local cluster (tools/local-cluster/images.sh).
 *
 * Holds the pod's namespaces open and does nothing else: it reaps every child that is
 * re-parented to it (so no zombies pile up when the pod shares its PID namespace) and
 * exits 0 on SIGINT or SIGTERM. Built static (gcc -static -O2) into a one-file image.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

/* Never runs (the signals stay blocked); installing it keeps the kernel from discarding
 * SIGINT/SIGTERM sent to a namespace's init whose disposition would be SIG_DFL. */
static void on_signal(int sig) { (void)sig; }

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "-v") == 0) {
        puts("tf-mnist pause 3.10");
        return 0;
    }

    sigset_t wanted;
    sigemptyset(&wanted);
    sigaddset(&wanted, SIGCHLD);
    sigaddset(&wanted, SIGINT);
    sigaddset(&wanted, SIGTERM);
    if (sigprocmask(SIG_BLOCK, &wanted, NULL) != 0) {
        perror("pause: sigprocmask");
        return 1;
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_NOCLDSTOP;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGCHLD, &sa, NULL) != 0 || sigaction(SIGINT, &sa, NULL) != 0 ||
        sigaction(SIGTERM, &sa, NULL) != 0) {
        perror("pause: sigaction");
        return 1;
    }

    for (;;) {
        int sig = sigwaitinfo(&wanted, NULL);
        if (sig < 0) {
            if (errno == EINTR) continue;
            perror("pause: sigwaitinfo");
            return 1;
        }
        if (sig == SIGINT || sig == SIGTERM) return 0;
        /* SIGCHLD: several exits can merge into one signal, so reap until none is left. */
        while (waitpid(-1, NULL, WNOHANG) > 0) {
        }
    }
}
